"""The Client API's ``/current-api-session/certificates``: issuing, listing, showing and removing the certificates of
the caller's API session, and their end with the session.

The controller here runs with its wall clock pinned one day after its CA was made (a whole second), so a test on the
virtual clock can state a certificate's validity to the second.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from trio.testing import MockClock

from controller.certificates import ensure_pki
from controller.clock import Clock, format_time
from controller.runtime.composition import Controller
from tests.conformance import oracle
from tests.support import Api, make_settings, make_user, seed_pki, start_controller, totp
from tests.web.test_view_conformance import shape_problems

KIND = "api-session-certificates"
PATH = "/current-api-session/certificates"
DAY = 86_400.0


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Controller]:
    seed_pki(tmp_path)
    ca_made = ensure_pki(tmp_path / "pki").ca_cert.not_valid_before_utc.timestamp()
    yield await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=ca_made + DAY))


def make_csr(common_name: str = "asked-for") -> tuple[ec.EllipticCurvePrivateKey, str]:
    """A fresh P-256 key and a PEM CSR for it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return key, csr.public_bytes(serialization.Encoding.PEM).decode()


async def client_user(admin: Api, name: str) -> Api:
    _, api = await make_user(admin, name)
    return api.as_client()


async def session_id(api: Api) -> str:
    return str((await api.get("/current-api-session")).data["id"])


async def issue(api: Api) -> dict[str, Any]:
    """Ask for a certificate; returns the create answer's data."""
    _, csr = make_csr()
    reply = await api.post(PATH, {"csr": csr})
    assert reply.status == 201, reply.body
    return dict(reply.data)


def stored_ids(controller: Controller) -> set[str]:
    with controller.store.read() as txn:
        return set(txn.ids(KIND))


async def enrol_mfa(api: Api, controller: Controller) -> None:
    """Enrol and verify MFA for the caller's identity: its later logins owe a TOTP code."""
    assert (await api.post("/current-identity/mfa")).status == 201
    url = (await api.get("/current-identity/mfa")).data["provisioningUrl"]
    code = totp(controller, parse_qs(urlsplit(url).query)["secret"][0])
    assert (await api.post("/current-identity/mfa/verify", {"code": code})).status == 200


def assert_error(reply: Any, status: int, code: str, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    assert reply.error["code"] == code
    if field is not None:
        assert reply.error["cause"]["field"] == field


async def test_create_issues_a_certificate_for_the_csr(admin: Api, controller: Controller,
                                                       autojump_clock: MockClock) -> None:
    api = await client_user(admin, "alice")
    api_session = await session_id(api)
    key, csr = make_csr()
    now = controller.clock.now()

    reply = await api.post(PATH, {"csr": csr})

    assert reply.status == 201, reply.body
    data = reply.data
    assert set(data) == {"id", "_links", "certificate", "cas"}
    assert data["_links"] == {"self": {"href": f"./current-api-session/certificates/{data['id']}"}}
    assert data["cas"] == controller.pki.ca_pem.decode()
    certificate = x509.load_pem_x509_certificate(data["certificate"].encode())
    ca = x509.load_pem_x509_certificate(data["cas"].encode())
    certificate.verify_directly_issued_by(ca)
    assert certificate.public_key() == key.public_key()
    # The controller names the certificate after the API session, whatever the CSR asked for.
    assert certificate.subject.rfc4514_string() == f"CN={api_session},O=Tollgate"
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert certificate.not_valid_after_utc == dt.datetime.fromtimestamp(now + 12 * 3600, dt.UTC)
    assert certificate.not_valid_before_utc == dt.datetime.fromtimestamp(now - 300, dt.UTC)

    detail = await api.get(f"{PATH}/{data['id']}")
    assert detail.status == 200, detail.body
    der = certificate.public_bytes(serialization.Encoding.DER)
    assert detail.data == {
        "id": data["id"], "createdAt": format_time(now), "updatedAt": format_time(now), "tags": {},
        "_links": data["_links"], "certificate": data["certificate"],
        "fingerprint": hashlib.sha1(der).hexdigest(), "subject": f"CN={api_session},O=Tollgate",
        "validFrom": format_time(now - 300), "validTo": format_time(now + 12 * 3600),
    }


async def test_answers_match_the_reference_definitions(admin: Api) -> None:
    document = oracle.require("client")
    api = await client_user(admin, "alice")
    created = await issue(api)
    bodies = [
        ("currentApiSessionCertificateCreateResponse", created),
        ("currentApiSessionCertificateDetail", (await api.get(f"{PATH}/{created['id']}")).data),
        ("currentApiSessionCertificateList", (await api.get(PATH)).data),
    ]
    problems = [p for name, body in bodies
                for p in shape_problems(document, {"$ref": f"#/definitions/{name}"}, body, name)]
    assert problems == []


async def test_list_shows_only_the_current_sessions_certificates(admin: Api) -> None:
    alice = await client_user(admin, "alice")
    bob = await client_user(admin, "bobby")
    alice_ids = [(await issue(alice))["id"] for _ in range(3)]
    bob_id = (await issue(bob))["id"]

    alice_list = await alice.get(PATH)
    assert alice_list.status == 200
    assert sorted(c["id"] for c in alice_list.data) == sorted(alice_ids)
    assert alice_list.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 3}
    assert [c["id"] for c in (await bob.get(PATH)).data] == [bob_id]
    # The certificates belong to the session, not the identity: alice's second session has none.
    alice_again = (await admin.login("alice", "user-password")).as_client()
    assert (await alice_again.get(PATH)).data == []


