"""Third-party CAs in enrolment and login: ottca, automatic CA enrolment, external-id claims, and what an unverified
or auth-disabled CA may no longer do."""

from __future__ import annotations

from typing import Any

from cryptography import x509

from controller.certificates.issuing import fingerprint
from tests.certificates import Authority, pem
from tests.conftest import CLIENT, Api

_FLAGS = {"isAuthEnabled": True, "isAutoCaEnrollmentEnabled": True, "isOttCaEnrollmentEnabled": True}


async def _ca(admin: Api, name: str, *, verified: bool = True, **fields: Any) -> tuple[Authority, dict[str, Any]]:
    authority = Authority.create(name)
    body = {"name": name, "certPem": authority.pem, "identityRoles": ["from-ca"], **_FLAGS, **fields}
    reply = await admin.post("/cas", body)
    assert reply.status == 201, reply.body
    ca = dict(reply.data)
    if verified:
        proof = authority.issue(ca["verificationToken"])
        answer = await admin.post(f"/cas/{ca['id']}/verify", raw=pem(proof).encode(),
                                  headers={"Content-Type": "text/plain"})
        assert answer.status == 200, answer.body
    return authority, ca


async def _enrol_ca(anon: Api, certificate: x509.Certificate, body: dict[str, Any] | None = None) -> Any:
    return await anon.post("/enroll", body or {}, query={"method": "ca"}, base=CLIENT, certificate=pem(certificate))


async def _cert_login(anon: Api, certificate: x509.Certificate) -> Any:
    return await anon.post("/authenticate", {}, query={"method": "cert"}, base=CLIENT, certificate=pem(certificate))


async def test_ottca_enrols_the_presented_certificate(admin: Api, anon: Api) -> None:
    authority, ca = await _ca(admin, "ottca-ca")
    reply = await admin.post("/identities", {"name": "ottca-user", "type": "User", "isAdmin": False,
                                             "enrollment": {"ottca": ca["id"]}})
    identity = (await admin.get(f"/identities/{reply.data['id']}")).data
    ottca = identity["enrollment"]["ottca"]
    assert (ottca["caId"], ottca["ca"]["id"]) == (ca["id"], ca["id"])
    token = ottca["token"]
    stranger = Authority.create().issue("ottca-user")
    refused = await anon.post("/enroll", {}, query={"method": "ottca", "token": token}, base=CLIENT,
                              certificate=pem(stranger))
    assert (refused.status, refused.error["code"]) == (400, "CERT_FAILED_VALIDATION")
    certificate = authority.issue("ottca-user")
    enrolled = await anon.post("/enroll", {}, query={"method": "ottca", "token": token}, base=CLIENT,
                               certificate=pem(certificate))
    assert enrolled.status == 200, enrolled.body
    detail = (await admin.get(f"/identities/{identity['id']}")).data
    assert detail["authenticators"]["cert"]["fingerprint"] == fingerprint(certificate)
    login = await _cert_login(anon, certificate)
    assert (login.status, login.data["identityId"]) == (200, identity["id"])
    # Authentication through the CA can be switched off, and the certificate stops logging in.
    assert (await admin.patch(f"/cas/{ca['id']}", {"isAuthEnabled": False})).status == 200
    assert (await _cert_login(anon, certificate)).status == 401


async def test_ottca_needs_a_verified_ca(admin: Api, anon: Api) -> None:
    authority, ca = await _ca(admin, "unverified-ca", verified=False)
    reply = await admin.post("/identities", {"name": "waiting", "type": "User", "isAdmin": False,
                                             "enrollment": {"ottca": ca["id"]}})
    token = (await admin.get(f"/identities/{reply.data['id']}")).data["enrollment"]["ottca"]["token"]
    refused = await anon.post("/enroll", {}, query={"method": "ottca", "token": token}, base=CLIENT,
                              certificate=pem(authority.issue("waiting")))
    assert (refused.status, refused.error["code"]) == (400, "ENROLLMENT_CA_NOT_VALID")


