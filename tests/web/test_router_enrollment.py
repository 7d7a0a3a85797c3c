"""Router enrolment (erott/trott), certificate extension by a router, and re-enrolment by an admin."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
import trio
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.certificates.issuing import fingerprint
from controller.runtime.composition import Controller
from tests.certificates import csr_pem, new_key
from tests.conftest import CLIENT, Api

_SANS = (x509.DNSName("router.example"), x509.IPAddress(ipaddress.ip_address("10.1.2.3")))


def _csrs() -> dict[str, str]:
    return {"certCsr": csr_pem(new_key(), "router"), "serverCertCsr": csr_pem(new_key(), "router", _SANS)}


async def _enroll(anon: Api, token: str, body: dict[str, Any]) -> Any:
    return await anon.post("/enroll", body, query={"method": "erott", "token": token}, base=CLIENT)


@pytest.mark.parametrize(("kind", "method"), [("edge-routers", "erott"), ("routers", "trott")])
async def test_router_enrols_with_two_csrs(admin: Api, anon: Api, controller: Controller, kind: str,
                                           method: str) -> None:
    router = (await admin.post(f"/{kind}", {"name": f"{kind}-1"})).data
    token = router["enrollmentToken"]
    enrollments = (await admin.get("/enrollments", query={"filter": f'method = "{method}"'})).data
    assert [e["token"] for e in enrollments] == [token]
    reply = await anon.post("/enroll", _csrs(), query={"method": method, "token": token}, base=CLIENT)
    assert reply.status == 200, reply.body
    assert set(reply.data) == {"cert", "serverCert", "ca"}
    assert reply.data["ca"] == controller.pki.ca_pem.decode()
    client = x509.load_pem_x509_certificate(reply.data["cert"].encode())
    server = x509.load_pem_x509_certificate(reply.data["serverCert"].encode())
    for certificate in (client, server):
        certificate.verify_directly_issued_by(controller.pki.ca_cert)
        assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == router["id"]
    usages = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in list(usages)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(names) == list(_SANS)
    detail = (await admin.get(f"/{kind}/{router['id']}")).data
    assert detail["isVerified"] is True
    assert detail["fingerprint"] == fingerprint(client)
    assert x509.load_pem_x509_certificate(detail["certPem"].encode()) == client
    assert (detail["enrollmentToken"], detail["enrollmentJwt"]) == (None, None)
    again = await anon.post("/enroll", _csrs(), query={"method": method, "token": token}, base=CLIENT)
    assert (again.status, again.error["code"]) == (400, "INVALID_ENROLLMENT_TOKEN")


async def test_router_enrolment_errors(admin: Api, anon: Api) -> None:
    router = (await admin.post("/edge-routers", {"name": "er-errors"})).data
    token = router["enrollmentToken"]
    missing = await _enroll(anon, token, {"certCsr": csr_pem(new_key())})
    assert (missing.status, missing.error["code"]) == (400, "MISSING_OR_INVALID_CSR")
    bad = await _enroll(anon, token, {"certCsr": csr_pem(new_key()), "serverCertCsr": "garbage"})
    assert (bad.status, bad.error["code"]) == (400, "COULD_NOT_PROCESS_CSR")
    # The spec's names for the two CSRs work too.
    spec = await anon.post("/enroll/erott", {"token": token, "clientCsr": csr_pem(new_key()),
                                             "serverCsr": csr_pem(new_key())}, base=CLIENT)
    assert spec.status == 200, spec.body


async def test_expired_router_enrollment(admin: Api, anon: Api, autojump_clock: trio.testing.MockClock) -> None:
    router = (await admin.post("/edge-routers", {"name": "er-late"})).data
    await trio.sleep(180 * 60 + 1)
    reply = await _enroll(anon, router["enrollmentToken"], _csrs())
    assert (reply.status, reply.error["code"]) == (400, "ENROLLMENT_EXPIRED")


async def test_router_extends_then_admin_reenrols(admin: Api, anon: Api) -> None:
    router = (await admin.post("/edge-routers", {"name": "er-extend"})).data
    first = (await _enroll(anon, router["enrollmentToken"], _csrs())).data["cert"]
    no_cert = await anon.post("/enroll/extend/router", _csrs(), base=CLIENT)
    assert (no_cert.status, no_cert.error["code"]) == (401, "UNAUTHORIZED")
    incomplete = await anon.post("/enroll/extend/router", {"certCsr": csr_pem(new_key())}, base=CLIENT,
                                 certificate=first)
    assert (incomplete.status, incomplete.error["code"]) == (400, "COULD_NOT_VALIDATE")
    extended = await anon.post("/enroll/extend/router", _csrs(), base=CLIENT, certificate=first)
    assert extended.status == 200, extended.body
    assert set(extended.data) == {"cert", "serverCert"}
    second = extended.data["cert"]
    detail = (await admin.get(f"/edge-routers/{router['id']}")).data
    assert detail["fingerprint"] == fingerprint(x509.load_pem_x509_certificate(second.encode()))
    # The old certificate stopped working at once.
    stale = await anon.post("/enroll/extend/router", _csrs(), base=CLIENT, certificate=first)
    assert stale.status == 401
    assert (await admin.post(f"/edge-routers/{router['id']}/re-enroll", {})).status == 200
    detail = (await admin.get(f"/edge-routers/{router['id']}")).data
    assert (detail["isVerified"], detail["fingerprint"], detail["certPem"]) == (False, "", None)
    assert detail["enrollmentToken"] not in (None, router["enrollmentToken"])
    assert (await anon.post("/enroll/extend/router", _csrs(), base=CLIENT, certificate=second)).status == 401
    # Re-enrolling again replaces the enrollment instead of adding one.
    assert (await admin.post(f"/edge-routers/{router['id']}/re-enroll", {})).status == 200
    enrollments = (await admin.get("/enrollments", query={"filter": f'edgeRouterId = "{router["id"]}"'})).data
    assert len(enrollments) == 1
    assert (await _enroll(anon, enrollments[0]["token"], _csrs())).status == 200
    assert (await admin.post("/edge-routers/missing/re-enroll", {})).status == 404
