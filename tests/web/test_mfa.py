"""The MFA enrolment endpoints on both APIs and admin removal, through HTTP (behaviour note §8.3; secrets of 20 bytes).

TOTP codes are computed at the controller's clock, which accepts the current 30-second step and one either side,
each step once per identity: a test that needs another good code moves Trio's virtual clock to the next step
(``next_totp``). A "wrong" code is one that is none of the three codes the controller accepts at that instant, so a
refusal can never be a lucky match. Wrong codes are throttled per identity (five at once, then one more every 30 s):
a test giving more than five in a row waits on the virtual clock until each is admitted again.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import segno
import trio
from trio.testing import MockClock

from controller.runtime.composition import Controller
from tests.support import CLIENT, MGMT, Api, make_user, next_totp, totp

CODE = re.compile(r"^[A-Z2-7]{6}$")
AUTH_QUERY = {"typeId": "MFA", "provider": "ziti", "httpMethod": "POST", "httpUrl": "./authenticate/mfa",
              "format": "alphaNumeric", "minLength": 4, "maxLength": 6}
BASES = pytest.mark.parametrize("base", [MGMT, CLIENT], ids=["management", "client"])


# Helpers ---------------------------------------------------------------------------------------------------------

def accepted(controller: Controller, secret: str) -> set[str]:
    """The codes of the steps the controller accepts now: the current one and one either side."""
    return {totp(controller, secret, steps) for steps in range(-1, 2)}


def wrong(controller: Controller, secret: str) -> str:
    """A well-formed code that the controller refuses now."""
    return next(c for c in (f"{n:06d}" for n in range(10)) if c not in accepted(controller, secret))


async def earn_tries(controller: Controller, tries: int) -> None:
    """Wait on the virtual clock until the identity's MFA throttle admits ``tries`` more wrong codes (it gives one
    back each period, up to its burst)."""
    await trio.sleep(tries * controller.throttles.mfa.every)


async def user(admin: Api, base: str, name: str = "user1") -> tuple[str, Api]:
    identity_id, api = await make_user(admin, name)
    return identity_id, api if base == MGMT else api.as_client()


async def start(api: Api) -> dict[str, Any]:
    """Start enrolment; returns the unverified detail."""
    assert (await api.post("/current-identity/mfa")).status == 201
    detail = (await api.get("/current-identity/mfa")).data
    return dict(detail)


def secret_of(detail: dict[str, Any]) -> str:
    return parse_qs(urlsplit(str(detail["provisioningUrl"])).query)["secret"][0]


async def enrol(api: Api, controller: Controller) -> tuple[str, list[str]]:
    """Enrol and verify; returns the secret and the recovery codes."""
    detail = await start(api)
    secret = secret_of(detail)
    assert (await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})).status == 200
    return secret, list(detail["recoveryCodes"])


def assert_error(reply: Any, status: int, code: str, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    assert reply.error["code"] == code
    if field is not None:
        assert reply.error["cause"]["field"] == field


# Enrolment -------------------------------------------------------------------------------------------------------

@BASES
async def test_enrolment_detail_and_second_enrolment(admin: Api, controller: Controller, base: str) -> None:
    identity_id, api = await user(admin, base, "user one@corp")
    assert_error(await api.get("/current-identity/mfa"), 404, "NOT_FOUND")

    created = await api.post("/current-identity/mfa")
    assert created.status == 201
    assert created.body == {"data": {"id": created.data["id"], "_links": {"self": {"href": "./current-identity/mfa"}}},
                            "meta": {}}
    assert_error(await api.post("/current-identity/mfa"), 409, "MFA_EXISTS")

    detail = (await api.get("/current-identity/mfa")).data
    assert detail["id"] == created.data["id"]
    assert detail["isVerified"] is False
    assert detail["_links"] == {"self": {"href": "./current-identity/mfa"}}
    assert detail["tags"] == {} and detail["createdAt"] == detail["updatedAt"]
    url = urlsplit(detail["provisioningUrl"])
    assert (url.scheme, url.netloc, unquote(url.path)) == ("otpauth", "totp", "/tollgate:user one@corp")
    query = parse_qs(url.query)
    assert set(query) == {"issuer", "secret"} and query["issuer"] == ["tollgate"]
    assert url.query.index("issuer=") < url.query.index("secret=")
    secret = query["secret"][0]
    assert re.fullmatch(r"[A-Z2-7]{32}", secret) and len(base64.b32decode(secret)) == 20
    codes = detail["recoveryCodes"]
    assert len(codes) == 20 and len(set(codes)) == 20 and all(CODE.match(c) for c in codes)

    # Started but not verified: MFA is not enabled and a new login is complete at once.
    assert (await api.get("/current-identity")).data["isMfaEnabled"] is False
    assert (await admin.get(f"/identities/{identity_id}")).data["isMfaEnabled"] is False
    login = await api.with_token(None).post("/authenticate", {"username": "user one@corp", "password":
                                                              "user-password"}, query={"method": "password"})
    assert login.data["isMfaRequired"] is False and login.data["authQueries"] == []
    assert (await api.with_token(login.data["token"]).get("/current-identity")).status == 200
    assert (await api.get("/current-identity/mfa")).data["provisioningUrl"] == detail["provisioningUrl"]


@BASES
async def test_verify(admin: Api, controller: Controller, base: str, autojump_clock: MockClock) -> None:
    identity_id, api = await user(admin, base)
    verify = "/current-identity/mfa/verify"
    assert_error(await api.post(verify, {"code": "123456"}), 404, "NOT_FOUND")
    detail = await start(api)
    secret = secret_of(detail)

    assert_error(await api.post(verify), 400, "COULD_NOT_VALIDATE", "mfaValidation")
    assert_error(await api.post(verify, {}), 400, "COULD_NOT_VALIDATE", "code")
    assert_error(await api.post(verify, {"code": 123456}), 400, "COULD_NOT_VALIDATE", "code")
    for code in ("", wrong(controller, secret), detail["recoveryCodes"][0], totp(controller, secret) + "0",
                 " " + totp(controller, secret)[1:]):
        assert_error(await api.post(verify, {"code": code}), 400, "MFA_INVALID_TOKEN")
    # Five wrong codes spend the throttle's burst: even the right code waits until a try is earned back.
    throttled = await api.post(verify, {"code": totp(controller, secret)})
    assert_error(throttled, 429, "RATE_LIMITED")
    assert throttled.headers["Retry-After"] == "30"
    assert (await api.get("/current-identity/mfa")).data["isVerified"] is False
    await earn_tries(controller, 1)

    before = (await api.get("/current-api-session")).data
    assert before["isMfaRequired"] is False and before["isMfaComplete"] is False
    reply = await api.post(verify, {"code": totp(controller, secret)})
    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    after = (await api.get("/current-api-session")).data
    assert after["isMfaRequired"] is True and after["isMfaComplete"] is True and after["authQueries"] == []

    verified = (await api.get("/current-identity/mfa")).data
    assert verified["isVerified"] is True and verified["id"] == detail["id"]
    assert "provisioningUrl" not in verified and "recoveryCodes" not in verified
    assert (await api.get("/current-identity")).data["isMfaEnabled"] is True
    assert (await admin.get(f"/identities/{identity_id}")).data["isMfaEnabled"] is True
    assert_error(await api.post(verify, {"code": totp(controller, secret)}), 404, "NOT_FOUND")
    assert_error(await api.post("/current-identity/mfa"), 409, "MFA_EXISTS")


def read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode a non-interlaced 8-bit greyscale PNG: width, height and the rows of pixel values."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(kind + body)
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, interlace) == (8, 0, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    rows: list[bytes] = []
    previous = bytes(width)
    for y in range(height):
        line = raw[y * (width + 1):(y + 1) * (width + 1)]
        filter_type, row = line[0], bytearray(line[1:])
        for x in range(width):
            left = row[x - 1] if x else 0
            up, corner = previous[x], previous[x - 1] if x else 0
            if filter_type == 1:
                row[x] = (row[x] + left) & 0xFF
            elif filter_type == 2:
                row[x] = (row[x] + up) & 0xFF
            elif filter_type == 3:
                row[x] = (row[x] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - corner
                guess = min((abs(p - left), 0, left), (abs(p - up), 1, up), (abs(p - corner), 2, corner))[2]
                row[x] = (row[x] + guess) & 0xFF
        previous = bytes(row)
        rows.append(previous)
    return width, height, rows


@BASES
async def test_qr_code_is_a_png_of_the_provisioning_url(admin: Api, controller: Controller, base: str) -> None:
    _, api = await user(admin, base)
    assert_error(await api.get("/current-identity/mfa/qr-code"), 404, "NOT_FOUND")
    detail = await start(api)

    reply = await api.get("/current-identity/mfa/qr-code")
    assert reply.status == 200 and reply.headers["content-type"] == "image/png"
    width, height, rows = read_png(reply.raw)
    assert (width, height) == (256, 256)
    assert {v for row in rows for v in row} == {0, 255}
    # The dark pixels span the symbol of the provisioning URL, module by module, inside a white quiet zone.
    symbol = [[bool(m) for m in row] for row in segno.make(detail["provisioningUrl"], error="m").matrix]
    dark = [(x, y) for y, row in enumerate(rows) for x, v in enumerate(row) if v == 0]
    left, top = min(x for x, _ in dark), min(y for _, y in dark)
    span = max(x for x, _ in dark) - left + 1
    assert span == max(y for _, y in dark) - top + 1 and span % len(symbol) == 0
    scale = span // len(symbol)
    assert scale >= 2 and min(left, top, 256 - left - span, 256 - top - span) >= 4 * scale
    decoded = [[rows[top + r * scale + scale // 2][left + c * scale + scale // 2] == 0 for c in range(len(symbol))]
               for r in range(len(symbol))]
    assert decoded == symbol

    await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret_of(detail))})
    assert_error(await api.get("/current-identity/mfa/qr-code"), 404, "NOT_FOUND")


# Recovery codes ----------------------------------------------------------------------------------------------------

@BASES
async def test_show_recovery_codes(admin: Api, controller: Controller, base: str, autojump_clock: MockClock) -> None:
    _, api = await user(admin, base)
    path = "/current-identity/mfa/recovery-codes"
    assert_error(await api.get(path, headers={"mfa-validation-code": "123456"}), 404, "NOT_FOUND")
    detail = await start(api)
    secret = secret_of(detail)
    assert_error(await api.get(path, headers={"mfa-validation-code": totp(controller, secret)}), 404, "NOT_FOUND")
    await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})

    assert_error(await api.get(path), 400, "MFA_INVALID_TOKEN")
    for code in ("", wrong(controller, secret), detail["recoveryCodes"][0]):
        await earn_tries(controller, 2)  # the two this round spends: seven wrong codes in all exceed the burst
        assert_error(await api.get(path, headers={"mfa-validation-code": code}), 400, "MFA_INVALID_TOKEN")
        assert_error(await api.get(path, json={"code": code}), 400, "MFA_INVALID_TOKEN")
    by_header = await api.get(path, headers={"mfa-validation-code": await next_totp(controller, secret)})
    assert by_header.status == 200
    data = by_header.data
    assert data["recoveryCodes"] == detail["recoveryCodes"] and data["id"] == detail["id"]
    assert data["_links"] == {"self": {"href": "./current-identity/mfa"}}
    assert {"createdAt", "updatedAt"} <= set(data) and "provisioningUrl" not in data
    by_body = await api.get(path, json={"code": await next_totp(controller, secret)})
    assert by_body.status == 200 and by_body.data == data


@BASES
async def test_regenerate_recovery_codes(admin: Api, controller: Controller, base: str,
                                         autojump_clock: MockClock) -> None:
    _, api = await user(admin, base)
    path = "/current-identity/mfa/recovery-codes"
    assert_error(await api.post(path, {"code": "123456"}), 404, "NOT_FOUND")
    detail = await start(api)
    secret = secret_of(detail)
    assert_error(await api.post(path, {"code": totp(controller, secret)}), 404, "NOT_FOUND")
    await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})
    old = detail["recoveryCodes"]

    assert_error(await api.post(path), 400, "COULD_NOT_VALIDATE", "mfaValidation")
    assert_error(await api.post(path, {}), 400, "COULD_NOT_VALIDATE", "code")
    assert_error(await api.post(path, {"code": wrong(controller, secret)}), 400, "MFA_INVALID_TOKEN")
    reply = await api.post(path, {"code": await next_totp(controller, secret)})
    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    code = await next_totp(controller, secret)
    shown = (await api.get(path, headers={"mfa-validation-code": code})).data["recoveryCodes"]
    assert len(shown) == 20 and all(CODE.match(c) for c in shown) and not set(shown) & set(old)
    assert_error(await api.post("/authenticate/mfa", {"code": old[0]}), 400, "MFA_INVALID_TOKEN")

    # A recovery code also authorises a regeneration (and is gone with the rest).
    assert (await api.post(path, {"code": shown[0]})).status == 200
    code = await next_totp(controller, secret)
    again = (await api.get(path, headers={"mfa-validation-code": code})).data["recoveryCodes"]
    assert not set(again) & set(shown)
    assert_error(await api.post("/authenticate/mfa", {"code": shown[1]}), 400, "MFA_INVALID_TOKEN")
    assert (await api.post("/authenticate/mfa", {"code": again[0]})).status == 200


# Removal by the identity -------------------------------------------------------------------------------------------

@BASES
async def test_delete_own_mfa(admin: Api, controller: Controller, base: str) -> None:
    identity_id, api = await user(admin, base)
    assert_error(await api.delete("/current-identity/mfa"), 404, "NOT_FOUND")

    # An unverified enrolment goes without a code; a new one can start afterwards.
    first = await start(api)
    assert (await api.delete("/current-identity/mfa")).status == 200
    assert_error(await api.get("/current-identity/mfa"), 404, "NOT_FOUND")
    second = await start(api)
    assert second["id"] != first["id"] and secret_of(second) != secret_of(first)
    secret = secret_of(second)
    await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})

    assert_error(await api.delete("/current-identity/mfa"), 400, "MFA_INVALID_TOKEN")
    # The code is read only from the header: one in the body does not count, though the header would take it. It
    # is the next step's code (within the window): the current step was spent on the verification.
    ahead = totp(controller, secret, 1)
    assert_error(await api.delete("/current-identity/mfa", json={"code": ahead}), 400, "MFA_INVALID_TOKEN")
    for code in ("", wrong(controller, secret)):
        assert_error(await api.delete("/current-identity/mfa", headers={"mfa-validation-code": code}), 400,
                     "MFA_INVALID_TOKEN")
    assert (await api.get("/current-identity/mfa")).data["isVerified"] is True

    # The code the body brought works in the header: that refusal did not spend it.
    reply = await api.delete("/current-identity/mfa", headers={"mfa-validation-code": ahead})
    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    assert_error(await api.get("/current-identity/mfa"), 404, "NOT_FOUND")
    assert (await admin.get(f"/identities/{identity_id}")).data["isMfaEnabled"] is False

    # With a recovery code.
    _, codes = await enrol(api, controller)
    assert (await api.delete("/current-identity/mfa", headers={"mfa-validation-code": codes[5]})).status == 200
    assert_error(await api.get("/current-identity/mfa"), 404, "NOT_FOUND")


# Removal by an administrator ---------------------------------------------------------------------------------------

async def test_admin_removes_an_identity_mfa(admin: Api, anon: Api, controller: Controller) -> None:
    identity_id, api = await user(admin, MGMT)
    secret, _ = await enrol(api, controller)
    assert_error(await api.delete(f"/identities/{identity_id}/mfa"), 401, "UNAUTHORIZED")
    assert_error(await admin.delete("/identities/nope/mfa"), 404, "NOT_FOUND")
    assert (await api.get("/current-identity/mfa")).data["isVerified"] is True

    reply = await admin.delete(f"/identities/{identity_id}/mfa")
    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    assert (await admin.get(f"/identities/{identity_id}")).data["isMfaEnabled"] is False
    assert_error(await api.get("/current-identity/mfa"), 404, "NOT_FOUND")
    assert_error(await api.post("/authenticate/mfa", {"code": totp(controller, secret)}), 409, "MFA_NOT_ENROLLED")
    login = await anon.login("user1", "user-password")
    assert (await login.get("/current-api-session")).data["isMfaRequired"] is False
    assert (await admin.delete(f"/identities/{identity_id}/mfa")).status == 200  # nothing left to remove

    # A pending enrolment goes too.
    await start(api)
    assert (await admin.delete(f"/identities/{identity_id}/mfa")).status == 200
    assert_error(await api.get("/current-identity/mfa"), 404, "NOT_FOUND")
    assert (await api.delete(f"/identities/{identity_id}/mfa", base=CLIENT)).status == 404  # management API only


async def test_deleting_an_identity_deletes_its_enrolment(admin: Api, controller: Controller) -> None:
    identity_id, api = await user(admin, MGMT)
    _, other = await user(admin, MGMT, "user2")
    await enrol(api, controller)
    await start(other)
    assert (await admin.get("/summary")).data["mfas"] == 2
    assert (await admin.delete(f"/identities/{identity_id}")).status == 200
    assert (await admin.get("/summary")).data["mfas"] == 1
    assert (await other.get("/current-identity/mfa")).status == 200
