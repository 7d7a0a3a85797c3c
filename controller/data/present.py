"""Rows to response bodies: the stored row plus ``_links``, entity refs, ``*RolesDisplay`` and hook fields.

Stored keys that start with an underscore are internal (hashes, secrets) and never leave the controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.model.spec import ReadContext, Resource

__all__ = ["entity_ref", "link", "present"]


def link(path: str) -> dict[str, Any]:
    return {"href": f"./{path}"}


def entity_ref(ctx: ReadContext, kind: str, row_id: str | None) -> dict[str, Any] | None:
    """``{id, name, entity, _links}`` for a reference; None when the id is empty."""
    if not row_id:
        return None
    row = ctx.txn.get(kind, row_id)
    return {"id": row_id, "name": row.get("name", "") if row else "", "entity": kind,
            "_links": {"self": link(f"{kind}/{row_id}")}}


def present(ctx: ReadContext, resource: Resource, row: Mapping[str, Any]) -> dict[str, Any]:
    """The response body of one row."""
    out = {k: v for k, v in row.items() if not k.startswith("_")}
    row_id = row["id"]
    links = {"self": link(f"{resource.kind}/{row_id}")}
    for association in ctx.registry.associations(resource.kind):
        links[association.path] = link(f"{resource.kind}/{row_id}/{association.path}")
    out["_links"] = links
    for f in resource.linked_fields():
        if f.ref and f.ref_name:
            out[f.ref_name] = entity_ref(ctx, f.ref, row.get(f.name))
        if f.roles:
            out[f"{f.name}Display"] = _roles_display(ctx, f.roles, row.get(f.name) or [])
    if resource.hooks.present is not None:
        resource.hooks.present(ctx, row, out)
    return out


def _roles_display(ctx: ReadContext, kind: str, roles: list[str]) -> list[dict[str, str]]:
    shown = []
    for role in roles:
        name = role
        if role.startswith("@"):
            target = ctx.txn.get(kind, role[1:])
            name = f"@{target.get('name', role[1:])}" if target else role
        shown.append({"role": role, "name": name})
    return shown
