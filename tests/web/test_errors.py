"""The error envelope and the typical failures of every route (behavior.md §7).

The messages of the error table (``controller/errors.py``) are checked against the behaviour note's table when the
note is present next to the repository, the way the conformance tests use the reference specs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NoReturn

import pytest

from controller.errors import CODES, ApiError
from controller.runtime.composition import Controller
from tests.support import Api, Reply

BEHAVIOR = Path(__file__).resolve().parents[3] / "shared" / "design" / "behavior.md"
META = {"apiVersion": "0.0.1", "apiEnrollmentVersion": "0.0.1"}
IDENTITY = {"name": "someone", "type": "User", "isAdmin": False}


def _documented_codes() -> dict[str, tuple[int, str]]:
    """code -> (status, message) from the behaviour note's table of codes; empty when the note is absent."""
    if not BEHAVIOR.exists():
        return {}
    text = BEHAVIOR.read_text()
    section = text[text.index("### 7.2"):text.index("### 7.3")]
    rows = re.findall(r"^\| ([A-Z_]+) \| (\d{3}) \| (.+?) \|$", section, re.MULTILINE)
    return {code: (int(status), message) for code, status, message in rows}


def _assert_error(reply: Reply, status: int, code: str, controller: Controller) -> dict[str, Any]:
    """The common envelope: exactly ``error`` and ``meta``; code, the table's message, a request id."""
    assert reply.status == status, reply.body
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["ziti-instance-id"] == controller.instance_id
    assert set(reply.body) == {"error", "meta"}
    assert reply.body["meta"] == META
    error = reply.body["error"]
    assert error["code"] == code
    assert error["message"] == CODES[code].message
    assert isinstance(error["requestId"], str) and error["requestId"]
    assert set(error) <= {"code", "message", "requestId", "cause"}
    return dict(error)


def _raising(exc: BaseException) -> Any:
    def fail(*args: Any, **kwargs: Any) -> NoReturn:
        raise exc
    return fail


