"""Config types and configs over HTTP: schema checks, data validated against the type, references from services."""

from __future__ import annotations

from typing import Any

from tests.support import Api

PORT_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["port"],
    "additionalProperties": False,
    "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535},
                   "hosts": {"type": "array", "items": {"type": "string", "format": "ipv4"}}},
}


def assert_invalid(reply: Any, field: str, reason: str) -> None:
    assert (reply.status, reply.error["code"]) == (400, "COULD_NOT_VALIDATE"), reply.body
    assert (reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (field, reason)


async def test_config_type_crud(admin: Api) -> None:
    reply = await admin.post("/config-types", {"name": "port.v1", "schema": PORT_SCHEMA, "tags": {"a": "b"}})
    assert reply.status == 201, reply.body
    type_id = reply.data["id"]
    detail = (await admin.get(f"/config-types/{type_id}")).data
    assert (detail["name"], detail["schema"], detail["tags"]) == ("port.v1", PORT_SCHEMA, {"a": "b"})

    bare = await admin.post("/config-types", {"name": "free.v1"})
    assert (bare.status, bare.data["schema"]) == (201, {})

    assert (await admin.patch(f"/config-types/{type_id}", {"name": "port.v2"})).status == 200
    detail = (await admin.get(f"/config-types/{type_id}")).data
    assert (detail["name"], detail["schema"]) == ("port.v2", PORT_SCHEMA)
    assert (await admin.put(f"/config-types/{type_id}", {"name": "port.v3"})).status == 200
    detail = (await admin.get(f"/config-types/{type_id}")).data
    assert (detail["name"], detail["schema"], detail["tags"]) == ("port.v3", {}, {})

    listed = await admin.get("/config-types", query={"filter": 'name = "free.v1"'})
    assert [t["id"] for t in listed.data] == [bare.data["id"]]
    assert (await admin.delete(f"/config-types/{type_id}")).status == 200
    assert (await admin.get(f"/config-types/{type_id}")).status == 404


async def test_config_type_schema_must_be_a_json_schema(admin: Api) -> None:
    reply = await admin.post("/config-types", {"name": "bad", "schema": {"type": "object", "properties": {
        "port": {"type": "integr"}}}})
    assert (reply.status, reply.error["code"], reply.error["cause"]["field"]) == (400, "COULD_NOT_VALIDATE", "schema")
    assert reply.error["cause"]["reason"].startswith("schema.properties.port.type is not valid JSON schema: ")
    reply = await admin.post("/config-types", {"name": "bad", "schema": {"required": "port"}})
    assert_invalid(reply, "schema", "schema.required is not valid JSON schema: 'port' is not of type 'array'")
    reply = await admin.post("/config-types", {"name": "bad", "schema": ["not", "an", "object"]})
    assert_invalid(reply, "schema", "schema in body must be of type object")
    # Nothing was stored (the seeded config types, intercept.v1 and the rest, are there from the start).
    assert (await admin.get("/config-types", query={"filter": 'name = "bad"'})).data == []

    type_id = await admin.create("/config-types", {"name": "good", "schema": PORT_SCHEMA})
    reply = await admin.patch(f"/config-types/{type_id}", {"schema": {"minimum": "one"}})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "schema")
    assert (await admin.get(f"/config-types/{type_id}")).data["schema"] == PORT_SCHEMA


async def test_config_crud_and_detail(admin: Api) -> None:
    type_id = await admin.create("/config-types", {"name": "port.v1", "schema": PORT_SCHEMA})
    reply = await admin.post("/configs", {"name": "web", "configTypeId": type_id, "data": {"port": 443}})
    assert reply.status == 201, reply.body
    config_id = reply.data["id"]
    detail = (await admin.get(f"/configs/{config_id}")).data
    assert detail == reply.data
    assert (detail["name"], detail["configTypeId"], detail["data"]) == ("web", type_id, {"port": 443})
    assert detail["configType"] == {"id": type_id, "name": "port.v1", "entity": "config-types",
                                    "_links": {"self": {"href": f"./config-types/{type_id}"}}}

    other_type = await admin.create("/config-types", {"name": "other"})
    # The type is fixed at create: PUT and PATCH do not carry it.
    reply = await admin.put(f"/configs/{config_id}", {"name": "web2", "configTypeId": other_type,
                                                      "data": {"port": 8443, "hosts": ["10.0.0.1"]}})
    assert reply.status == 200, reply.body
    detail = (await admin.get(f"/configs/{config_id}")).data
    assert (detail["name"], detail["configTypeId"], detail["data"]) == (
        "web2", type_id, {"port": 8443, "hosts": ["10.0.0.1"]})
    assert (await admin.patch(f"/configs/{config_id}", {"data": {"port": 80}})).status == 200
    assert (await admin.get(f"/configs/{config_id}")).data["data"] == {"port": 80}

    listed = await admin.get("/configs", query={"filter": f'type = "{type_id}"'})
    assert [c["id"] for c in listed.data] == [config_id]
    listed = await admin.get("/configs", query={"filter": f'configTypeId = "{other_type}"'})
    assert listed.data == []
    assert (await admin.delete(f"/configs/{config_id}")).status == 200
    assert (await admin.get(f"/configs/{config_id}")).status == 404


