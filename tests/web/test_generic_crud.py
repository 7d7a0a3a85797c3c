"""The generic rules of the management API for bad input, table-driven over every registered kind: required
fields, wrong types, unknown ids, unique values and names.

Each test is parametrized over ``controller.resources.catalog.RESOURCES``, so a kind added to the catalog is covered
without touching this module; bodies come from ``tests/web/crud_bodies.py``. The rules for good writes and reads are
in ``tests/web/test_generic_rows.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.model.field import Mode
from controller.model.spec import Resource
from controller.resources.catalog import RESOURCES
from tests.support import Api
from tests.web.crud_bodies import (
    all_rows,
    assert_field_error,
    discriminated,
    kinds,
    minimal_body,
    sample_value,
    unique_fields,
    variant_fields,
    wrong_type,
)

# Required fields and types -----------------------------------------------------------------------------------


def _required_names(resource: Resource, mode: Mode) -> list[str]:
    names = [f.name for f in variant_fields(resource) if mode in f.required and not f.name.startswith("_")]
    if resource.variants is not None and mode is not Mode.UPDATE:
        names.insert(0, resource.variants.discriminator)
    return names


def _writable_fields(resource: Resource, mode: Mode) -> list[tuple[str, Any]]:
    """Every field a request of ``mode`` may carry, with a value of the wrong JSON type."""
    fields = [f for f in variant_fields(resource) if mode in f.writable and not f.name.startswith("_")]
    return [(f.name, wrong_type(f.schema)) for f in fields] + [("tags", 5)]


@pytest.mark.parametrize("resource", kinds("create"))
async def test_missing_required_fields_are_named(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await minimal_body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await all_rows(admin, kind)
    for field in _required_names(resource, Mode.CREATE):
        reply = await admin.post(f"/{kind}", {k: v for k, v in body.items() if k != field})
        assert_field_error(reply, field, f"{field} in body is required")
        assert reply.error["cause"]["value"] == "<nil>"
    if "update" in resource.operations:
        for field in _required_names(resource, Mode.UPDATE):
            reply = await admin.put(f"/{kind}/{row_id}", {k: v for k, v in body.items() if k != field})
            assert_field_error(reply, field, f"{field} in body is required")
    if "patch" in resource.operations:
        for field in _required_names(resource, Mode.PATCH):
            reply = await admin.patch(f"/{kind}/{row_id}", {"tags": {"a": "b"}})
            assert_field_error(reply, field, f"{field} in body is required")
    assert await all_rows(admin, kind) == before


@pytest.mark.parametrize("resource", kinds("create"))
async def test_values_of_the_wrong_type_are_named(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await minimal_body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await all_rows(admin, kind)
    for field, value in _writable_fields(resource, Mode.CREATE):
        assert_field_error(await admin.post(f"/{kind}", {**body, field: value}), field)
    if "update" in resource.operations:
        for field, value in _writable_fields(resource, Mode.UPDATE):
            assert_field_error(await admin.put(f"/{kind}/{row_id}", {**body, field: value}), field)
    if "patch" in resource.operations:
        for field, value in _writable_fields(resource, Mode.PATCH):
            patch = discriminated(resource, body, {field: value})
            assert_field_error(await admin.patch(f"/{kind}/{row_id}", patch), field)
    assert await all_rows(admin, kind) == before


# Unknown ids ---------------------------------------------------------------------------------------------------


_VERBS = {"detail": "GET", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}


@pytest.mark.parametrize("resource", [pytest.param(r, id=r.kind) for r in RESOURCES
                                      if set(_VERBS) & r.operations])
async def test_unknown_id_is_not_found(admin: Api, resource: Resource) -> None:
    body = await minimal_body(admin, resource) if {"update", "patch"} & resource.operations else None
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


@pytest.mark.parametrize("resource", kinds("create", predicate=unique_fields))
async def test_duplicate_unique_values_are_refused_on_create_put_and_patch(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    for field in unique_fields(resource):
        schema = variant_fields(resource)
        first = await minimal_body(admin, resource)
        first[field] = sample_value(next(f.schema for f in schema if f.name == field), field)
        await admin.create(f"/{kind}", first)
        second = await minimal_body(admin, resource)
        second[field] = sample_value(next(f.schema for f in schema if f.name == field), field)
        second_id = await admin.create(f"/{kind}", second)
        third = await minimal_body(admin, resource)
        before = await all_rows(admin, kind)

        reply = await admin.post(f"/{kind}", {**third, field: first[field]})
        assert_field_error(reply, field)
        assert reply.error["cause"]["value"] == first[field]
        if "update" in resource.operations:
            assert_field_error(await admin.put(f"/{kind}/{second_id}", {**second, field: first[field]}), field)
        if "patch" in resource.operations:
            patch = discriminated(resource, second, {field: first[field]})
            assert_field_error(await admin.patch(f"/{kind}/{second_id}", patch), field)
        assert await all_rows(admin, kind) == before


def _name_kinds() -> list[Any]:
    return [pytest.param(r, id=r.kind) for r in RESOURCES if "create" in r.operations
            and (f := r.field("name")) is not None and f.unique and Mode.CREATE in f.required]


@pytest.mark.parametrize("resource", _name_kinds())
async def test_empty_or_overlong_name_is_refused_on_create_put_and_patch(admin: Api, resource: Resource) -> None:
    kind = resource.kind
    body = await minimal_body(admin, resource)
    row_id = await admin.create(f"/{kind}", body)
    before = await all_rows(admin, kind)
    for name, reason in (("", "name is required"), ("n" * 600, "name must be at most 511 bytes long")):
        assert_field_error(await admin.post(f"/{kind}", {**await minimal_body(admin, resource), "name": name}), "name",
                            reason)
        assert_field_error(await admin.put(f"/{kind}/{row_id}", {**body, "name": name}), "name", reason)
        patch = discriminated(resource, body, {"name": name})
        assert_field_error(await admin.patch(f"/{kind}/{row_id}", patch), "name", reason)
    assert await all_rows(admin, kind) == before


# Create, detail, list, update, delete ------------------------------------------------------------------------
