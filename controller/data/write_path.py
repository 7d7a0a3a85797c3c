"""The single write path: create, replace (PUT/PATCH) and delete of any resource kind.

Every function here is synchronous and runs inside the writer's transaction (``controller/data/group_commit.py``), so a
read-check-write (unique names, references, referenced deletes) is atomic. Each records what it wrote in
``ctx.changes``; that list is the one choke point through which actors and caches learn about changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.access.roles import check_attributes, normalize_roles
from controller.clock import format_time
from controller.errors import ApiError, FieldError, field_cause, not_found
from controller.ids import new_id
from controller.model.field import MISSING, Field, Mode, Variant
from controller.model.spec import Change, Resource, WriteContext
from storage.keys import MAX_KEY_BYTES, UnstorableValue
from storage.rows import MAX_INT, MIN_INT, UnencodableValue, encode
from storage.store import UniqueViolation

__all__ = ["check_storable", "create_row", "delete_row", "put_row", "replace_row", "write_internal"]

# Kinds whose role attributes are selected by policies and so may not look like selectors themselves.
_ATTRIBUTE_CHECKED = {"identities", "services", "edge-routers"}


def _default(f: Field) -> Any:
    return f.default() if callable(f.default) else f.default


def create_row(ctx: WriteContext, resource: Resource, body: Mapping[str, Any], variant: Variant | None,
               row_id: str | None = None) -> dict[str, Any]:
    """Validate and store a new row built from a schema-valid body; returns the stored row."""
    if row_id is None:
        row_id = new_id(ctx.now)
        while ctx.txn.exists(resource.kind, row_id):  # another process's id, or a clock set back since
            row_id = new_id(ctx.now)
    now = format_time(ctx.now)
    row: dict[str, Any] = {"id": row_id, "createdAt": now, "updatedAt": now}
    if resource.variants is not None and variant is not None:
        row[resource.variants.discriminator] = variant.value
    row["tags"] = body.get("tags") if body.get("tags") is not None else {}
    for f in resource.fields_for(variant):
        if not f.stored:
            continue
        if f.name in body and (Mode.CREATE in f.writable or f.name.startswith("_")) and (
                body[f.name] is not None or f.nullable):
            row[f.name] = body[f.name]
        elif f.default is not MISSING:
            row[f.name] = _default(f)
    stored = put_row(ctx, resource, row, None, Mode.CREATE)
    if resource.hooks.after_create is not None:
        resource.hooks.after_create(ctx, stored, body)
    return stored


def replace_row(ctx: WriteContext, resource: Resource, row_id: str, body: Mapping[str, Any], mode: Mode,
                variant: Variant | None) -> dict[str, Any]:
    """Apply a PUT (every writable field; absent ones reset to defaults) or a PATCH (only the fields sent)."""
    old = ctx.txn.get(resource.kind, row_id)
    if old is None:
        raise not_found(resource.singular, row_id)
    row = dict(old)
    if resource.variants is not None and variant is not None:
        row[resource.variants.discriminator] = variant.value
    if mode is Mode.UPDATE:
        # PUT replaces the whole resource: tags not sent are cleared like any other optional field.
        row["tags"] = body.get("tags") or {}
    elif body.get("tags") is not None:
        row["tags"] = body["tags"]
    for f in resource.fields_for(variant):
        if not f.stored or (mode not in f.writable and not f.name.startswith("_")):
            continue
        if f.name.startswith("_") and f.name not in body:
            continue
        if f.name in body:
            value = body[f.name]
            if value is not None or f.nullable:
                row[f.name] = value
            elif mode is Mode.UPDATE and f.default is not MISSING:
                row[f.name] = _default(f)
        elif mode is Mode.UPDATE:
            row[f.name] = _default(f) if f.default is not MISSING else None
    row["updatedAt"] = format_time(ctx.now)
    return put_row(ctx, resource, row, old, mode)


def put_row(ctx: WriteContext, resource: Resource, row: dict[str, Any], old: Mapping[str, Any] | None,
            mode: Mode) -> dict[str, Any]:
    """Check references, role lists and hooks, then store ``row`` and record the change.

    Raises:
        FieldError: a reference or role list does not resolve, a hook refuses the row, a unique value is taken, an
            indexed value cannot be a key, or a value holds an integer the store cannot hold (named by its path,
            ``appData.x.y``). Nothing is stored then: the writer rolls the mutation back.
    """
    for f in resource.linked_fields():
        value = row.get(f.name)
        if f.ref and value is not None and not ctx.txn.exists(f.ref, value):
            raise FieldError(f.name, f"{ctx.registry[f.ref].singular} not found", value)
        if f.roles and f.name in row:
            target = ctx.registry[f.roles]
            row[f.name] = normalize_roles(ctx.txn, f.name, value, target.kind, target.singular)
    if resource.kind in _ATTRIBUTE_CHECKED and "roleAttributes" in row:
        row["roleAttributes"] = check_attributes("roleAttributes", row["roleAttributes"])
    if resource.hooks.validate is not None:
        resource.hooks.validate(ctx, row, old, mode)
    try:
        ctx.txn.put(resource.kind, row)
    except UniqueViolation as exc:
        raise ApiError("COULD_NOT_VALIDATE",
                       field_cause(exc.field, f"{exc.field} is must be unique", exc.value)) from None
    except UnstorableValue as exc:
        raise _unstorable(exc, row) from None
    except UnencodableValue as exc:
        raise _unencodable(exc, "") from None
    if resource.hooks.after_write is not None:
        resource.hooks.after_write(ctx, old, row)
    ctx.changes.append(Change(resource.kind, row["id"], dict(old) if old is not None else None, row))
    return row


def _unstorable(exc: UnstorableValue, row: Mapping[str, Any]) -> FieldError:
    """An indexed value the store cannot key (empty or overlong) as the field error a client can act on."""
    if not exc.empty:
        return FieldError(exc.field, f"{exc.field} must be at most {MAX_KEY_BYTES} bytes long", exc.value)
    if isinstance(row.get(exc.field), list):
        return FieldError(exc.field, f"{exc.field} entries must not be empty", row[exc.field])
    return FieldError(exc.field, f"{exc.field} is required", exc.value)


def check_storable(value: Any, field: str = "") -> None:
    """Refuse a client's value the store could not hold, before it goes where a failed write cannot answer the
    client (an actor's state): :func:`put_row` refuses the same for rows.

    Args:
        value: decoded JSON: maps, lists, strings, numbers, booleans, None.
        field: the value's name in the request, the start of the path an error names (``""``: the body itself).

    Raises:
        FieldError: ``value`` holds an integer outside the stored range (-2**63 .. 2**64-1), at any depth; the
            error names it by its path (``tags.x``, ``build``, ``[1].data.n``).
    """
    try:
        encode(value)
    except UnencodableValue as exc:
        raise _unencodable(exc, field) from None


def _unencodable(exc: UnencodableValue, field: str) -> FieldError:
    path = f"{field}.{exc.path}" if field and exc.path and not exc.path.startswith("[") else field + exc.path
    return FieldError(path, f"{path or 'value'} must be an integer from {MIN_INT} to {MAX_INT}", exc.value)


def delete_row(ctx: WriteContext, resource: Resource, row_id: str) -> dict[str, Any]:
    """Delete a row: refuse when referenced, cascade or clear references, strip ``@id`` from role lists."""
    old = ctx.txn.get(resource.kind, row_id)
    if old is None:
        raise not_found(resource.singular, row_id)
    # Every write made on the way to the delete below records a change; if one did, this row may have changed too.
    written = len(ctx.changes)
    if resource.hooks.before_delete is not None:
        resource.hooks.before_delete(ctx, old)
    for other, f in ctx.registry.referencing_fields(resource.kind):
        holders = ctx.txn.ids_by_ref(other.kind, f.name, row_id)
        if not holders:
            continue
        if f.on_delete == "refuse":
            raise ApiError("CAN_NOT_DELETE_REFERENCED_ENTITY",
                           field_cause(f.name, f"referenced by {len(holders)} {other.kind}", holders))
        for holder in holders:
            if f.on_delete == "cascade":
                delete_row(ctx, other, holder)
            else:
                row = ctx.txn.get(other.kind, holder)
                if row is not None:
                    write_internal(ctx, other, {**row, f.name: None}, row)
    for other, f in ctx.registry.role_fields(resource.kind):
        for holder in ctx.txn.ids_by_set(other.kind, f.name, f"@{row_id}"):
            row = ctx.txn.get(other.kind, holder)
            if row is not None:
                stripped = [r for r in row.get(f.name) or [] if r != f"@{row_id}"]
                write_internal(ctx, other, {**row, f.name: stripped}, row)
    # A cascade above may have rewritten this very row (a self-reference): then the store reads it again.
    ctx.txn.delete(resource.kind, row_id, stored=old if len(ctx.changes) == written else None)
    if resource.hooks.after_write is not None:
        resource.hooks.after_write(ctx, old, None)
    ctx.changes.append(Change(resource.kind, row_id, old, None))
    return old


def write_internal(ctx: WriteContext, resource: Resource, row: dict[str, Any], old: Mapping[str, Any]) -> None:
    """A write the controller makes itself, not a client: a cascade (the row was valid and only lost a reference)
    or a state change of the domain's own (an enrolled router, an extended certificate). No hook runs; the store
    still enforces unique indexes, and the change is recorded."""
    row["updatedAt"] = format_time(ctx.now)
    ctx.txn.put(resource.kind, row)
    ctx.changes.append(Change(resource.kind, row["id"], dict(old), row))
