"""Identity enrolment: enrollments made by admins (with an identity, through /enrollments, by re-enrolment), their
JWTs, and the Client API's /enroll exchanging them for a certificate or a password."""

from __future__ import annotations

from typing import Any

import jwt
import pytest
import trio
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.certificates.issuing import fingerprint
from controller.clock import format_time, parse_time
from controller.runtime.composition import Controller
from tests.certificates import csr_pem, new_key
from tests.conftest import CLIENT, Api
from tests.support import make_user


async def _identity(admin: Api, name: str, enrollment: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "type": "Device", "isAdmin": False}
    if enrollment is not None:
        body["enrollment"] = enrollment
    reply = await admin.post("/identities", body)
    assert reply.status == 201, reply.body
    return dict((await admin.get(f"/identities/{reply.data['id']}")).data)


async def _enroll(anon: Api, token: str, csr: str, *, method: str = "ott", accept: str | None = None) -> Any:
    headers = {"Content-Type": "text/plain"}
    if accept is not None:
        headers["Accept"] = accept
    return await anon.post("/enroll", raw=csr.encode(), headers=headers, query={"method": method, "token": token},
                           base=CLIENT)


async def test_identity_with_ott_enrollment_shows_its_jwt(admin: Api, controller: Controller) -> None:
    identity = await _identity(admin, "device-1", {"ott": True})
    ott = identity["enrollment"]["ott"]
    assert set(ott) == {"id", "jwt", "token", "expiresAt"}
    key = controller.pki.server_cert.public_key()
    claims = jwt.decode(ott["jwt"], key, algorithms=["RS256"], options={"verify_aud": False})
    assert claims == {"em": "ott", "ctrls": None, "iss": controller.jwts.address, "sub": identity["id"],
                      "jti": ott["token"], "aud": [""], "exp": int(parse_time(ott["expiresAt"]))}
    assert jwt.get_unverified_header(ott["jwt"])["kid"] == controller.jwts.signer.kid
    lifetime = parse_time(ott["expiresAt"]) - parse_time(identity["createdAt"])
    assert abs(lifetime - 180 * 60) < 1
    enrollment = (await admin.get(f"/enrollments/{ott['id']}")).data
    assert (enrollment["method"], enrollment["identityId"], enrollment["jwt"]) == ("ott", identity["id"], ott["jwt"])
    listed = (await admin.get(f"/identities/{identity['id']}/enrollments")).data
    assert [e["id"] for e in listed] == [ott["id"]]


async def test_only_one_enrollment_by_priority(admin: Api) -> None:
    identity = await _identity(admin, "device-2", {"ott": True, "updb": "device-2-user"})
    assert set(identity["enrollment"]) == {"ott"}
    identity = await _identity(admin, "device-3", {"ott": False, "updb": "device-3-user"})
    assert set(identity["enrollment"]) == {"updb"}
    assert set(identity["enrollment"]["updb"]) == {"id", "jwt", "token", "expiresAt"}


async def test_ott_enrolment_issues_a_certificate_and_consumes_the_token(admin: Api, anon: Api,
                                                                         controller: Controller) -> None:
    identity = await _identity(admin, "device-4", {"ott": True})
    token = identity["enrollment"]["ott"]["token"]
    key = new_key()
    reply = await _enroll(anon, token, csr_pem(key, identity["id"]))
    assert reply.status == 200, reply.body
    assert reply.headers["Content-Type"].startswith("application/x-pem-file")
    certificate = x509.load_pem_x509_certificate(reply.raw)
    certificate.verify_directly_issued_by(controller.pki.ca_cert)
    assert certificate.public_key() == key.public_key()
    assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == identity["id"]
    usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    detail = (await admin.get(f"/identities/{identity['id']}")).data
    assert detail["enrollment"] == {}
    assert detail["authenticators"]["cert"]["fingerprint"] == fingerprint(certificate)
    authenticator = (await admin.get(f"/authenticators/{detail['authenticators']['cert']['id']}")).data
    assert (authenticator["method"], authenticator["identityId"]) == ("cert", identity["id"])
    assert x509.load_pem_x509_certificate(authenticator["certPem"].encode()) == certificate
    assert "username" not in authenticator
    again = await _enroll(anon, token, csr_pem(new_key()))
    assert (again.status, again.error["code"]) == (400, "INVALID_ENROLLMENT_TOKEN")