@pytest.mark.parametrize("code", sorted(CODES))
async def test_every_code_renders_with_its_status_and_message(admin: Api, controller: Controller,
                                                              monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    documented = _documented_codes()
    if code in documented:
        assert (CODES[code].status, CODES[code].message) == documented[code]
    monkeypatch.setattr(controller.domain, "detail", _raising(ApiError(code)))
    reply = await admin.get("/identities/some-id")
    error = _assert_error(reply, CODES[code].status, code, controller)
    assert "cause" not in error


def test_every_documented_code_is_in_the_table() -> None:
    documented = _documented_codes()
    if not documented:
        pytest.skip("behavior.md is not next to the repository")
    assert set(documented) <= set(CODES)


async def test_request_ids_differ(admin: Api) -> None:
    first = await admin.get("/identities/a")
    second = await admin.get("/identities/a")
    assert first.error["requestId"] != second.error["requestId"]


@pytest.mark.parametrize(("base", "path"), [
    ("/edge/management/v1", "/no-such-thing"),
    ("/edge/client/v1", "/no-such-thing"),
    ("", "/no-such-thing"),
    ("/edge/management/v1", "/identities/a/b/c"),
])
async def test_unknown_route_is_not_found(anon: Api, controller: Controller, base: str, path: str) -> None:
    _assert_error(await anon.get(path, base=base), 404, "NOT_FOUND", controller)


@pytest.mark.parametrize(("verb", "path", "allowed"), [
    ("POST", "/version", {"GET"}),
    ("DELETE", "/identities", {"GET", "POST"}),
    ("POST", "/identities/some-id", {"GET", "PUT", "PATCH", "DELETE"}),
])
async def test_wrong_verb_is_method_not_allowed(anon: Api, controller: Controller, verb: str, path: str,
                                                allowed: set[str]) -> None:
    reply = await anon.request(verb, path)
    _assert_error(reply, 405, "METHOD_NOT_ALLOWED", controller)
    assert allowed <= {m.strip() for m in reply.headers["allow"].split(",")}


async def test_unauthenticated_is_unauthorized(anon: Api, controller: Controller) -> None:
    for token in (None, "not-a-uuid", "6f7f3a2c-0000-4000-8000-000000000000"):
        reply = await anon.with_token(token).get("/identities")
        _assert_error(reply, 401, "UNAUTHORIZED", controller)


@pytest.mark.parametrize("raw", [b'{"name": "a"', b"{name: 1}", b"\xff\xfe", b'{"a": 1e400}', b"[" * 100_000])
async def test_malformed_json_is_could_not_parse_body(admin: Api, controller: Controller, raw: bytes) -> None:
    before = (await admin.get("/identities", query={"limit": "-1"})).data
    for verb, path in (("POST", "/identities"), ("PUT", "/identities/x"), ("PATCH", "/identities/x")):
        reply = await admin.request(verb, path, raw=raw, headers={"Content-Type": "application/json"})
        error = _assert_error(reply, 400, "COULD_NOT_PARSE_BODY", controller)
        assert error["cause"]["code"] == "UNHANDLED"
        assert re.fullmatch(r'parsing (\w+ )?body from "" failed, because .+', error["cause"]["message"])
    assert (await admin.get("/identities", query={"limit": "-1"})).data == before


@pytest.mark.parametrize("raw", [b"", b"   ", b"null"])
async def test_missing_body_names_the_body_parameter(admin: Api, controller: Controller, raw: bytes) -> None:
    for path, name in (("/identities", "identity"), ("/services", "service"), ("/posture-checks", "postureCheck")):
        reply = await admin.post(path, raw=raw, headers={"Content-Type": "application/json"})
        error = _assert_error(reply, 400, "COULD_NOT_VALIDATE", controller)
        assert error["cause"] == {"field": name, "reason": f"{name} in body is required", "value": "<nil>"}


@pytest.mark.parametrize(("raw", "value"), [(b"[1, 2]", "[1 2]"), (b'"text"', "text"), (b"42", "42"),
                                            (b"true", "true")])
async def test_body_that_is_not_an_object(admin: Api, controller: Controller, raw: bytes, value: str) -> None:
    reply = await admin.post("/identities", raw=raw, headers={"Content-Type": "application/json"})
    error = _assert_error(reply, 400, "COULD_NOT_VALIDATE", controller)
    assert error["cause"] == {"field": "identity", "reason": "identity in body must be of type object",
                              "value": value}


@pytest.mark.parametrize("content_type", ["text/xml", "application/x-www-form-urlencoded", "multipart/form-data"])
async def test_wrong_content_type_is_could_not_validate(admin: Api, controller: Controller,
                                                        content_type: str) -> None:
    reply = await admin.post("/identities", raw=b'{"name": "x", "type": "User", "isAdmin": false}',
                             headers={"Content-Type": content_type})
    error = _assert_error(reply, 400, "COULD_NOT_VALIDATE", controller)
    assert error["cause"]["field"] == "Content-Type"
    assert error["cause"]["value"] == content_type
    assert (await admin.get("/identities", query={"filter": 'name = "x"'})).data == []


async def test_json_content_types_with_parameters_are_accepted(admin: Api) -> None:
    reply = await admin.post("/identities", raw=b'{"name": "x", "type": "User", "isAdmin": false}',
                             headers={"Content-Type": "application/json; charset=utf-8"})
    assert reply.status == 201, reply.body


@pytest.mark.parametrize(("body", "field", "reason"), [
    ({**IDENTITY, "tags": {"level": 3}}, "tags.level", "tags.level in body must be of type string, boolean, null"),
    ({**IDENTITY, "defaultHostingCost": 70000}, "defaultHostingCost",
     "defaultHostingCost in body should be less than or equal to 65535"),
    ({**IDENTITY, "externalId": 5}, "externalId", "externalId in body must be of type string"),
    ({**IDENTITY, "type": "Robot"}, "type", None),
    ({**IDENTITY, "serviceHostingCosts": {"svc": -1}}, "serviceHostingCosts.svc", None),
])
async def test_schema_errors_name_the_nested_field(admin: Api, controller: Controller, body: dict[str, Any],
                                                   field: str, reason: str | None) -> None:
    error = _assert_error(await admin.post("/identities", body), 400, "COULD_NOT_VALIDATE", controller)
    assert error["cause"]["field"] == field
    if reason is not None:
        assert error["cause"]["reason"] == reason


async def test_nested_required_field_is_named(admin: Api, controller: Controller) -> None:
    updb = {"allowed": True, "minPasswordLength": 5, "requireSpecialChar": False, "requireNumberChar": False,
            "requireMixedCase": False, "maxAttempts": 0, "lockoutDurationMinutes": 0}
    body = {"name": "p", "primary": {"cert": {"allowed": True, "allowExpiredCerts": True}, "updb": updb},
            "secondary": {"requireTotp": False}}
    error = _assert_error(await admin.post("/auth-policies", body), 400, "COULD_NOT_VALIDATE", controller)
    assert error["cause"] == {"field": "primary.extJwt", "reason": "primary.extJwt in body is required",
                              "value": "<nil>"}


async def test_unexpected_exception_is_unhandled_without_internals(admin: Api, controller: Controller,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "internal detail /srv/secret.py line 42"
    monkeypatch.setattr(controller.domain, "detail", _raising(RuntimeError(secret)))
    reply = await admin.get("/identities/some-id")
    error = _assert_error(reply, 500, "UNHANDLED", controller)
    assert "cause" not in error
    assert b"secret" not in reply.raw
    assert b"Traceback" not in reply.raw
    assert b"RuntimeError" not in reply.raw


@pytest.mark.parametrize("accept", ["application/x-pem-file", "text/html", "application/pkcs7-mime"])
async def test_error_for_a_client_that_accepts_no_json_has_an_empty_body(admin: Api, controller: Controller,
                                                                         accept: str) -> None:
    reply = await admin.get("/identities/NoSuchId", headers={"Accept": accept})
    assert reply.status == 404
    assert reply.raw == b""
    assert reply.headers["content-type"].startswith(accept)
    assert reply.headers["ziti-instance-id"] == controller.instance_id


@pytest.mark.parametrize("accept", ["application/json", "*/*", "text/plain, */*;q=0.1", "application/json; q=1"])
async def test_error_for_a_client_that_accepts_json_is_the_envelope(admin: Api, controller: Controller,
                                                                    accept: str) -> None:
    reply = await admin.get("/identities/NoSuchId", headers={"Accept": accept})
    _assert_error(reply, 404, "NOT_FOUND", controller)


async def test_every_response_carries_the_instance_id(admin: Api, controller: Controller) -> None:
    replies = [
        await admin.get("/version"),
        await admin.get("/identities"),
        await admin.post("/identities", {"name": "x", "type": "User", "isAdmin": False}),
        await admin.post("/identities", {}),
        await admin.with_token(None).get("/identities"),
        await admin.get("/nope"),
        await admin.post("/version"),
        await admin.get("/version", base=""),
        await admin.get("/identities/NoSuchId", headers={"Accept": "application/x-pem-file"}),
    ]
    assert [r.status for r in replies] == [200, 200, 201, 400, 401, 404, 405, 200, 404]
    assert all(r.headers["ziti-instance-id"] == controller.instance_id for r in replies)
