"""Certificate login (``POST /authenticate?method=cert``) in process: the TLS client certificate is handed to the app
as web/server.py records it for real connections (the ASGI TLS extension)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from controller.certificates.csr import load_csr
from controller.certificates.issuing import Issuer, certificate_pem
from controller.runtime.composition import Controller
from tests.certificates import Authority, csr_pem, new_key, pem
from tests.conftest import CLIENT, Api

_BODY = {"sdkInfo": {"type": "ziti-sdk-c", "version": "0.29.3"}, "envInfo": {"os": "linux", "arch": "x86_64"},
         "configTypes": ["all"]}


async def enrolled(admin: Api, anon: Api, name: str) -> tuple[str, str]:
    """A new identity enrolled by ott; returns (identity id, certificate PEM)."""
    reply = await admin.post("/identities", {"name": name, "type": "Device", "isAdmin": False,
                                             "enrollment": {"ott": True}})
    assert reply.status == 201, reply.body
    token = reply.data["enrollment"]["ott"]["token"]
    answer = await anon.post("/enroll", raw=csr_pem(new_key()).encode(), headers={"Content-Type": "text/plain"},
                             query={"method": "ott", "token": token}, base=CLIENT)
    assert answer.status == 200, answer.body
    return reply.data["id"], answer.raw.decode()


async def login(anon: Api, certificate: str | None, api: str = CLIENT) -> Any:
    return await anon.post("/authenticate", _BODY, query={"method": "cert"}, base=api, certificate=certificate)


@pytest.mark.parametrize("api", ["/edge/client/v1", "/edge/management/v1"])
async def test_an_enrolled_certificate_logs_in(admin: Api, anon: Api, api: str) -> None:
    identity_id, certificate = await enrolled(admin, anon, "cert-user")
    reply = await login(anon, certificate, api)
    assert reply.status == 200, reply.body
    assert reply.headers["zt-session"] == reply.data["token"]
    assert reply.data["identityId"] == identity_id
    assert reply.data["sdkInfo"] == _BODY["sdkInfo"]
    authenticator_id = (await admin.get(f"/identities/{identity_id}")).data["authenticators"]["cert"]["id"]
    assert reply.data["authenticatorId"] == authenticator_id
    me = await anon.with_token(reply.data["token"]).get("/current-identity", base=CLIENT)
    assert me.data["id"] == identity_id


async def test_without_a_certificate_or_with_an_unknown_one(admin: Api, anon: Api,
                                                            controller: Controller) -> None:
    await enrolled(admin, anon, "cert-user-2")
    assert (await login(anon, None)).error["code"] == "INVALID_AUTH"
    # Issued by the controller's CA, but no authenticator holds it.
    issuer = Issuer.from_pki(controller.pki)
    stray = issuer.client_certificate(load_csr(csr_pem(new_key()), "csr"), "stray", now=dt.datetime.now(dt.UTC))
    reply = await login(anon, certificate_pem(stray))
    assert (reply.status, reply.error["code"]) == (401, "INVALID_AUTH")
    # Issued by a CA the controller does not know.
    stranger = Authority.create().issue("stranger")
    assert (await login(anon, pem(stranger))).status == 401


async def test_policy_and_identity_state_decide(admin: Api, anon: Api) -> None:
    identity_id, certificate = await enrolled(admin, anon, "cert-user-3")
    policy = (await admin.get("/auth-policies/default")).data
    primary = policy["primary"]
    blocking = await admin.post("/auth-policies", {
        "name": "no-certs", "secondary": policy["secondary"],
        "primary": {**primary, "cert": {"allowed": False, "allowExpiredCerts": True}}})
    assert blocking.status == 201, blocking.body
    assert (await admin.patch(f"/identities/{identity_id}", {"authPolicyId": blocking.data["id"]})).status == 200
    assert (await login(anon, certificate)).status == 401
    assert (await admin.patch(f"/identities/{identity_id}", {"authPolicyId": "default"})).status == 200
    assert (await login(anon, certificate)).status == 200
    assert (await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": 0})).status == 200
    assert (await login(anon, certificate)).status == 401
    assert (await admin.post(f"/identities/{identity_id}/enable")).status == 200
    authenticator_id = (await admin.get(f"/identities/{identity_id}")).data["authenticators"]["cert"]["id"]
    session = await login(anon, certificate)
    assert (await admin.delete(f"/authenticators/{authenticator_id}")).status == 200
    # The deleted authenticator's certificate no longer logs in, and its sessions ended with it.
    assert (await login(anon, certificate)).status == 401
    assert (await anon.with_token(session.data["token"]).get("/current-identity", base=CLIENT)).status == 401


async def test_expired_certificates_follow_the_policy(admin: Api, anon: Api, controller: Controller) -> None:
    reply = await admin.post("/identities", {"name": "expired-holder", "type": "Device", "isAdmin": False})
    identity_id = reply.data["id"]
    # Valid for 30 s a minute after the CA began (the CA is at least five minutes old): expired now.
    issuer = Issuer.from_pki(controller.pki, client_validity=dt.timedelta(seconds=30))
    soon_after_ca = controller.pki.ca_cert.not_valid_before_utc + dt.timedelta(minutes=1)
    old = issuer.client_certificate(load_csr(csr_pem(new_key()), "csr"), identity_id, now=soon_after_ca)
    assert old.not_valid_after_utc < dt.datetime.now(dt.UTC)
    created = await admin.post("/authenticators", {"identityId": identity_id, "method": "cert",
                                                   "certPem": certificate_pem(old)})
    assert created.status == 201, created.body
    # The default policy allows expired certificates, as the reference's does.
    assert (await login(anon, certificate_pem(old))).status == 200
    policy = (await admin.get("/auth-policies/default")).data
    strict = await admin.post("/auth-policies", {
        "name": "strict", "secondary": policy["secondary"],
        "primary": {**policy["primary"], "cert": {"allowed": True, "allowExpiredCerts": False}}})
    assert (await admin.patch(f"/identities/{identity_id}", {"authPolicyId": strict.data["id"]})).status == 200
    assert (await login(anon, certificate_pem(old))).status == 401


async def test_admin_certificate_authenticators(admin: Api, anon: Api, controller: Controller) -> None:
    reply = await admin.post("/identities", {"name": "cert-by-admin", "type": "Device", "isAdmin": False})
    identity_id = reply.data["id"]
    foreign = Authority.create().issue("foreign")
    refused = await admin.post("/authenticators", {"identityId": identity_id, "method": "cert",
                                                   "certPem": pem(foreign)})
    assert (refused.status, refused.error["code"], refused.error["cause"]["field"]) == (
        400, "COULD_NOT_VALIDATE", "certPem")
    two = await admin.post("/authenticators", {"identityId": identity_id, "method": "cert",
                                               "certPem": controller.pki.ca_pem.decode() * 2})
    assert (two.status, two.error["code"]) == (400, "COULD_NOT_PARSE_PEM_BLOCK")
    issuer = Issuer.from_pki(controller.pki)
    mine = issuer.client_certificate(load_csr(csr_pem(new_key()), "csr"), identity_id, now=dt.datetime.now(dt.UTC))
    created = await admin.post("/authenticators", {"identityId": identity_id, "method": "cert",
                                                   "certPem": certificate_pem(mine)})
    assert created.status == 201, created.body
    second = await admin.post("/authenticators", {"identityId": identity_id, "method": "cert",
                                                  "certPem": certificate_pem(mine)})
    assert (second.status, second.error["code"]) == (409, "MAX_AUTHENTICATOR_METHODS_REACHED")
    patched = await admin.patch(f"/authenticators/{created.data['id']}", {"username": "sneaky"})
    assert (patched.status, patched.error["code"]) == (409, "CAN_NOT_UPDATE_AUTHENTICATOR")
    assert (await login(anon, certificate_pem(mine))).status == 200
