"""Certificates over real TLS: each enrolment and certificate flow with httpx presenting client certificates to
``serve_controller`` (the TLS layer asks for a certificate, trusts the controller's CA and every CA created since
start, and hands the certificate to the application)."""

from __future__ import annotations

import datetime as dt
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from controller.certificates.csr import load_csr
from controller.certificates.issuing import Issuer, certificate_pem
from tests.certificates import Authority, csr_pem, new_key, pem
from tests.e2e.test_e2e import ADMIN, Server, running

CLIENT = "/edge/client/v1"


class Endpoint:
    """A TLS client of one server, presenting ``certificate`` (or none)."""

    def __init__(self, server: Server, tmp: Path, name: str, certificate: str | None = None,
                 key: ec.EllipticCurvePrivateKey | None = None) -> None:
        context = ssl.create_default_context(cafile=str(server.controller.pki.ca_cert_path))
        if certificate is not None and key is not None:
            (tmp / f"{name}.pem").write_text(certificate)
            (tmp / f"{name}.key").write_bytes(key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
            context.load_cert_chain(tmp / f"{name}.pem", tmp / f"{name}.key")
        self.client = httpx.AsyncClient(base_url=server.url, verify=context, timeout=30)

    async def login(self) -> httpx.Response:
        return await self.client.post(f"{CLIENT}/authenticate", params={"method": "cert"}, json={})

    async def __aenter__(self) -> Endpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()


@asynccontextmanager
async def _admin(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with server.client() as client:
        reply = await client.post("/authenticate", params={"method": "password"}, json=ADMIN)
        client.headers["zt-session"] = reply.json()["data"]["token"]
        yield client


async def _created(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await client.post(path, json=body)
    assert reply.status_code == 201, reply.text
    return dict(reply.json()["data"])


async def test_ott_enrolment_login_extension_and_reenrolment(tmp_path: Path) -> None:
    async with running(tmp_path / "data") as server, _admin(server) as admin:
        identity = await _created(admin, "/identities", {"name": "laptop", "type": "Device", "isAdmin": False,
                                                         "enrollment": {"ott": True}})
        key = new_key()
        async with Endpoint(server, tmp_path, "anonymous") as anonymous:
            enrolled = await anonymous.client.post(
                "/enroll", params={"method": "ott", "token": identity["enrollment"]["ott"]["token"]},
                content=csr_pem(key), headers={"Content-Type": "text/plain"})
            assert enrolled.status_code == 200, enrolled.text
            assert (await anonymous.login()).status_code == 401  # no certificate presented
        certificate = enrolled.text
        async with Endpoint(server, tmp_path, "first", certificate, key) as first:
            login = await first.login()
            assert login.status_code == 200, login.text
            first.client.headers["zt-session"] = login.json()["data"]["token"]
            me = await first.client.get(f"{CLIENT}/current-identity")
            assert me.json()["data"]["id"] == identity["id"]
            authenticator = (await first.client.get(f"{CLIENT}/current-identity/authenticators")).json()["data"][0]
            new_key_ = new_key()
            extended = await first.client.post(
                f"{CLIENT}/current-identity/authenticators/{authenticator['id']}/extend",
                json={"clientCertCsr": csr_pem(new_key_)})
            assert extended.status_code == 200, extended.text
            new_certificate = extended.json()["data"]["clientCert"]
            verified = await first.client.post(
                f"{CLIENT}/current-identity/authenticators/{authenticator['id']}/extend-verify",
                json={"clientCert": new_certificate})
            assert verified.status_code == 200, verified.text
            assert (await first.login()).status_code == 401  # the old certificate is done
        async with Endpoint(server, tmp_path, "second", new_certificate, new_key_) as second:
            assert (await second.login()).status_code == 200
            expires = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z")
            reenrolled = await admin.post(f"/authenticators/{authenticator['id']}/re-enroll",
                                          json={"expiresAt": expires})
            assert reenrolled.status_code == 201, reenrolled.text
            # A certificate whose authenticator is gone no longer logs in.
            assert (await second.login()).status_code == 401


async def test_third_party_cas_at_run_time(tmp_path: Path) -> None:
    async with running(tmp_path / "data") as server, _admin(server) as admin:
        authority = Authority.create("Run-time CA")
        ca = await _created(admin, "/cas", {"name": "runtime", "certPem": authority.pem, "identityRoles": [],
                                           "isAuthEnabled": True, "isAutoCaEnrollmentEnabled": True,
                                           "isOttCaEnrollmentEnabled": True})
        key = new_key()
        certificate = pem(authority.issue("gadget", key))
        async with Endpoint(server, tmp_path, "gadget", certificate, key) as gadget:
            # TLS accepts the new CA's certificate at once; the unverified CA may not enrol it yet.
            refused = await gadget.client.post("/enroll", params={"method": "ca"}, json={})
            assert refused.json()["error"]["code"] == "CERT_FAILED_VALIDATION"
            proof = pem(authority.issue(ca["verificationToken"]))
            verified = await admin.post(f"/cas/{ca['id']}/verify", content=proof,
                                        headers={"Content-Type": "text/plain"})
            assert verified.status_code == 200, verified.text
            enrolled = await gadget.client.post("/enroll", params={"method": "ca"}, json={})
            assert enrolled.status_code == 200, enrolled.text
            assert (await gadget.login()).status_code == 200
            assert (await admin.patch(f"/cas/{ca['id']}", json={"isAuthEnabled": False})).status_code == 200
            assert (await gadget.login()).status_code == 401
        ottca_identity = await _created(admin, "/identities", {"name": "ottca", "type": "User", "isAdmin": False,
                                                               "enrollment": {"ottca": ca["id"]}})
        key = new_key()
        async with Endpoint(server, tmp_path, "ottca", pem(authority.issue("ottca", key)), key) as holder:
            token = ottca_identity["enrollment"]["ottca"]["token"]
            enrolled = await holder.client.post("/enroll", params={"method": "ottca", "token": token}, json={})
            assert enrolled.status_code == 200, enrolled.text


async def test_expired_certificates_and_router_enrolment(tmp_path: Path) -> None:
    async with running(tmp_path / "data") as server, _admin(server) as admin:
        identity = await _created(admin, "/identities", {"name": "old-laptop", "type": "Device", "isAdmin": False})
        issuer = Issuer.from_pki(server.controller.pki, client_validity=dt.timedelta(seconds=30))
        started = server.controller.pki.ca_cert.not_valid_before_utc + dt.timedelta(minutes=1)
        key = new_key()
        expired = issuer.client_certificate(load_csr(csr_pem(key), "csr"), identity["id"], now=started)
        await _created(admin, "/authenticators", {"identityId": identity["id"], "method": "cert",
                                                  "certPem": certificate_pem(expired)})
        policy = (await admin.get("/auth-policies/default")).json()["data"]
        strict = await _created(admin, "/auth-policies", {
            "name": "strict", "secondary": policy["secondary"],
            "primary": {**policy["primary"], "cert": {"allowed": True, "allowExpiredCerts": False}}})
        async with Endpoint(server, tmp_path, "expired", certificate_pem(expired), key) as holder:
            assert (await holder.login()).status_code == 200  # TLS and the default policy accept it
            await admin.patch(f"/identities/{identity['id']}", json={"authPolicyId": strict["id"]})
            assert (await holder.login()).status_code == 401
        router = await _created(admin, "/edge-routers", {"name": "er-tls"})
        router_key = new_key()
        async with Endpoint(server, tmp_path, "router-enrol") as anonymous:
            enrolled = await anonymous.client.post(
                "/enroll", params={"method": "erott", "token": router["enrollmentToken"]},
                json={"certCsr": csr_pem(router_key), "serverCertCsr": csr_pem(new_key())})
            assert enrolled.status_code == 200, enrolled.text
        client_certificate = enrolled.json()["data"]["cert"]
        assert x509.load_pem_x509_certificate(client_certificate.encode())
        async with Endpoint(server, tmp_path, "router", client_certificate, router_key) as enrolled_router:
            extended = await enrolled_router.client.post(
                "/enroll/extend/router", json={"certCsr": csr_pem(new_key()), "serverCertCsr": csr_pem(new_key())})
            assert extended.status_code == 200, extended.text
            assert set(extended.json()["data"]) == {"cert", "serverCert"}
