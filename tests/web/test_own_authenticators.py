"""The caller's own authenticators: listing, password change with the current password, certificate extension."""

from __future__ import annotations

from cryptography import x509

from controller.certificates.issuing import fingerprint
from controller.runtime.composition import Controller
from tests.certificates import csr_pem, new_key
from tests.conftest import CLIENT, MGMT, Api
from tests.support import make_user
from tests.web.test_cert_login import enrolled, login


async def test_only_own_authenticators_are_listed(admin: Api) -> None:
    identity_id, user = await make_user(admin, "own-1")
    _, other = await make_user(admin, "own-2")
    mine = (await user.get("/current-identity/authenticators", base=CLIENT))
    assert mine.status == 200
    assert [a["identityId"] for a in mine.data] == [identity_id]
    assert mine.body["meta"]["pagination"]["totalCount"] == 1
    item = mine.data[0]
    assert item["_links"] == {"self": {"href": f"./current-identity/authenticators/{item['id']}"}}
    assert (await other.get(f"/current-identity/authenticators/{item['id']}", base=CLIENT)).status == 404
    assert (await user.get(f"/current-identity/authenticators/{item['id']}", base=MGMT)).status == 200


async def test_password_change_needs_the_current_password(admin: Api, anon: Api) -> None:
    _, user = await make_user(admin, "own-3", "first-password")
    authenticator_id = (await user.get("/current-identity/authenticators", base=CLIENT)).data[0]["id"]
    path = f"/current-identity/authenticators/{authenticator_id}"
    wrong = await user.put(path, {"username": "own-3", "password": "second-password",
                                  "currentPassword": "not-it"}, base=CLIENT)
    assert (wrong.status, wrong.error["code"], wrong.error["cause"]["field"]) == (401, "UNAUTHORIZED",
                                                                                 "currentPassword")
    missing = await user.patch(path, {"password": "second-password"}, base=CLIENT)
    assert (missing.status, missing.error["cause"]["field"]) == (400, "currentPassword")
    changed = await user.put(path, {"username": "own-3", "password": "second-password",
                                    "currentPassword": "first-password"}, base=CLIENT)
    assert changed.status == 200, changed.body
    assert (await user.get("/current-identity", base=CLIENT)).status == 200  # the session stays
    assert (await anon.post("/authenticate", {"username": "own-3", "password": "first-password"},
                            query={"method": "password"})).status == 401
    renamed = await user.patch(path, {"username": "own-3-renamed", "currentPassword": "second-password"},
                               base=CLIENT)
    assert renamed.status == 200, renamed.body
    await anon.login("own-3-renamed", "second-password")
    _, other = await make_user(admin, "own-4")
    foreign = await other.patch(path, {"password": "x-password", "currentPassword": "second-password"},
                                base=CLIENT)
    assert foreign.status == 401


async def test_certificate_extension(admin: Api, anon: Api, controller: Controller) -> None:
    identity_id, old = await enrolled(admin, anon, "extender")
    session = await login(anon, old)
    client = anon.with_token(session.data["token"]).as_client()
    authenticator_id = (await client.get("/current-identity/authenticators")).data[0]["id"]
    path = f"/current-identity/authenticators/{authenticator_id}"

    async def session_fingerprints() -> list[str]:
        return [c["fingerprint"] for c in (await client.get("/current-api-session/certificates")).data]

    # The certificate the session logged in with is one of the session's certificates.
    assert await session_fingerprints() == [fingerprint(x509.load_pem_x509_certificate(old.encode()))]
    password_change = await client.put(path, {"username": "abcd", "password": "abcde", "currentPassword": "abcde"})
    assert (password_change.status, password_change.error["code"]) == (409, "CAN_NOT_UPDATE_AUTHENTICATOR")
    nothing_pending = await client.post(f"{path}/extend-verify", {"clientCert": old})
    assert (nothing_pending.status, nothing_pending.error["code"]) == (409, "CAN_NOT_UPDATE_AUTHENTICATOR")
    without_certificate = await client.post(f"{path}/extend", {"clientCertCsr": csr_pem(new_key())})
    assert without_certificate.status == 401
    extended = await client.post(f"{path}/extend", {"clientCertCsr": csr_pem(new_key())}, certificate=old)
    assert extended.status == 200, extended.body
    assert extended.data["ca"] == controller.pki.ca_pem.decode()
    new = extended.data["clientCert"]
    x509.load_pem_x509_certificate(new.encode()).verify_directly_issued_by(controller.pki.ca_cert)
    # Until verified, the old certificate works and the new one does not.
    assert (await login(anon, old)).status == 200
    assert (await login(anon, new)).status == 401
    wrong = await client.post(f"{path}/extend-verify", {"clientCert": old})
    assert (wrong.status, wrong.error["code"]) == (400, "INVALID_CLIENT_CERT")
    garbage = await client.post(f"{path}/extend-verify", {"clientCert": "not a certificate"})
    assert (garbage.status, garbage.error["code"]) == (400, "INVALID_CLIENT_CERT")
    verified = await client.post(f"{path}/extend-verify", {"clientCert": new})
    assert verified.status == 200, verified.body
    # The session now holds the new certificate instead of the old one.
    assert await session_fingerprints() == [fingerprint(x509.load_pem_x509_certificate(new.encode()))]
    assert (await login(anon, old)).status == 401
    assert (await login(anon, new)).status == 200
    detail = (await admin.get(f"/identities/{identity_id}")).data
    assert detail["authenticators"]["cert"]["fingerprint"] == fingerprint(
        x509.load_pem_x509_certificate(new.encode()))
