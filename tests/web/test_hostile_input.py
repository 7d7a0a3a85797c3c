"""Hostile requests: integers no stored row can hold, and filters nested too deep to compile.

msgpack (the row encoding) holds integers from -2**63 to 2**64-1. A body holding one outside that range, at any
depth and through any path a client value takes to the store, is refused as 400 COULD_NOT_VALIDATE naming the
field by its dotted path, and nothing is stored. A filter nested too deep is 400 INVALID_FILTER, logged at no
error level.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from controller.model.field import Mode
from controller.model.spec import Resource
from storage.zitiql import MAX_FILTER_DEPTH
from tests.support import Api, make_user
from tests.web.crud_bodies import all_rows, discriminated, kinds, minimal_body, variant_fields
from tests.web.test_client_posture import network, user

HUGE = 2**64
TINY = -(2**63) - 1


def assert_refused(reply: Any, field: str, value: int) -> None:
    assert (reply.status, reply.error["code"]) == (400, "COULD_NOT_VALIDATE"), reply.body
    assert reply.error["cause"] == {"field": field, "value": str(value),
                                    "reason": f"{field} must be an integer from {-(2**63)} to {2**64 - 1}"}


def _hostile_values(resource: Resource, mode: Mode) -> list[tuple[str, Any]]:
    """A value holding an integer out of range for every field a request of ``mode`` may carry that takes a
    number or a free-form object; what the schema already refuses is refused either way."""
    out: list[tuple[str, Any]] = []
    for f in variant_fields(resource):
        if mode not in f.writable or f.name.startswith("_"):
            continue
        kind = f.schema.get("type")
        if kind in ("integer", "number"):
            out.append((f.name, HUGE))
        elif kind == "object" or "$ref" in f.schema or not f.schema:
            out.append((f.name, {"n": [0, {"deep": TINY}]}))
    return out


def _refused_or_ignored(reply: Any, field: str) -> None:
    # A kind may keep only the parts of an object it knows (a CA's externalIdClaim): the hostile part is dropped.
    assert reply.status == 200 or (reply.status, reply.error["code"]) == (400, "COULD_NOT_VALIDATE"), (
        field, reply.body)


@pytest.mark.parametrize("resource", kinds("create"))
async def test_no_kind_stores_or_fails_on_an_integer_out_of_range(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await minimal_body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await all_rows(admin, kind)
    for field, value in _hostile_values(resource, Mode.CREATE):
        reply = await admin.post(f"/{kind}", {**body, field: value})
        assert reply.status == 400 and reply.error["code"] == "COULD_NOT_VALIDATE", (field, reply.body)
    assert await all_rows(admin, kind) == before
    if "patch" in resource.operations:
        for field, value in _hostile_values(resource, Mode.PATCH):
            _refused_or_ignored(await admin.patch(f"/{kind}/{row_id}", discriminated(resource, body, {field: value})),
                                field)
    if "update" in resource.operations:
        for field, value in _hostile_values(resource, Mode.UPDATE):
            _refused_or_ignored(await admin.put(f"/{kind}/{row_id}", {**body, field: value}), field)


async def test_edge_values_of_the_range_are_stored(admin: Api) -> None:
    data = {"low": -(2**63), "high": 2**64 - 1}
    type_id = await admin.create("/config-types", {"name": "free"})
    config = await admin.create("/configs", {"name": "c", "configTypeId": type_id, "data": data})
    assert (await admin.get(f"/configs/{config}")).data["data"] == data


@pytest.mark.parametrize("value", [HUGE, TINY])
async def test_config_type_schema(admin: Api, value: int) -> None:
    reply = await admin.post("/config-types", {"name": "t", "schema": {"type": "object", "maximum": value}})
    assert_refused(reply, "schema.maximum", value)
    # Nothing was stored (the seeded config types, intercept.v1 and the rest, are there from the start).
    assert (await admin.get("/config-types", query={"filter": 'name = "t"'})).data == []

    type_id = await admin.create("/config-types", {"name": "t", "schema": {"type": "object"}})
    reply = await admin.patch(f"/config-types/{type_id}", {"schema": {"properties": {"n": {"maximum": value}}}})
    assert_refused(reply, "schema.properties.n.maximum", value)
    reply = await admin.put(f"/config-types/{type_id}", {"name": "t", "schema": {"enum": [1, [2, value]]}})
    assert_refused(reply, "schema.enum[1][1]", value)
    assert (await admin.get(f"/config-types/{type_id}")).data["schema"] == {"type": "object"}


async def test_config_data(admin: Api) -> None:
    type_id = await admin.create("/config-types", {"name": "free"})
    reply = await admin.post("/configs", {"name": "c", "configTypeId": type_id, "data": {"a": {"b": HUGE}}})
    assert_refused(reply, "data.a.b", HUGE)
    assert (await admin.get("/configs")).data == []
    config_id = await admin.create("/configs", {"name": "c", "configTypeId": type_id, "data": {"a": 1}})
    reply = await admin.patch(f"/configs/{config_id}", {"data": {"list": [0, 1, TINY]}})
    assert_refused(reply, "data.list[2]", TINY)
    assert (await admin.get(f"/configs/{config_id}")).data["data"] == {"a": 1}


async def test_service_max_idle_time(admin: Api) -> None:
    reply = await admin.post("/services", {"name": "s", "encryptionRequired": True, "maxIdleTimeMillis": HUGE})
    assert_refused(reply, "maxIdleTimeMillis", HUGE)
    assert (await admin.get("/services")).data == []
    service = await admin.create("/services", {"name": "s", "encryptionRequired": True})
    reply = await admin.patch(f"/services/{service}", {"maxIdleTimeMillis": TINY})
    assert_refused(reply, "maxIdleTimeMillis", TINY)
    reply = await admin.put(f"/services/{service}", {"name": "s", "encryptionRequired": True,
                                                     "maxIdleTimeMillis": HUGE})
    assert_refused(reply, "maxIdleTimeMillis", HUGE)
    assert (await admin.get(f"/services/{service}")).data["maxIdleTimeMillis"] == 0


async def test_edge_routers_and_identities(admin: Api) -> None:
    reply = await admin.post("/edge-routers", {"name": "er", "appData": {"x": {"y": HUGE}}})
    assert_refused(reply, "appData.x.y", HUGE)
    router = await admin.create("/edge-routers", {"name": "er", "appData": {"x": 1}})
    reply = await admin.patch(f"/edge-routers/{router}", {"appData": {"x": [1, TINY]}})
    assert_refused(reply, "appData.x[1]", TINY)
    assert [r["appData"] for r in (await admin.get("/edge-routers")).data] == [{"x": 1}]

    reply = await admin.post("/identities", {"name": "i", "type": "User", "isAdmin": False, "appData": {"n": HUGE}})
    assert_refused(reply, "appData.n", HUGE)
    identity = await admin.create("/identities", {"name": "i", "type": "User", "isAdmin": False})
    reply = await admin.put(f"/identities/{identity}", {"name": "i", "type": "User", "isAdmin": False,
                                                        "appData": {"n": HUGE}})
    assert_refused(reply, "appData.n", HUGE)
    # Tags hold no numbers at all, and costs have a maximum: the schema refuses those first.
    reply = await admin.patch(f"/identities/{identity}", {"tags": {"n": HUGE}})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "tags.n")
    reply = await admin.patch(f"/identities/{identity}", {"defaultHostingCost": HUGE})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "defaultHostingCost")
    detail = (await admin.get(f"/identities/{identity}")).data
    assert (detail["appData"], detail["tags"], detail["defaultHostingCost"]) == ({}, {}, 0)


async def test_login_environment(admin: Api) -> None:
    await make_user(admin, "user1")
    sessions = len((await admin.get("/api-sessions")).data)
    reply = await admin.with_token(None).post("/authenticate", {
        "username": "user1", "password": "user-password", "envInfo": {"os": "linux"},
        "sdkInfo": {"build": {"number": HUGE}}}, query={"method": "password"})
    assert_refused(reply, "sdkInfo.build.number", HUGE)
    assert len((await admin.get("/api-sessions")).data) == sessions


# The next two run on the virtual clock: a request left waiting on an actor fails at once, at fail_after's deadline.


async def test_posture_response(admin: Api, autojump_clock: trio.abc.Clock) -> None:
    identity_id, client = await user(admin)
    with trio.fail_after(60):
        reply = await client.post("/posture-response", {"id": "c", "typeId": "OS", "type": "Linux",
                                                        "version": "6.1", "build": HUGE})
        assert_refused(reply, "build", HUGE)
        reply = await client.post("/posture-response-bulk", [
            {"id": "d", "typeId": "DOMAIN", "domain": "example.com"},
            {"id": "c", "typeId": "OS", "type": "Linux", "version": "6.1", "build": TINY}])
        assert_refused(reply, "[1].build", TINY)
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    assert data["os"]["type"] is None and data["domain"]["domain"] is None
    # The identity's posture state is intact and still takes reports.
    reply = await client.post("/posture-response", {"id": "c", "typeId": "OS", "type": "Linux", "version": "6.1",
                                                    "build": "42"})
    assert reply.status == 201, reply.body
    assert (await admin.get(f"/identities/{identity_id}/posture-data")).data["os"]["build"] == "42"


async def test_session_tags(admin: Api, autojump_clock: trio.abc.Clock) -> None:
    ids = await network(admin)
    await admin.create("/service-policies", {"name": "p", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#u"], "serviceRoles": ["#s"]})
    _, client = await user(admin)
    with trio.fail_after(60):
        reply = await client.post("/sessions", {"serviceId": ids["service"], "tags": {"n": HUGE}})
    assert_refused(reply, "tags.n", HUGE)
    assert (await admin.get("/sessions")).data == []
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 201


@pytest.mark.parametrize("text", ["not " * 3000 + "true", "(true or " * 1500 + "true" + ")" * 1500])
async def test_deeply_nested_filter(admin: Api, caplog: pytest.LogCaptureFixture, text: str) -> None:
    _, client = await user(admin)
    with caplog.at_level(logging.DEBUG):
        reply = await client.as_client().get("/services", query={"filter": text})
    assert (reply.status, reply.error["code"]) == (400, "INVALID_FILTER"), reply.body
    assert reply.error["cause"]["message"] == f"filter is nested deeper than {MAX_FILTER_DEPTH} levels"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    reply = await client.get("/services", query={"filter": "x" * 20000})
    assert (reply.status, reply.error["cause"]["message"]) == (400, "filter is longer than 16384 characters")


# Found by `make fuzz` (tests/fuzz/run.py).


@pytest.mark.parametrize("type_id", [{"a": 1}, ["OS"], 7, None])
async def test_a_posture_response_type_that_is_not_a_string_is_400(admin: Api, type_id: Any) -> None:
    _, client = await user(admin)
    for path, body in (("/posture-response", {"id": "c", "typeId": type_id}),
                       ("/posture-response-bulk", [{"id": "c", "typeId": type_id}])):
        reply = await client.post(path, body)
        assert reply.status == 400 and reply.error["code"] in ("COULD_NOT_VALIDATE", "COULD_NOT_PARSE_BODY"), reply.body


async def test_a_wrongly_typed_posture_field_is_400_and_stores_nothing(admin: Api) -> None:
    identity_id, client = await user(admin)
    reply = await client.post("/posture-response", {"id": "c", "typeId": "OS", "type": "Linux", "version": 6})
    assert reply.status == 400 and reply.error["code"] == "COULD_NOT_VALIDATE", reply.body
    assert (await admin.get(f"/identities/{identity_id}/posture-data")).data["os"]["type"] is None


async def test_a_challenge_key_id_that_is_not_a_string_is_400(anon: Api) -> None:
    reply = await anon.post("/enroll/challenge", {"nonce": "6f1c2a8e-2d8f-4f3e-9a51-3c0b8f1d2e4a", "keyId": 5},
                            base="")
    assert reply.status == 400 and reply.error["code"] == "COULD_NOT_VALIDATE", reply.body


@pytest.mark.parametrize(("name", "code"), [("limit", "INVALID_PAGINATION"), ("offset", "INVALID_PAGINATION"),
                                            ("filter", "INVALID_FILTER"), ("sort", "INVALID_SORT_IDENTIFIER")])
async def test_a_list_parameter_given_twice_is_400(admin: Api, name: str, code: str) -> None:
    values = {"limit": ("1", "2"), "offset": ("0", "1"), "filter": ("true", "false"), "sort": ("name", "id")}[name]
    reply = await admin.get(f"/services?{name}={values[0]}&{name}={values[1]}")
    assert reply.status == 400 and reply.error["code"] == code, reply.body