async def test_list_filters_sorts_and_pages_within_the_session(admin: Api) -> None:
    alice = await client_user(admin, "alice")
    bob = await client_user(admin, "bobby")
    issued = [await issue(alice) for _ in range(3)]
    await issue(bob)
    details = [(await alice.get(f"{PATH}/{c['id']}")).data for c in issued]
    wanted = details[1]

    filtered = await alice.get(PATH, query={"filter": f'fingerprint = "{wanted["fingerprint"]}"'})
    assert [c["id"] for c in filtered.data] == [wanted["id"]]
    assert filtered.body["meta"]["pagination"]["totalCount"] == 1

    by_fingerprint = sorted(details, key=lambda d: d["fingerprint"])
    page = await alice.get(PATH, query={"sort": "fingerprint desc", "limit": "2", "offset": "1"})
    assert [c["id"] for c in page.data] == [d["id"] for d in reversed(by_fingerprint)][1:3]
    assert page.body["meta"]["pagination"] == {"limit": 2, "offset": 1, "totalCount": 3}

    bad = await alice.get(PATH, query={"filter": "fingerprint ="})
    assert_error(bad, 400, "INVALID_FILTER")


async def test_another_sessions_certificate_is_not_found(admin: Api, controller: Controller) -> None:
    alice = await client_user(admin, "alice")
    bob = await client_user(admin, "bobby")
    alice_id = (await issue(alice))["id"]

    assert_error(await bob.get(f"{PATH}/{alice_id}"), 404, "NOT_FOUND")
    assert_error(await bob.delete(f"{PATH}/{alice_id}"), 404, "NOT_FOUND")
    assert_error(await bob.get(f"{PATH}/no-such-id"), 404, "NOT_FOUND")
    assert_error(await bob.delete(f"{PATH}/no-such-id"), 404, "NOT_FOUND")
    unknown = await alice.get(f"{PATH}/no-such-id")
    assert_error(unknown, 404, "NOT_FOUND")
    # Someone else's certificate is answered exactly like a missing one.
    foreign = (await bob.get(f"{PATH}/{alice_id}")).error
    assert foreign["cause"] == {"code": "UNHANDLED", "message": f"apiSessionCertificate with id {alice_id} not found"}
    assert stored_ids(controller) == {alice_id}
    assert (await alice.get(f"{PATH}/{alice_id}")).status == 200