async def test_ott_answers_json_when_asked_or_on_the_sub_path(admin: Api, anon: Api) -> None:
    first = await _identity(admin, "device-5", {"ott": True})
    reply = await _enroll(anon, first["enrollment"]["ott"]["token"], csr_pem(new_key()), accept="application/json")
    assert reply.status == 200, reply.body
    assert set(reply.data) == {"cert"} and reply.data["cert"].startswith("-----BEGIN CERTIFICATE-----")
    second = await _identity(admin, "device-6", {"ott": True})
    reply = await anon.post("/enroll/ott", {"token": second["enrollment"]["ott"]["token"],
                                            "clientCsr": csr_pem(new_key())}, base=CLIENT)
    assert reply.status == 200, reply.body
    assert reply.data["cert"].startswith("-----BEGIN CERTIFICATE-----")


async def test_root_enroll_path_works_for_old_sdks(admin: Api, anon: Api) -> None:
    identity = await _identity(admin, "device-7", {"ott": True})
    reply = await anon.post("/enroll", raw=csr_pem(new_key()).encode(), headers={"Content-Type": "text/plain"},
                            query={"method": "ott", "token": identity["enrollment"]["ott"]["token"]}, base="")
    assert reply.status == 200, reply.raw
    x509.load_pem_x509_certificate(reply.raw)


@pytest.mark.parametrize(("token", "body", "content_type", "code"), [
    ("11111111-1111-4111-8111-111111111111", "csr", "text/plain", "INVALID_ENROLLMENT_TOKEN"),
    (None, "csr", "text/plain", "INVALID_ENROLLMENT_TOKEN"),
    ("valid", "not a csr", "text/plain", "COULD_NOT_PROCESS_CSR"),
    ("valid", "", "text/plain", "COULD_NOT_PROCESS_CSR"),
    ("valid", "csr", "image/png", "INVALID_CONTENT_TYPE"),
    ("valid", "{not json", "application/json", "COULD_NOT_PARSE_BODY"),
])
async def test_enrolment_errors(admin: Api, anon: Api, token: str | None, body: str, content_type: str,
                                code: str) -> None:
    identity = await _identity(admin, "device-8", {"ott": True})
    if token == "valid":
        token = identity["enrollment"]["ott"]["token"]
    data = csr_pem(new_key()) if body == "csr" else body
    query = {"method": "ott", **({"token": token} if token else {})}
    reply = await anon.post("/enroll", raw=data.encode(), headers={"Content-Type": content_type}, query=query,
                            base=CLIENT)
    assert (reply.status, reply.error["code"]) == (400, code), reply.body
    # Nothing was consumed: the enrollment is still there.
    assert (await admin.get(f"/identities/{identity['id']}")).data["enrollment"]["ott"]


async def test_expired_enrollment_is_refused(admin: Api, anon: Api, autojump_clock: trio.testing.MockClock,
                                             controller: Controller) -> None:
    identity = await _identity(admin, "device-9")
    expires = format_time(controller.clock.now() + 60)
    reply = await admin.post("/enrollments", {"method": "ott", "identityId": identity["id"], "expiresAt": expires})
    assert reply.status == 201, reply.body
    token = reply.data["token"]
    await trio.sleep(61)
    answer = await _enroll(anon, token, csr_pem(new_key()))
    assert (answer.status, answer.error["code"]) == (400, "ENROLLMENT_EXPIRED")
    refreshed = await admin.post(f"/enrollments/{reply.data['id']}/refresh",
                                 {"expiresAt": format_time(controller.clock.now() + 600)})
    assert refreshed.status == 200, refreshed.body
    assert refreshed.data["token"] != token
    old = await _enroll(anon, token, csr_pem(new_key()))
    assert (old.status, old.error["code"]) == (400, "INVALID_ENROLLMENT_TOKEN")
    new = await _enroll(anon, refreshed.data["token"], csr_pem(new_key()))
    assert new.status == 200, new.body


async def test_enrollment_create_rules(admin: Api, controller: Controller) -> None:
    identity = await _identity(admin, "device-10")
    later = format_time(controller.clock.now() + 3600)
    base = {"method": "ott", "identityId": identity["id"], "expiresAt": later}
    created = await admin.post("/enrollments", base)
    assert created.status == 201, created.body
    assert created.data["jwt"] and created.data["identity"]["id"] == identity["id"]
    duplicate = await admin.post("/enrollments", base)
    assert (duplicate.status, duplicate.error["code"]) == (409, "ENROLLMENT_EXISTS")
    assert duplicate.error["cause"]["field"] == "method"
    cases = [({**base, "identityId": "missing"}, "identityId"),
             ({**base, "expiresAt": format_time(controller.clock.now() - 1)}, "expiresAt"),
             ({**base, "method": "updb"}, "username"),
             ({**base, "method": "ottca"}, "caId"),
             ({**base, "method": "ottca", "caId": "missing"}, "caId")]
    for body, named in cases:
        reply = await admin.post("/enrollments", body)
        assert (reply.status, reply.error["code"]) == (400, "REFERENCED_ENTITY_NOT_FOUND"), (body, reply.body)
        assert f"for '{named}' is invalid" in reply.error["cause"]["message"]
    missing = await admin.post("/enrollments", {"method": "ott", "identityId": identity["id"]})
    assert (missing.status, missing.error["code"], missing.error["cause"]["field"]) == (
        400, "COULD_NOT_VALIDATE", "expiresAt")
    past = await admin.post(f"/enrollments/{created.data['id']}/refresh",
                            {"expiresAt": format_time(controller.clock.now() - 5)})
    assert (past.status, past.error["code"], past.error["cause"]["field"]) == (400, "COULD_NOT_VALIDATE",
                                                                              "expiresAt")
    unknown = await admin.post("/enrollments/missing/refresh", {"expiresAt": later})
    assert unknown.status == 404
    user = (await make_user(admin, "not-an-admin"))[1]
    assert (await user.post("/enrollments", base)).status == 401
    assert (await admin.delete(f"/enrollments/{created.data['id']}")).status == 200
    assert (await admin.get(f"/enrollments/{created.data['id']}")).status == 404


