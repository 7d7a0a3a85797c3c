"""Third-party CAs over HTTP: create rules, immutable certificate facts, links, the CA JWT and verification.

The controller's wall clock is pinned to ``EPOCH`` so that certificate validity windows can be stated exactly;
timed tests take ``autojump_clock`` and move the clock with ``trio.sleep_until``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from trio.testing import MockClock

from controller.clock import Clock
from controller.runtime.composition import Controller
from tests.certificates import Authority
from tests.support import Api, make_settings, make_user, start_controller

EPOCH = 1_700_000_000.0
DAY = 86_400.0
TEXT = {"Content-Type": "text/plain"}
CLAIM = {"location": "SAN_URI", "matcher": "SCHEME", "matcherCriteria": "spiffe", "parser": "NONE",
         "parserCriteria": "", "index": 0}


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Controller]:
    yield await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=EPOCH))


def _at(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


def authority(name: str = "Test CA", *, not_after: float = EPOCH + 365 * DAY, is_ca: bool | None = True) -> Authority:
    """A self-signed certificate valid from a day before ``EPOCH``, a CA unless told otherwise."""
    return Authority.create(name, not_before=_at(EPOCH - DAY), not_after=_at(not_after), is_ca=is_ca)


def signed(ca: Authority, common_name: str, *, not_before: float = EPOCH - 60,
           not_after: float = EPOCH + DAY) -> Authority:
    """A certificate for ``common_name`` that ``ca`` signed, valid between the two instants."""
    return ca.sign(common_name, not_before=_at(not_before), not_after=_at(not_after))


def ca_body(pem: str, name: str = "ca-one", **extra: Any) -> dict[str, Any]:
    return {"name": name, "certPem": pem, "identityRoles": ["enrolled"], "isAuthEnabled": True,
            "isAutoCaEnrollmentEnabled": False, "isOttCaEnrollmentEnabled": False, **extra}


def update_body(**extra: Any) -> dict[str, Any]:
    return {"name": "ca-one", "identityRoles": ["enrolled"], "isAuthEnabled": True, "isAutoCaEnrollmentEnabled": False,
            "isOttCaEnrollmentEnabled": False, "identityNameFormat": "", **extra}


async def detail(admin: Api, ca_id: str) -> dict[str, Any]:
    reply = await admin.get(f"/cas/{ca_id}")
    assert reply.status == 200, reply.body
    return dict(reply.data)


async def ca_count(admin: Api) -> int:
    return int((await admin.get("/cas")).body["meta"]["pagination"]["totalCount"])


def assert_error(reply: Any, status: int, code: str) -> None:
    assert (reply.status, reply.error["code"]) == (status, code), reply.body


# Create, read, update --------------------------------------------------------------------------------------------


async def test_create_then_detail_and_list(admin: Api) -> None:
    ca = authority()
    reply = await admin.post("/cas", ca_body(ca.pem, tags={"site": "lab"}))
    assert reply.status == 201, reply.body
    ca_id = reply.data["id"]
    shown = await detail(admin, ca_id)
    assert {k: shown[k] for k in ("name", "certPem", "fingerprint", "isVerified", "identityRoles", "isAuthEnabled",
                                  "isAutoCaEnrollmentEnabled", "isOttCaEnrollmentEnabled", "identityNameFormat",
                                  "tags")} == {
        "name": "ca-one", "certPem": ca.pem, "fingerprint": ca.fingerprint, "isVerified": False,
        "identityRoles": ["enrolled"], "isAuthEnabled": True, "isAutoCaEnrollmentEnabled": False,
        "isOttCaEnrollmentEnabled": False, "identityNameFormat": "[caName]-[commonName]", "tags": {"site": "lab"}}
    assert 8 <= len(shown["verificationToken"]) <= 64
    assert "externalIdClaim" not in shown
    assert shown["_links"] == {"self": {"href": f"./cas/{ca_id}"}, "verify": {"href": f"./cas/{ca_id}/verify"}}
    assert (await admin.get("/cas")).data == [shown]


async def test_a_bundle_is_kept_whole_and_its_first_certificate_is_the_ca(admin: Api) -> None:
    first, second = authority("First"), authority("Second")
    ca_id = await admin.create("/cas", ca_body(first.pem + second.pem))
    shown = await detail(admin, ca_id)
    assert (shown["certPem"], shown["fingerprint"]) == (first.pem + second.pem, first.fingerprint)
    # Only the first certificate is the CA: the second may become a CA of its own.
    await admin.create("/cas", ca_body(second.pem, "ca-two"))


async def test_name_format_and_claim_are_kept_when_given(admin: Api) -> None:
    ca_id = await admin.create("/cas", ca_body(authority().pem, identityNameFormat="[caId]-[commonName]",
                                               externalIdClaim={**CLAIM, "picked": "ignored"}))
    shown = await detail(admin, ca_id)
    assert (shown["identityNameFormat"], shown["externalIdClaim"]) == ("[caId]-[commonName]", CLAIM)
    await admin.patch(f"/cas/{ca_id}", {"identityNameFormat": "  "})
    assert (await detail(admin, ca_id))["identityNameFormat"] == "[caName]-[commonName]"


async def test_put_and_patch_never_change_the_certificate_facts(admin: Api) -> None:
    ca = authority()
    ca_id = await admin.create("/cas", ca_body(ca.pem))
    before = await detail(admin, ca_id)
    fixed = {"certPem": authority("Other").pem, "fingerprint": "f" * 40, "verificationToken": "mine",
             "isVerified": True}
    assert (await admin.put(f"/cas/{ca_id}", update_body(name="renamed", **fixed))).status == 200
    assert (await admin.patch(f"/cas/{ca_id}", {"isAuthEnabled": False, **fixed})).status == 200
    after = await detail(admin, ca_id)
    assert {k: after[k] for k in fixed} == {k: before[k] for k in fixed}
    assert (after["name"], after["isAuthEnabled"]) == ("renamed", False)


async def test_put_replaces_every_field(admin: Api) -> None:
    ca_id = await admin.create("/cas", ca_body(authority().pem, externalIdClaim=CLAIM, identityNameFormat="x"))
    reply = await admin.put(f"/cas/{ca_id}", update_body(identityRoles=[], isOttCaEnrollmentEnabled=True))
    assert reply.body == {"data": {}, "meta": {}}
    after = await detail(admin, ca_id)
    assert "externalIdClaim" not in after
    assert (after["identityNameFormat"], after["identityRoles"], after["isOttCaEnrollmentEnabled"]) == (
        "[caName]-[commonName]", [], True)
    missing = {k: v for k, v in update_body().items() if k != "identityNameFormat"}
    reply = await admin.put(f"/cas/{ca_id}", missing)
    assert_error(reply, 400, "COULD_NOT_VALIDATE")
    assert reply.error["cause"]["field"] == "identityNameFormat"


async def test_patch_merges_a_partial_claim_onto_the_stored_one(admin: Api) -> None:
    ca_id = await admin.create("/cas", ca_body(authority().pem))

    async def claim_after(patch: dict[str, Any]) -> Any:
        reply = await admin.patch(f"/cas/{ca_id}", patch)
        assert reply.status == 200, reply.body
        return (await detail(admin, ca_id)).get("externalIdClaim")

    # The reference CLI always sends a claim, holding only the fields given on its command line.
    assert await claim_after({"name": "ca-one", "externalIdClaim": {}}) is None
    reply = await admin.patch(f"/cas/{ca_id}", {"externalIdClaim": {"index": 1}})
    assert_error(reply, 400, "COULD_NOT_VALIDATE")
    assert reply.error["cause"] == {"field": "externalIdClaim.location",
                                    "reason": "externalIdClaim.location in body is required", "value": "<nil>"}
    assert await claim_after({"externalIdClaim": CLAIM}) == CLAIM
    assert await claim_after({"externalIdClaim": {"index": 2, "matcher": None}}) == {**CLAIM, "index": 2}
    assert await claim_after({"externalIdClaim": {}}) == {**CLAIM, "index": 2}
    assert await claim_after({"isAuthEnabled": False}) == {**CLAIM, "index": 2}
    reply = await admin.patch(f"/cas/{ca_id}", {"externalIdClaim": {"location": "EVERYWHERE"}})
    assert_error(reply, 400, "COULD_NOT_VALIDATE")
    assert reply.error["cause"]["field"] == "externalIdClaim.location"
    assert await claim_after({"externalIdClaim": None}) is None


async def test_every_write_refuses_a_claim_that_cannot_work(admin: Api) -> None:
    ca_id = await admin.create("/cas", ca_body(authority().pem, externalIdClaim=CLAIM))
    bad = {**CLAIM, "location": "COMMON_NAME"}
    expected = ("the value '{\"location\":\"COMMON_NAME\",\"matcher\":\"SCHEME\",\"matcherCriteria\":\"spiffe\","
                "\"parser\":\"NONE\",\"parserCriteria\":\"\",\"index\":0}' for 'externalIdClaim' is invalid: "
                "scheme matcher can only be used with URI locations")
    for reply in (await admin.post("/cas", ca_body(authority().pem, "ca-two", externalIdClaim=bad)),
                  await admin.put(f"/cas/{ca_id}", update_body(externalIdClaim=bad)),
                  await admin.patch(f"/cas/{ca_id}", {"externalIdClaim": {"location": "COMMON_NAME"}})):
        assert_error(reply, 400, "REFERENCED_ENTITY_NOT_FOUND")
        assert reply.error["cause"] == {"code": "UNHANDLED", "message": expected}
    reply = await admin.patch(f"/cas/{ca_id}", {"externalIdClaim": {"parser": "SPLIT"}})
    assert reply.error["cause"]["message"].endswith("is invalid: parser SPLIT needs parserCriteria")
    assert (await detail(admin, ca_id))["externalIdClaim"] == CLAIM
    assert await ca_count(admin) == 1


async def test_create_errors(admin: Api) -> None:
    ca = authority()
    first_id = await admin.create("/cas", ca_body(ca.pem))
    leaf = signed(ca, "leaf")
    key_pem = ca.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()).decode()
    cases: list[tuple[dict[str, Any], int, str, Any]] = [
        (ca_body("hello", "x"), 400, "COULD_NOT_PARSE_BODY", "certPem"),
        (ca_body("", "x"), 400, "COULD_NOT_PARSE_BODY", "certPem"),
        (ca_body("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n", "x"), 400,
         "COULD_NOT_PARSE_BODY", "certPem"),
        (ca_body(key_pem, "x"), 400, "EXPECTED_PEM_CERTIFICATE", "certPem"),
        (ca_body("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "x"), 400,
         "COULD_NOT_PARSE_DER_BLOCK", "certPem"),
        (ca_body(leaf.pem + ca.pem, "x"), 400, "CERTIFICATE_IS_NOT_CA", "certPem"),
        (ca_body(authority(is_ca=None).pem, "x"), 400, "CERTIFICATE_IS_NOT_CA", "certPem"),
        (ca_body(ca.pem, "x"), 400, "COULD_NOT_VALIDATE", ("certPem", f"certificate already used as CA {first_id}")),
        (ca_body(authority().pem), 400, "COULD_NOT_VALIDATE", "name"),
        (ca_body(authority().pem, "x", identityRoles=["#all"]), 400, "COULD_NOT_VALIDATE", "identityRoles"),
        (ca_body(authority().pem, "x", identityRoles=[""]), 400, "COULD_NOT_VALIDATE", "identityRoles"),
    ]
    for name in ("location", "matcher", "matcherCriteria", "parser", "parserCriteria", "index"):
        partial = {k: v for k, v in CLAIM.items() if k != name}
        cases.append((ca_body(authority().pem, "x", externalIdClaim=partial), 400, "COULD_NOT_VALIDATE",
                      (f"externalIdClaim.{name}", f"externalIdClaim.{name} in body is required")))
        cases.append((ca_body(authority().pem, "x", externalIdClaim={**CLAIM, name: None}), 400,
                      "COULD_NOT_VALIDATE", f"externalIdClaim.{name}"))
    for name in ("name", "certPem", "identityRoles", "isAuthEnabled", "isAutoCaEnrollmentEnabled",
                 "isOttCaEnrollmentEnabled"):
        body = {k: v for k, v in ca_body(authority().pem, "x").items() if k != name}
        cases.append((body, 400, "COULD_NOT_VALIDATE", (name, f"{name} in body is required")))
    for body, status, code, field in cases:
        reply = await admin.post("/cas", body)
        assert_error(reply, status, code)
        field_name, reason = field if isinstance(field, tuple) else (field, None)
        assert reply.error["cause"]["field"] == field_name, reply.body
        if reason is not None:
            assert reply.error["cause"]["reason"] == reason
    assert await ca_count(admin) == 1


async def test_links_follow_verification_and_auto_enrolment(admin: Api) -> None:
    ca = authority()
    ca_id = await admin.create("/cas", ca_body(ca.pem, isAutoCaEnrollmentEnabled=True))
    links = {"self": {"href": f"./cas/{ca_id}"}, "verify": {"href": f"./cas/{ca_id}/verify"},
             "jwt": {"href": f"./cas/{ca_id}/jwt"}}
    assert (await detail(admin, ca_id))["_links"] == links
    token = (await detail(admin, ca_id))["verificationToken"]
    assert (await admin.post(f"/cas/{ca_id}/verify", raw=signed(ca, token).pem.encode(), headers=TEXT)).status == 200
    del links["verify"]
    assert (await detail(admin, ca_id))["_links"] == links
    await admin.patch(f"/cas/{ca_id}", {"isAutoCaEnrollmentEnabled": False})
    del links["jwt"]
    assert (await detail(admin, ca_id))["_links"] == links


# The CA JWT ------------------------------------------------------------------------------------------------------


async def test_the_ca_jwt_is_signed_by_the_server_key(admin: Api, controller: Controller) -> None:
    ca_id = await admin.create("/cas", ca_body(authority().pem))
    reply = await admin.get(f"/cas/{ca_id}/jwt")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/jwt"
    token = reply.raw.decode()
    header = jwt.get_unverified_header(token)
    assert header["kid"] == controller.pki.server_cert_sha1
    server_key = controller.pki.server_cert.public_key()
    assert isinstance(server_key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey)
    claims = jwt.decode(token, server_key, algorithms=[header["alg"]])
    assert claims == {"em": "ca", "ctrls": None, "iss": f"{controller.jwts.address}/", "sub": ca_id, "jti": ca_id}
    assert claims["iss"].startswith("http") and claims["iss"].endswith("/")

    reply = await admin.get("/cas/NoSuchCa/jwt")
    assert_error(reply, 404, "NOT_FOUND")
    assert reply.error["cause"] == {"code": "UNHANDLED", "message": "ca with id NoSuchCa not found"}


# Verification ----------------------------------------------------------------------------------------------------


async def test_verify_errors_in_the_reference_order(admin: Api) -> None:
    ca, second = authority(), authority("Second")
    ca_id = await admin.create("/cas", ca_body(ca.pem + second.pem))
    token = (await detail(admin, ca_id))["verificationToken"]
    good = signed(ca, token).pem.encode()

    async def verify(body: bytes, ca_path: str = ca_id, headers: dict[str, str] = TEXT) -> Any:
        return await admin.post(f"/cas/{ca_path}/verify", raw=body, headers=headers)

    key_pem = ca.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    cases: list[tuple[Any, int, str]] = [
        (await verify(b"", "NoSuchCa"), 400, "COULD_NOT_VALIDATE"),
        (await verify(b"  \n"), 400, "COULD_NOT_VALIDATE"),
        (await verify(good, headers={"Content-Type": "application/json"}), 400, "COULD_NOT_VALIDATE"),
        (await verify(b"hello", "NoSuchCa"), 404, "NOT_FOUND"),
        (await verify(b"hello"), 400, "COULD_NOT_PARSE_BODY"),
        (await verify(b"\xff\xfe not text"), 400, "COULD_NOT_PARSE_BODY"),
        (await verify(key_pem), 400, "EXPECTED_PEM_CERTIFICATE"),
        (await verify(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 400,
         "COULD_NOT_PARSE_DER_BLOCK"),
        (await verify(signed(ca, "not-the-token").pem.encode()), 400, "INVALID_COMMON_NAME"),
        (await verify(authority(token, is_ca=False).pem.encode()), 400, "CERTIFICATE_FAILED_VALIDATION"),
        # Signed by the bundle's second certificate: only the first is the CA.
        (await verify(signed(second, token).pem.encode()), 400, "CERTIFICATE_FAILED_VALIDATION"),
        (await verify(signed(ca, token, not_after=EPOCH - 1).pem.encode()), 400, "CERTIFICATE_FAILED_VALIDATION"),
        (await verify(signed(ca, token, not_before=EPOCH + 60).pem.encode()), 400, "CERTIFICATE_FAILED_VALIDATION"),
    ]
    for reply, status, code in cases:
        assert_error(reply, status, code)
    assert cases[0][0].error["cause"]["field"] == "certificate"
    assert cases[3][0].error["cause"] == {"code": "UNHANDLED", "message": "ca with id NoSuchCa not found"}
    assert cases[6][0].error["cause"]["value"] == "PRIVATE KEY"
    assert cases[8][0].error["cause"]["value"] == "not-the-token"
    assert (await detail(admin, ca_id))["isVerified"] is False

    reply = await verify(good, headers={})
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    shown = await detail(admin, ca_id)
    assert (shown["isVerified"], shown["verificationToken"]) == (True, token)
    # Once verified, the body is not even read.
    assert_error(await verify(b"hello"), 409, "CA_ALREADY_VERIFIED")
    assert_error(await verify(good), 409, "CA_ALREADY_VERIFIED")


async def test_verify_accepts_the_pem_media_type(admin: Api) -> None:
    ca = authority()
    ca_id = await admin.create("/cas", ca_body(ca.pem))
    token = (await detail(admin, ca_id))["verificationToken"]
    reply = await admin.post(f"/cas/{ca_id}/verify", raw=signed(ca, token).pem.encode(),
                             headers={"Content-Type": "application/x-pem-file"})
    assert reply.status == 200, reply.body


async def test_proofs_and_cas_count_only_within_their_validity(admin: Api, controller: Controller,
                                                               autojump_clock: MockClock) -> None:
    early, late, short = authority("Early"), authority("Late"), authority("Short", not_after=EPOCH + 400)
    ids = {}
    for name, ca in (("early", early), ("late", late), ("short", short)):
        ids[name] = await admin.create("/cas", ca_body(ca.pem, name))
    tokens = {name: (await detail(admin, ca_id))["verificationToken"] for name, ca_id in ids.items()}
    proofs = {"early": signed(early, tokens["early"], not_before=EPOCH + 100, not_after=EPOCH + 400),
              "late": signed(late, tokens["late"], not_before=EPOCH + 100, not_after=EPOCH + 400),
              "short": signed(short, tokens["short"], not_before=EPOCH, not_after=EPOCH + DAY)}

    async def verify(name: str) -> Any:
        return await admin.post(f"/cas/{ids[name]}/verify", raw=proofs[name].pem.encode(), headers=TEXT)

    assert_error(await verify("early"), 400, "CERTIFICATE_FAILED_VALIDATION")
    await trio.sleep_until(controller.clock.to_trio(EPOCH + 100.5))
    assert (await verify("early")).status == 200
    await trio.sleep_until(controller.clock.to_trio(EPOCH + 400.5))
    assert_error(await verify("late"), 400, "CERTIFICATE_FAILED_VALIDATION")
    # The proof is still valid, the CA's own certificate no longer is.
    assert_error(await verify("short"), 400, "CERTIFICATE_FAILED_VALIDATION")


# Deletion and authorization --------------------------------------------------------------------------------------


async def test_deleting_a_ca_deletes_its_ottca_enrollments(admin: Api) -> None:
    ca_id = await admin.create("/cas", ca_body(authority().pem, isOttCaEnrollmentEnabled=True))
    identity_id = await admin.create("/identities", {"name": "device", "type": "Device", "isAdmin": False,
                                                     "enrollment": {"ottca": ca_id}})
    enrollment = (await admin.get(f"/identities/{identity_id}")).data["enrollment"]["ottca"]
    assert enrollment["caId"] == ca_id
    assert (await admin.get(f"/enrollments/{enrollment['id']}")).status == 200

    assert (await admin.delete(f"/cas/{ca_id}")).status == 200
    assert "ottca" not in (await admin.get(f"/identities/{identity_id}")).data["enrollment"]
    assert_error(await admin.get(f"/enrollments/{enrollment['id']}"), 404, "NOT_FOUND")
    assert_error(await admin.get(f"/cas/{ca_id}/jwt"), 404, "NOT_FOUND")


async def test_ca_operations_need_an_admin(admin: Api) -> None:
    ca = authority()
    ca_id = await admin.create("/cas", ca_body(ca.pem))
    token = (await detail(admin, ca_id))["verificationToken"]
    _, user = await make_user(admin, "plain-user")
    for client in (user, user.with_token(None)):
        assert_error(await client.get(f"/cas/{ca_id}/jwt"), 401, "UNAUTHORIZED")
        reply = await client.post(f"/cas/{ca_id}/verify", raw=signed(ca, token).pem.encode(), headers=TEXT)
        assert_error(reply, 401, "UNAUTHORIZED")
    assert (await detail(admin, ca_id))["isVerified"] is False
    assert_error(await admin.as_client().get(f"/cas/{ca_id}/jwt"), 404, "NOT_FOUND")