async def test_delete_removes_the_certificate(admin: Api, controller: Controller) -> None:
    alice = await client_user(admin, "alice")
    kept, removed = (await issue(alice))["id"], (await issue(alice))["id"]

    reply = await alice.delete(f"{PATH}/{removed}")

    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    assert_error(await alice.get(f"{PATH}/{removed}"), 404, "NOT_FOUND")
    assert_error(await alice.delete(f"{PATH}/{removed}"), 404, "NOT_FOUND")
    assert [c["id"] for c in (await alice.get(PATH)).data] == [kept]
    assert stored_ids(controller) == {kept}


@pytest.mark.parametrize("csr", ["not a csr", "", "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n"
                                 "-----END CERTIFICATE REQUEST-----\n"], ids=["text", "empty", "truncated-der"])
async def test_unusable_csr_is_refused(admin: Api, controller: Controller, csr: str) -> None:
    alice = await client_user(admin, "alice")
    assert_error(await alice.post(PATH, {"csr": csr}), 400, "COULD_NOT_PROCESS_CSR", "csr")
    assert stored_ids(controller) == set()


async def test_certificate_instead_of_csr_is_refused(admin: Api, controller: Controller) -> None:
    alice = await client_user(admin, "alice")
    reply = await alice.post(PATH, {"csr": controller.pki.ca_pem.decode()})
    assert_error(reply, 400, "COULD_NOT_PROCESS_CSR", "csr")
    assert stored_ids(controller) == set()


async def test_missing_csr_does_not_validate(admin: Api, controller: Controller) -> None:
    alice = await client_user(admin, "alice")
    missing = await alice.post(PATH, {})
    assert_error(missing, 400, "COULD_NOT_VALIDATE", "csr")
    assert missing.error["cause"]["reason"] == "csr in body is required"
    assert_error(await alice.post(PATH, {"csr": 5}), 400, "COULD_NOT_VALIDATE", "csr")
    assert_error(await alice.post(PATH), 400, "COULD_NOT_VALIDATE", "sessionCertificate")
    assert_error(await alice.post(PATH, raw=b"{", headers={"Content-Type": "application/json"}), 400,
                 "COULD_NOT_PARSE_BODY")
    assert stored_ids(controller) == set()


async def test_certificates_end_with_their_api_session(admin: Api, controller: Controller) -> None:
    alice = await client_user(admin, "alice")
    bob = await client_user(admin, "bobby")
    carol = await client_user(admin, "carol")
    alice_ids = {(await issue(alice))["id"] for _ in range(2)}
    bob_id, carol_id = (await issue(bob))["id"], (await issue(carol))["id"]
    assert stored_ids(controller) == alice_ids | {bob_id, carol_id}

    assert (await alice.delete("/current-api-session")).status == 200
    assert stored_ids(controller) == {bob_id, carol_id}

    # An administrator ending a session ends its certificates too.
    assert (await admin.delete(f"/api-sessions/{await session_id(bob)}")).status == 200
    assert stored_ids(controller) == {carol_id}


async def test_a_complete_session_is_required(admin: Api, anon: Api, controller: Controller) -> None:
    alice = await client_user(admin, "alice")
    certificate_id = (await issue(alice))["id"]
    _, csr = make_csr()
    await enrol_mfa(alice, controller)
    partial = (await admin.login("alice", "user-password")).as_client()
    for client in (anon.as_client(), partial, alice.with_token("no-such-token")):
        for reply in (await client.get(PATH), await client.post(PATH, {"csr": csr}),
                      await client.get(f"{PATH}/{certificate_id}"), await client.delete(f"{PATH}/{certificate_id}")):
            assert_error(reply, 401, "UNAUTHORIZED")
    assert stored_ids(controller) == {certificate_id}


async def test_served_on_the_client_api_only(admin: Api) -> None:
    assert_error(await admin.get(PATH), 404, "NOT_FOUND")
    assert_error(await admin.post(PATH, {"csr": make_csr()[1]}), 404, "NOT_FOUND")
    assert_error(await admin.get(f"/{KIND}"), 404, "NOT_FOUND")