async def test_updb_enrolment_sets_the_password(admin: Api, anon: Api) -> None:
    identity = await _identity(admin, "device-11", {"updb": "device-11-login"})
    token = identity["enrollment"]["updb"]["token"]
    short = await anon.post("/enroll", {"password": "abc"}, query={"method": "updb", "token": token}, base=CLIENT)
    assert (short.status, short.error["code"]) == (400, "COULD_NOT_VALIDATE")
    reply = await anon.post("/enroll", {"password": "a-good-password"}, query={"method": "updb", "token": token},
                            base=CLIENT)
    assert reply.status == 200, reply.body
    assert reply.body == {"data": {}, "meta": {}}
    user = await anon.login("device-11-login", "a-good-password")
    me = await user.get("/current-identity")
    assert me.data["id"] == identity["id"]
    assert (await admin.get(f"/identities/{identity['id']}")).data["authenticators"]["updb"]["username"] == \
        "device-11-login"


async def test_deleting_the_identity_deletes_its_enrollments(admin: Api) -> None:
    identity = await _identity(admin, "device-12", {"ott": True})
    enrollment_id = identity["enrollment"]["ott"]["id"]
    assert (await admin.delete(f"/identities/{identity['id']}")).status == 200
    assert (await admin.get(f"/enrollments/{enrollment_id}")).status == 404


async def test_reenrolling_an_authenticator_ends_its_sessions(admin: Api, controller: Controller) -> None:
    identity_id, user = await make_user(admin, "reenrolled-user")
    authenticator_id = (await admin.get(f"/identities/{identity_id}")).data["authenticators"]["updb"]["id"]
    later = format_time(controller.clock.now() + 3600)
    reply = await admin.post(f"/authenticators/{authenticator_id}/re-enroll", {"expiresAt": later})
    assert reply.status == 201, reply.body
    assert (reply.data["method"], reply.data["identityId"]) == ("updb", identity_id)
    assert (await admin.get(f"/authenticators/{authenticator_id}")).status == 404
    assert (await user.get("/current-identity")).status == 401
    again = await admin.post(f"/authenticators/{authenticator_id}/re-enroll", {"expiresAt": later})
    assert again.status == 404


async def test_certificate_reenrols_as_ott(admin: Api, anon: Api, controller: Controller) -> None:
    identity = await _identity(admin, "device-13", {"ott": True})
    await _enroll(anon, identity["enrollment"]["ott"]["token"], csr_pem(new_key()))
    authenticator_id = (await admin.get(f"/identities/{identity['id']}")).data["authenticators"]["cert"]["id"]
    later = format_time(controller.clock.now() + 3600)
    reply = await admin.post(f"/authenticators/{authenticator_id}/re-enroll", {"expiresAt": later})
    assert reply.status == 201, reply.body
    assert reply.data["method"] == "ott"


async def test_enrolment_jwks_and_challenge(anon: Api, controller: Controller) -> None:
    keys = (await anon.get("/enroll/jwks", base=CLIENT)).body
    assert [k["kid"] for k in keys["keys"]] == [controller.jwts.signer.kid]
    nonce = "6b1d5c4e-2c0f-4bb6-9d4c-0f1f5e3c2a10"
    reply = await anon.post("/enroll/challenge", {"nonce": nonce, "keyId": controller.jwts.signer.kid}, base=CLIENT)
    assert reply.status == 200, reply.body
    key = jwt.PyJWK(keys["keys"][0])
    assert key.Algorithm.verify(nonce.encode(), key.key, jwt.utils.base64url_decode(reply.body["signature"]))
    wrong = await anon.post("/enroll/challenge", {"nonce": nonce, "keyId": "other"}, base=CLIENT)
    assert wrong.status == 400