async def test_automatic_ca_enrolment(admin: Api, anon: Api) -> None:
    nothing = await _enrol_ca(anon, Authority.create().issue("early"))
    assert (nothing.status, nothing.error["code"]) == (400, "ENROLLMENT_NO_VALID_CAS")
    authority, ca = await _ca(admin, "auto-ca")
    certificate = authority.issue("gadget")
    reply = await _enrol_ca(anon, certificate)
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    found = (await admin.get("/identities", query={"filter": 'name = "auto-ca-gadget"'})).data
    assert len(found) == 1
    assert found[0]["roleAttributes"] == ["from-ca"]
    assert found[0]["authenticators"]["cert"]["fingerprint"] == fingerprint(certificate)
    login = await _cert_login(anon, certificate)
    assert (login.status, login.data["identityId"]) == (200, found[0]["id"])
    again = await _enrol_ca(anon, certificate)
    assert (again.status, again.error["code"]) == (409, "CERT_IN_USE")
    # The same name again gets a counter; a requested name fills [requestedName].
    second = authority.issue("gadget")
    assert (await _enrol_ca(anon, second)).status == 200
    assert (await admin.get("/identities", query={"filter": 'name = "auto-ca-gadget000001"'})).data
    assert (await admin.patch(f"/cas/{ca['id']}", {"identityNameFormat": "[requestedName]@[caName]"})).status == 200
    assert (await _enrol_ca(anon, authority.issue("third"), {"name": "chosen"})).status == 200
    assert (await admin.get("/identities", query={"filter": 'name = "chosen@auto-ca"'})).data
    # Certificates of unknown, unverified or non-enrolling CAs are refused.
    assert (await _enrol_ca(anon, Authority.create().issue("x"))).error["code"] == "CERT_FAILED_VALIDATION"
    unverified, _ = await _ca(admin, "auto-unverified", verified=False)
    assert (await _enrol_ca(anon, unverified.issue("y"))).error["code"] == "CERT_FAILED_VALIDATION"
    closed, _ = await _ca(admin, "auto-closed", isAutoCaEnrollmentEnabled=False)
    assert (await _enrol_ca(anon, closed.issue("z"))).error["code"] == "CERT_FAILED_VALIDATION"
    no_certificate = await anon.post("/enroll", {}, query={"method": "ca"}, base=CLIENT)
    assert no_certificate.error["code"] == "CERT_FAILED_VALIDATION"


async def test_external_id_claims_name_the_identity(admin: Api, anon: Api) -> None:
    claim = {"location": "COMMON_NAME", "matcher": "PREFIX", "matcherCriteria": "emp-", "parser": "NONE",
             "parserCriteria": "", "index": 0}
    authority, _ = await _ca(admin, "claims-ca", externalIdClaim=claim)
    existing = await admin.post("/identities", {"name": "alice", "type": "User", "isAdmin": False,
                                                "externalId": "alice-42"})
    certificate = authority.issue("emp-alice-42")
    assert (await _enrol_ca(anon, certificate)).status == 200
    # Nobody new: the identity that has the external id is the certificate's.
    assert len((await admin.get("/identities", query={"filter": 'externalId = "alice-42"'})).data) == 1
    login = await _cert_login(anon, certificate)
    assert (login.status, login.data["identityId"], login.data["authenticatorId"]) == (
        200, existing.data["id"], "internal")
    # A certificate whose external id nobody has makes a new identity with it.
    assert (await _enrol_ca(anon, authority.issue("emp-bob-7"))).status == 200
    bob = (await admin.get("/identities", query={"filter": 'externalId = "bob-7"'})).data
    assert len(bob) == 1 and bob[0]["authenticators"] == {}
    missing = await _enrol_ca(anon, authority.issue("contractor-9"))
    assert (missing.status, missing.error["code"]) == (400, "MISSING_CERT_CLAIM")