async def test_config_required_fields(admin: Api) -> None:
    type_id = await admin.create("/config-types", {"name": "free"})
    assert_invalid(await admin.post("/configs", {"name": "c", "data": {}}), "configTypeId",
                   "configTypeId in body is required")
    assert_invalid(await admin.post("/configs", {"name": "c", "configTypeId": type_id}), "data",
                   "data in body is required")
    assert_invalid(await admin.post("/configs", {"configTypeId": type_id, "data": {}}), "name",
                   "name in body is required")
    assert_invalid(await admin.post("/configs", {"name": "c", "configTypeId": "nope", "data": {}}), "configTypeId",
                   "configType not found")
    config_id = await admin.create("/configs", {"name": "c", "configTypeId": type_id, "data": {"any": "thing"}})
    assert_invalid(await admin.put(f"/configs/{config_id}", {"name": "c"}), "data", "data in body is required")
    assert_invalid(await admin.put(f"/configs/{config_id}", {"name": "c", "data": None}), "data",
                   "data in body must be of type object")


async def test_config_data_is_validated_against_its_type(admin: Api) -> None:
    type_id = await admin.create("/config-types", {"name": "port.v1", "schema": PORT_SCHEMA})
    cases = [
        ({}, "data.port", "data.port in body is required"),
        ({"port": "443"}, "data.port", "data.port in body must be of type integer"),
        ({"port": 0}, "data.port", "data.port in body should be greater than or equal to 1"),
        ({"port": 1, "hosts": ["10.0.0.1", "example"]}, "data.hosts[1]",
         "data.hosts[1] in body is invalid: 'example' is not a 'ipv4'"),
        ({"port": 1, "extra": True}, "data",
         "data in body is invalid: Additional properties are not allowed ('extra' was unexpected)"),
    ]
    for data, field, reason in cases:
        assert_invalid(await admin.post("/configs", {"name": "c", "configTypeId": type_id, "data": data}),
                       field, reason)
    assert (await admin.get("/configs")).data == []

    config_id = await admin.create("/configs", {"name": "c", "configTypeId": type_id, "data": {"port": 1}})
    assert_invalid(await admin.patch(f"/configs/{config_id}", {"data": {"port": -5}}), "data.port",
                   "data.port in body should be greater than or equal to 1")
    assert_invalid(await admin.put(f"/configs/{config_id}", {"name": "c", "data": {"hosts": []}}), "data.port",
                   "data.port in body is required")
    assert (await admin.get(f"/configs/{config_id}")).data["data"] == {"port": 1}


async def test_schema_references_outside_the_schema_are_not_fetched(admin: Api) -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "https://schemas.example/x.json"}}}
    type_id = await admin.create("/config-types", {"name": "remote", "schema": schema})
    reply = await admin.post("/configs", {"name": "c", "configTypeId": type_id, "data": {"x": 1}})
    assert_invalid(reply, "data", "data could not be validated: the config type's schema refers to "
                                  "https://schemas.example/x.json, which is not part of the schema")
    local = {"definitions": {"port": {"type": "integer"}}, "type": "object",
             "properties": {"port": {"$ref": "#/definitions/port"}}}
    local_id = await admin.create("/config-types", {"name": "local", "schema": local})
    assert (await admin.post("/configs", {"name": "c", "configTypeId": local_id, "data": {"port": 2}})).status == 201
    assert_invalid(await admin.post("/configs", {"name": "d", "configTypeId": local_id, "data": {"port": "2"}}),
                   "data.port", "data.port in body must be of type integer")


async def test_a_config_type_in_use_cannot_be_deleted(admin: Api) -> None:
    type_id = await admin.create("/config-types", {"name": "t"})
    config_id = await admin.create("/configs", {"name": "c", "configTypeId": type_id, "data": {}})
    reply = await admin.delete(f"/config-types/{type_id}")
    assert (reply.status, reply.error["code"]) == (409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert reply.error["cause"] == {"field": "configTypeId", "reason": "referenced by 1 configs",
                                    "value": f"[{config_id}]"}
    assert (await admin.get(f"/config-types/{type_id}")).status == 200
    assert (await admin.delete(f"/configs/{config_id}")).status == 200
    assert (await admin.delete(f"/config-types/{type_id}")).status == 200


async def test_service_configs_reference_existing_configs_one_per_type(admin: Api) -> None:
    first_type = await admin.create("/config-types", {"name": "t1"})
    second_type = await admin.create("/config-types", {"name": "t2"})
    a = await admin.create("/configs", {"name": "a", "configTypeId": first_type, "data": {}})
    b = await admin.create("/configs", {"name": "b", "configTypeId": first_type, "data": {}})
    c = await admin.create("/configs", {"name": "c", "configTypeId": second_type, "data": {}})

    reply = await admin.post("/services", {"name": "s", "encryptionRequired": True, "configs": [a, "nope"]})
    assert_invalid(reply, "configs", "no config found with the given ids")
    assert reply.error["cause"]["value"] == "[nope]"
    reply = await admin.post("/services", {"name": "s", "encryptionRequired": True, "configs": [a, b]})
    assert_invalid(reply, "configs", f"configs {a} and {b} have the same config type t1; a service may carry "
                                     "only one config of each type")
    assert (await admin.get("/services")).data == []

    service = await admin.create("/services", {"name": "s", "encryptionRequired": True, "configs": [a, c, a]})
    assert (await admin.get(f"/services/{service}")).data["configs"] == [a, c]
    reply = await admin.patch(f"/services/{service}", {"configs": [b, c, "gone"]})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "configs")
    assert (await admin.patch(f"/services/{service}", {"configs": [b, c]})).status == 200

    # Deleting a config removes it from the services that carried it.
    assert (await admin.delete(f"/configs/{b}")).status == 200
    assert (await admin.get(f"/services/{service}")).data["configs"] == [c]
