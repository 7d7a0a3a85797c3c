"""The generic rules of the management API, table-driven over every registered kind.

Each test is parametrized over ``controller.resources.catalog.RESOURCES``, so a kind added to the catalog is covered
without touching this module. Request bodies are built from the kinds' specs: :func:`_body` fills every required
field from its JSON schema, creates the rows that required references point at, and applies the few per-kind
values in ``OVERRIDES`` that a schema cannot express (a hook's rule, a variant to use).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import pytest

from controller.resources.catalog import RESOURCES
from controller.resources.spec import MISSING, Field, Mode, Resource
from tests.support import Api, make_user

# Values a kind needs beyond what its schema says (hook rules such as "method must be updb").
OVERRIDES: dict[str, dict[str, Any]] = {
    "authenticators": {"method": "updb", "password": "a-password"},
    "posture-checks": {"typeId": "MFA"},
    "services": {"configs": []},  # ids of existing configs, one per config type
    # A signer has exactly one key source; overridden fields are left out of the "every optional field" bodies.
    "external-jwt-signers": {"certPem": None, "jwksEndpoint": "https://idp.example/jwks"},
}

# Non-default values of optional fields that need real rows (a field holding a list of ids, not a ``ref``).
RICH_OVERRIDES: dict[str, dict[str, Callable[[Api], Awaitable[Any]]]] = {
    "services": {"configs": lambda admin: _references(admin, "configs")},
}

_counter = itertools.count(1)


def _kinds(operation: str, *, predicate: Any = None) -> list[Any]:
    return [pytest.param(r, id=r.kind) for r in RESOURCES
            if operation in r.operations and (predicate is None or predicate(r))]


def _variant_fields(resource: Resource, body: Mapping[str, Any] | None = None) -> tuple[Field, ...]:
    """The body fields of the variant a test body uses (the override's, or the first)."""
    variant = None
    if resource.variants is not None:
        chosen = (body or OVERRIDES.get(resource.kind, {})).get(resource.variants.discriminator)
        variant = resource.variants.get(chosen) if chosen else resource.variants.variants[0]
    return resource.fields_for(variant)


def _sample(schema: Mapping[str, Any], name: str) -> Any:
    """A valid value for ``schema`` (strings unique per call)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "string" and schema.get("format") in ("uri", "url"):
        return f"https://{name.lower()}-{next(_counter)}.example/"
    if kind == "string":
        text = f"{name}-{next(_counter)}"
        text = text.ljust(int(schema.get("minLength", 0)), "x")
        return text[: int(schema.get("maxLength", len(text)))]
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "array":
        return [_sample(schema.get("items", {"type": "string"}), name) for _ in range(schema.get("minItems", 0))]
    if kind == "object":
        props = schema.get("properties", {})
        return {key: _sample(props[key], key) for key in schema.get("required", [])}
    return f"{name}-{next(_counter)}"


def _wrong_type(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    wrong: dict[str, Any] = {"string": 12345, "boolean": "yes", "integer": "seven", "number": "seven",
                             "array": "not-a-list", "object": ["not", "an", "object"]}
    return wrong[str(kind)]


def _default(f: Field) -> Any:
    return f.default() if callable(f.default) else f.default


async def _reference(admin: Api, kind: str) -> str:
    """The id of a new row of ``kind`` (a prerequisite of another kind's body)."""
    resource = next(r for r in RESOURCES if r.kind == kind)
    return await admin.create(f"/{kind}", await _body(admin, resource))


async def _references(admin: Api, kind: str) -> list[str]:
    return [await _reference(admin, kind)]


async def _body(admin: Api, resource: Resource) -> dict[str, Any]:
    """A minimal valid create body that also carries every field PUT requires."""
    body: dict[str, Any] = dict(OVERRIDES.get(resource.kind, {}))
    for f in _variant_fields(resource):
        if f.name in body or f.name.startswith("_") or not (f.required & {Mode.CREATE, Mode.UPDATE}):
            continue
        body[f.name] = await _reference(admin, f.ref) if f.ref else _sample(f.schema, f.name)
    if resource.variants is not None:
        body.setdefault(resource.variants.discriminator, resource.variants.variants[0].value)
    return body


def _optional_fields(resource: Resource, body: Mapping[str, Any]) -> Iterator[Field]:
    """Stored optional fields with a default that both create and PUT write."""
    overridden = OVERRIDES.get(resource.kind, {})
    for f in _variant_fields(resource, body):
        if (f.stored and not f.name.startswith("_") and f.default is not MISSING and not f.required
                and f.name not in overridden
                and {Mode.CREATE, Mode.UPDATE} <= f.writable):
            yield f


async def _non_default(admin: Api, f: Field) -> Any:
    """A valid value for ``f`` that differs from its default."""
    default = _default(f)
    if f.ref:
        return await _reference(admin, f.ref)
    if f.roles:
        return ["#picked"]
    schema = f.schema
    if "enum" in schema:
        return next(v for v in schema["enum"] if v != default)
    kind = schema.get("type")
    if kind == "boolean":
        return not default
    if kind == "integer":
        # Positive, since some kinds store every non-positive value as one (an MFA timeout of 0 is -1).
        return min(30 if default != 30 else 31, schema.get("maximum", 31))
    if kind == "array":
        return [_sample(schema.get("items", {"type": "string"}), f.name)]
    if kind == "object":
        extra = schema.get("additionalProperties")
        value = _sample(extra, "v") if isinstance(extra, dict) else "v"
        return {**_sample(schema, f.name), "picked": value}
    return _sample(schema, f.name)


async def _rich_body(admin: Api, resource: Resource) -> dict[str, Any]:
    body = await _body(admin, resource)
    body["tags"] = {"owner": "tests", "flag": True}
    special = RICH_OVERRIDES.get(resource.kind, {})
    for f in _optional_fields(resource, body):
        body[f.name] = await special[f.name](admin) if f.name in special else await _non_default(admin, f)
    return body


async def _all_rows(admin: Api, kind: str) -> list[Any]:
    reply = await admin.get(f"/{kind}", query={"limit": "-1"})
    assert reply.status == 200, reply.body
    return list(reply.data)


def _assert_field_error(reply: Any, field: str, reason: str | None = None) -> None:
    assert reply.status == 400, reply.body
    assert reply.error["code"] == "COULD_NOT_VALIDATE", reply.body
    assert reply.error["cause"]["field"] == field, reply.body
    if reason is not None:
        assert reply.error["cause"]["reason"] == reason


def _unique_fields(resource: Resource) -> list[str]:
    return [f.name for f in _variant_fields(resource) if f.unique and Mode.CREATE in f.writable]


def _discriminated(resource: Resource, body: Mapping[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A PATCH body plus the discriminator, which a PATCH of a kind with variants must carry."""
    if resource.variants is not None:
        patch[resource.variants.discriminator] = body[resource.variants.discriminator]
    return patch


# Required fields and types -----------------------------------------------------------------------------------


def _required_names(resource: Resource, mode: Mode) -> list[str]:
    names = [f.name for f in _variant_fields(resource) if mode in f.required and not f.name.startswith("_")]
    if resource.variants is not None and mode is not Mode.UPDATE:
        names.insert(0, resource.variants.discriminator)
    return names


def _writable_fields(resource: Resource, mode: Mode) -> list[tuple[str, Any]]:
    """Every field a request of ``mode`` may carry, with a value of the wrong JSON type."""
    fields = [f for f in _variant_fields(resource) if mode in f.writable and not f.name.startswith("_")]
    return [(f.name, _wrong_type(f.schema)) for f in fields] + [("tags", 5)]


@pytest.mark.parametrize("resource", _kinds("create"))
async def test_missing_required_fields_are_named(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await _body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await _all_rows(admin, kind)
    for field in _required_names(resource, Mode.CREATE):
        reply = await admin.post(f"/{kind}", {k: v for k, v in body.items() if k != field})
        _assert_field_error(reply, field, f"{field} in body is required")
        assert reply.error["cause"]["value"] == "<nil>"
    if "update" in resource.operations:
        for field in _required_names(resource, Mode.UPDATE):
            reply = await admin.put(f"/{kind}/{row_id}", {k: v for k, v in body.items() if k != field})
            _assert_field_error(reply, field, f"{field} in body is required")
    if "patch" in resource.operations:
        for field in _required_names(resource, Mode.PATCH):
            reply = await admin.patch(f"/{kind}/{row_id}", {"tags": {"a": "b"}})
            _assert_field_error(reply, field, f"{field} in body is required")
    assert await _all_rows(admin, kind) == before


@pytest.mark.parametrize("resource", _kinds("create"))
async def test_values_of_the_wrong_type_are_named(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await _body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await _all_rows(admin, kind)
    for field, value in _writable_fields(resource, Mode.CREATE):
        _assert_field_error(await admin.post(f"/{kind}", {**body, field: value}), field)
    if "update" in resource.operations:
        for field, value in _writable_fields(resource, Mode.UPDATE):
            _assert_field_error(await admin.put(f"/{kind}/{row_id}", {**body, field: value}), field)
    if "patch" in resource.operations:
        for field, value in _writable_fields(resource, Mode.PATCH):
            patch = _discriminated(resource, body, {field: value})
            _assert_field_error(await admin.patch(f"/{kind}/{row_id}", patch), field)
    assert await _all_rows(admin, kind) == before


# Unknown ids ---------------------------------------------------------------------------------------------------


_VERBS = {"detail": "GET", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}


@pytest.mark.parametrize("resource", [pytest.param(r, id=r.kind) for r in RESOURCES
                                      if set(_VERBS) & r.operations])
async def test_unknown_id_is_not_found(admin: Api, resource: Resource) -> None:
    body = await _body(admin, resource) if {"update", "patch"} & resource.operations else None
    for operation, verb in _VERBS.items():
        if operation not in resource.operations:
            continue
        reply = await admin.request(verb, f"/{resource.kind}/NoSuchId", body if verb in ("PUT", "PATCH") else None)
        assert reply.status == 404, (verb, reply.body)
        assert reply.error["code"] == "NOT_FOUND"
        assert reply.error["cause"] == {"code": "UNHANDLED",
                                        "message": f"{resource.singular} with id NoSuchId not found"}
    # An id no row could have (longer than any storable key) is simply not found.
    assert (await admin.get(f"/{resource.kind}/{'L' * 600}")).status == 404


# Uniqueness (difference #4: a rename onto an existing value is refused, not ignored) ---------------------------


@pytest.mark.parametrize("resource", _kinds("create", predicate=_unique_fields))
async def test_duplicate_unique_values_are_refused_on_create_put_and_patch(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    for field in _unique_fields(resource):
        schema = _variant_fields(resource)
        first = await _body(admin, resource)
        first[field] = _sample(next(f.schema for f in schema if f.name == field), field)
        await admin.create(f"/{kind}", first)
        second = await _body(admin, resource)
        second[field] = _sample(next(f.schema for f in schema if f.name == field), field)
        second_id = await admin.create(f"/{kind}", second)
        third = await _body(admin, resource)
        before = await _all_rows(admin, kind)

        reply = await admin.post(f"/{kind}", {**third, field: first[field]})
        _assert_field_error(reply, field)
        assert reply.error["cause"]["value"] == first[field]
        if "update" in resource.operations:
            _assert_field_error(await admin.put(f"/{kind}/{second_id}", {**second, field: first[field]}), field)
        if "patch" in resource.operations:
            patch = _discriminated(resource, second, {field: first[field]})
            _assert_field_error(await admin.patch(f"/{kind}/{second_id}", patch), field)
        assert await _all_rows(admin, kind) == before


def _name_kinds() -> list[Any]:
    return [pytest.param(r, id=r.kind) for r in RESOURCES if "create" in r.operations
            and (f := r.field("name")) is not None and f.unique and Mode.CREATE in f.required]


@pytest.mark.parametrize("resource", _name_kinds())
async def test_empty_or_overlong_name_is_refused_on_create_put_and_patch(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await _body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await _all_rows(admin, kind)
    for name, reason in (("", "name is required"), ("n" * 600, "name must be at most 511 bytes long")):
        _assert_field_error(await admin.post(f"/{kind}", {**await _body(admin, resource), "name": name}), "name",
                            reason)
        _assert_field_error(await admin.put(f"/{kind}/{row_id}", {**body, "name": name}), "name", reason)
        patch = _discriminated(resource, body, {"name": name})
        _assert_field_error(await admin.patch(f"/{kind}/{row_id}", patch), "name", reason)
    assert await _all_rows(admin, kind) == before


# Create, detail, list, update, delete ------------------------------------------------------------------------


@pytest.mark.parametrize("resource", _kinds("create"))
async def test_create_answers_201_with_the_whole_resource(admin: Api, resource: Resource) -> None:
    reply = await admin.post(f"/{resource.kind}", await _rich_body(admin, resource))
    assert reply.status == 201, reply.body
    row_id = reply.data["id"]
    assert reply.data["_links"]["self"]["href"] == f"./{resource.kind}/{row_id}"
    detail = await admin.get(f"/{resource.kind}/{row_id}")
    assert detail.status == 200
    assert reply.data == detail.data


@pytest.mark.parametrize("resource", _kinds("create"))
async def test_detail_and_list_show_the_same_row(admin: Api, resource: Resource) -> None:
    row_id = await admin.create(f"/{resource.kind}", await _rich_body(admin, resource))
    detail = await admin.get(f"/{resource.kind}/{row_id}")
    assert detail.status == 200
    assert detail.body["meta"] == {}
    assert detail.data["id"] == row_id
    for key in ("createdAt", "updatedAt", "tags", "_links"):
        assert key in detail.data
    listed = await admin.get(f"/{resource.kind}", query={"filter": f'id = "{row_id}"'})
    assert listed.status == 200
    assert listed.data == [detail.data]
    assert listed.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 1}
    assert "id" in listed.body["meta"]["filterableFields"]


@pytest.mark.parametrize("resource", _kinds("list", predicate=lambda r: "create" not in r.operations))
async def test_lists_of_kinds_without_create_have_the_list_shape(admin: Api, resource: Resource) -> None:
    listed = await admin.get(f"/{resource.kind}", query={"limit": "-1"})
    assert listed.status == 200
    assert isinstance(listed.data, list)
    assert listed.body["meta"]["pagination"]["totalCount"] == len(listed.data)
    for row in listed.data:
        assert row["_links"]["self"]["href"] == f"./{resource.kind}/{row['id']}"
        if "detail" in resource.operations:
            assert (await admin.get(f"/{resource.kind}/{row['id']}")).data == row


def _read_only(resource: Resource) -> dict[str, Any]:
    """A value for every field no request may write (``id``, timestamps, server-kept flags)."""
    values: dict[str, Any] = {"id": "ChosenId", "createdAt": "2001-01-01T00:00:00.000Z",
                              "updatedAt": "2001-01-01T00:00:00.000Z"}
    for f in _variant_fields(resource):
        if not f.writable and f.stored and not f.name.startswith("_"):
            values[f.name] = {"boolean": True, "integer": 7}.get(str(f.schema.get("type")), "chosen")
    return values


@pytest.mark.parametrize("resource", _kinds("update"))
async def test_read_only_fields_are_ignored_on_every_write(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    read_only = _read_only(resource)
    body = await _body(admin, resource)
    reply = await admin.post(f"/{kind}", {**body, **read_only})
    assert reply.status == 201, reply.body
    created = reply.data
    assert all(created.get(name) != value for name, value in read_only.items()), created
    patch = _discriminated(resource, body, dict(read_only))
    assert (await admin.put(f"/{kind}/{created['id']}", {**body, **read_only})).status == 200
    assert (await admin.patch(f"/{kind}/{created['id']}", patch)).status == 200
    after = (await admin.get(f"/{kind}/{created['id']}")).data
    assert {k: after.get(k) for k in read_only if k != "updatedAt"} == {
        k: created.get(k) for k in read_only if k != "updatedAt"}
    assert (await admin.get(f"/{kind}/ChosenId")).status == 404


@pytest.mark.parametrize("resource", _kinds("patch"))
async def test_patch_leaves_unsent_fields_alone(admin: Api, resource: Resource) -> None:
    body = await _rich_body(admin, resource)
    row_id = await admin.create(f"/{resource.kind}", body)
    before = (await admin.get(f"/{resource.kind}/{row_id}")).data
    patch = _discriminated(resource, body, {"tags": {"patched": "yes"}})
    reply = await admin.patch(f"/{resource.kind}/{row_id}", patch)
    assert reply.status == 200, reply.body
    assert reply.body == {"data": {}, "meta": {}}
    after = (await admin.get(f"/{resource.kind}/{row_id}")).data
    assert after["tags"] == {"patched": "yes"}
    unchanged = {k for k in before if k not in ("tags", "updatedAt")}
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}


@pytest.mark.parametrize("resource", _kinds("update"))
async def test_put_resets_optional_fields_to_their_defaults(admin: Api, resource: Resource) -> None:
    rich = await _rich_body(admin, resource)
    row_id = await admin.create(f"/{resource.kind}", rich)
    optional = list(_optional_fields(resource, rich))
    created = (await admin.get(f"/{resource.kind}/{row_id}")).data
    for f in optional:
        assert created[f.name] != _default(f), f.name
    plain = await _body(admin, resource)
    reply = await admin.put(f"/{resource.kind}/{row_id}", plain)
    assert reply.status == 200, reply.body
    after = (await admin.get(f"/{resource.kind}/{row_id}")).data
    for f in optional:
        assert after[f.name] == _default(f), f.name
    assert after["tags"] == {}


@pytest.mark.parametrize("resource", _kinds("delete", predicate=lambda r: "create" in r.operations))
async def test_delete_then_not_found(admin: Api, resource: Resource) -> None:
    row_id = await admin.create(f"/{resource.kind}", await _body(admin, resource))
    reply = await admin.delete(f"/{resource.kind}/{row_id}")
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    assert (await admin.get(f"/{resource.kind}/{row_id}")).status == 404
    assert (await admin.delete(f"/{resource.kind}/{row_id}")).status == 404
    assert row_id not in {row["id"] for row in await _all_rows(admin, resource.kind)}


# Authorization ---------------------------------------------------------------------------------------------------


async def _requests(admin: Api, resource: Resource) -> list[tuple[str, str, Any]]:
    """One request per served standard operation of ``resource``, on a real row when there is one."""
    kind = resource.kind
    body = await _body(admin, resource) if "create" in resource.operations else None
    row_id = await admin.create(f"/{kind}", dict(body)) if body is not None else None
    if row_id is None:
        rows = await _all_rows(admin, kind)
        row_id = rows[0]["id"] if rows else "NoSuchId"
    plan = {"list": ("GET", f"/{kind}", None), "create": ("POST", f"/{kind}", body),
            "detail": ("GET", f"/{kind}/{row_id}", None), "update": ("PUT", f"/{kind}/{row_id}", body),
            "patch": ("PATCH", f"/{kind}/{row_id}", body), "delete": ("DELETE", f"/{kind}/{row_id}", None)}
    return [plan[op] for op in ("list", "create", "detail", "update", "patch", "delete") if op in resource.operations]


@pytest.mark.parametrize("resource", [pytest.param(r, id=r.kind) for r in RESOURCES if r.admin_only])
async def test_non_admin_is_unauthorized_on_admin_kinds(admin: Api, resource: Resource) -> None:
    _, user = await make_user(admin, "plain-user")
    for verb, path, body in await _requests(admin, resource):
        before = await _all_rows(admin, resource.kind)
        for client in (user, user.with_token(None)):
            reply = await client.request(verb, path, body)
            assert reply.status == 401, (verb, path, reply.body)
            assert reply.error["code"] == "UNAUTHORIZED"
        assert await _all_rows(admin, resource.kind) == before


@pytest.mark.parametrize("resource", [pytest.param(r, id=r.kind) for r in RESOURCES if not r.admin_only])
async def test_kinds_open_to_every_session(admin: Api, resource: Resource) -> None:
    _, user = await make_user(admin, "plain-user")
    for verb, path, body in await _requests(admin, resource):
        if verb == "GET":
            assert (await user.request(verb, path, body)).status == 200, path
        assert (await user.with_token(None).request(verb, path, body)).status == 401, path
