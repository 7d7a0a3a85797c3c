"""The generic rules of the management API for good writes and reads, table-driven over every registered kind:
create, detail and list agree, read-only fields, PATCH and PUT semantics, delete, and who may call what.

Each test is parametrized over ``controller.resources.catalog.RESOURCES``; bodies come from
``tests/web/crud_bodies.py``. The rules for bad input are in ``tests/web/test_generic_crud.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.model.spec import Resource
from controller.resources.catalog import RESOURCES
from tests.support import Api, make_user
from tests.web.crud_bodies import (
    all_rows,
    discriminated,
    field_default,
    kinds,
    minimal_body,
    optional_fields,
    rich_body,
    variant_fields,
)


@pytest.mark.parametrize("resource", kinds("create"))
async def test_create_answers_201_with_the_whole_resource(admin: Api, resource: Resource) -> None:
    reply = await admin.post(f"/{resource.kind}", await rich_body(admin, resource))
    assert reply.status == 201, reply.body
    row_id = reply.data["id"]
    assert reply.data["_links"]["self"]["href"] == f"./{resource.kind}/{row_id}"
    detail = await admin.get(f"/{resource.kind}/{row_id}")
    assert detail.status == 200
    assert reply.data == detail.data


@pytest.mark.parametrize("resource", kinds("create"))
async def test_detail_and_list_show_the_same_row(admin: Api, resource: Resource) -> None:
    row_id = await admin.create(f"/{resource.kind}", await rich_body(admin, resource))
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


@pytest.mark.parametrize("resource", kinds("list", predicate=lambda r: "create" not in r.operations))
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
    for f in variant_fields(resource):
        if not f.writable and f.stored and not f.name.startswith("_"):
            values[f.name] = {"boolean": True, "integer": 7}.get(str(f.schema.get("type")), "chosen")
    return values


@pytest.mark.parametrize("resource", kinds("update"))
async def test_read_only_fields_are_ignored_on_every_write(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    read_only = _read_only(resource)
    body = await minimal_body(admin, resource)
    reply = await admin.post(f"/{kind}", {**body, **read_only})
    assert reply.status == 201, reply.body
    created = reply.data
    assert all(created.get(name) != value for name, value in read_only.items()), created
    patch = discriminated(resource, body, dict(read_only))
    assert (await admin.put(f"/{kind}/{created['id']}", {**body, **read_only})).status == 200
    assert (await admin.patch(f"/{kind}/{created['id']}", patch)).status == 200
    after = (await admin.get(f"/{kind}/{created['id']}")).data
    assert {k: after.get(k) for k in read_only if k != "updatedAt"} == {
        k: created.get(k) for k in read_only if k != "updatedAt"}
    assert (await admin.get(f"/{kind}/ChosenId")).status == 404


@pytest.mark.parametrize("resource", kinds("patch"))
async def test_patch_leaves_unsent_fields_alone(admin: Api, resource: Resource) -> None:
    body = await rich_body(admin, resource)
    row_id = await admin.create(f"/{resource.kind}", body)
    before = (await admin.get(f"/{resource.kind}/{row_id}")).data
    patch = discriminated(resource, body, {"tags": {"patched": "yes"}})
    reply = await admin.patch(f"/{resource.kind}/{row_id}", patch)
    assert reply.status == 200, reply.body
    assert reply.body == {"data": {}, "meta": {}}
    after = (await admin.get(f"/{resource.kind}/{row_id}")).data
    assert after["tags"] == {"patched": "yes"}
    unchanged = {k for k in before if k not in ("tags", "updatedAt")}
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}


@pytest.mark.parametrize("resource", kinds("update"))
async def test_put_resets_optional_fields_to_their_defaults(admin: Api, resource: Resource) -> None:
    rich = await rich_body(admin, resource)
    row_id = await admin.create(f"/{resource.kind}", rich)
    optional = list(optional_fields(resource, rich))
    created = (await admin.get(f"/{resource.kind}/{row_id}")).data
    for f in optional:
        assert created[f.name] != field_default(f), f.name
    plain = await minimal_body(admin, resource)
    reply = await admin.put(f"/{resource.kind}/{row_id}", plain)
    assert reply.status == 200, reply.body
    after = (await admin.get(f"/{resource.kind}/{row_id}")).data
    for f in optional:
        assert after[f.name] == field_default(f), f.name
    assert after["tags"] == {}


@pytest.mark.parametrize("resource", kinds("delete", predicate=lambda r: "create" in r.operations))
async def test_delete_then_not_found(admin: Api, resource: Resource) -> None:
    row_id = await admin.create(f"/{resource.kind}", await minimal_body(admin, resource))
    reply = await admin.delete(f"/{resource.kind}/{row_id}")
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    assert (await admin.get(f"/{resource.kind}/{row_id}")).status == 404
    assert (await admin.delete(f"/{resource.kind}/{row_id}")).status == 404
    assert row_id not in {row["id"] for row in await all_rows(admin, resource.kind)}


# Authorization ---------------------------------------------------------------------------------------------------


async def _requests(admin: Api, resource: Resource) -> list[tuple[str, str, Any]]:
    """One request per served standard operation of ``resource``, on a real row when there is one."""
    kind = resource.kind
    body = await minimal_body(admin, resource) if "create" in resource.operations else None
    row_id = await admin.create(f"/{kind}", dict(body)) if body is not None else None
    if row_id is None:
        rows = await all_rows(admin, kind)
        row_id = rows[0]["id"] if rows else "NoSuchId"
    plan = {"list": ("GET", f"/{kind}", None), "create": ("POST", f"/{kind}", body),
            "detail": ("GET", f"/{kind}/{row_id}", None), "update": ("PUT", f"/{kind}/{row_id}", body),
            "patch": ("PATCH", f"/{kind}/{row_id}", body), "delete": ("DELETE", f"/{kind}/{row_id}", None)}
    return [plan[op] for op in ("list", "create", "detail", "update", "patch", "delete") if op in resource.operations]


@pytest.mark.parametrize("resource", [pytest.param(r, id=r.kind) for r in RESOURCES if r.admin_only and r.operations])
async def test_non_admin_is_unauthorized_on_admin_kinds(admin: Api, resource: Resource) -> None:
    _, user = await make_user(admin, "plain-user")
    for verb, path, body in await _requests(admin, resource):
        before = await all_rows(admin, resource.kind)
        for client in (user, user.with_token(None)):
            reply = await client.request(verb, path, body)
            assert reply.status == 401, (verb, path, reply.body)
            assert reply.error["code"] == "UNAUTHORIZED"
        assert await all_rows(admin, resource.kind) == before


@pytest.mark.parametrize("resource", [pytest.param(r, id=r.kind) for r in RESOURCES
                                      if not r.admin_only and r.operations])
async def test_kinds_open_to_every_session(admin: Api, resource: Resource) -> None:
    _, user = await make_user(admin, "plain-user")
    for verb, path, body in await _requests(admin, resource):
        if verb == "GET":
            assert (await user.request(verb, path, body)).status == 200, path
        assert (await user.with_token(None).request(verb, path, body)).status == 401, path
