"""Policy links in both directions: the entities a policy selects, and the policies that select an entity.

A policy kind (service policies, edge router policies, service edge router policies) holds one role-selector field
per target kind; the field is found from the specs (``Field.roles``), so nothing here names a field. Both directions
run on the role index: forward through :func:`controller.roles.select_ids`, backward by reading the policies whose
role list holds ``@id``, ``#all`` or one of the entity's attributes (an entity can only match a policy through one
of those entries), then confirming each with :func:`controller.roles.matches` for the AllOf semantic.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from controller.resources.context import ReadContext
from controller.roles import ALL, matches, select_ids

__all__ = ["reachable", "role_field_name", "rows", "selected_ids", "selecting_policy_ids"]


def role_field_name(ctx: ReadContext, policy_kind: str, target: str) -> str:
    """The wire name of ``policy_kind``'s role-selector field over ``target`` (``identityRoles``...).

    Raises:
        LookupError: the policy kind has no role field over ``target`` (a wiring mistake, not bad input).
    """
    return ctx.cached(("role-field", policy_kind, target), lambda: _role_field_name(ctx, policy_kind, target))


def _role_field_name(ctx: ReadContext, policy_kind: str, target: str) -> str:
    for f in ctx.registry[policy_kind].all_fields():
        if f.roles == target:
            return f.name
    raise LookupError(f"{policy_kind} has no role field over {target}")


def rows(ctx: ReadContext, kind: str, ids: Iterable[str]) -> list[dict[str, Any]]:
    """The rows of ``ids`` that exist, in the order given; each decoded once per snapshot."""
    found = []
    for row_id in ids:
        row = ctx.cached(("row", kind, row_id), functools.partial(ctx.txn.get, kind, row_id))
        if row is not None:
            found.append(row)
    return found


def _semantic(policy: Mapping[str, Any]) -> str:
    return str(policy.get("semantic") or "AllOf")


def selected_ids(ctx: ReadContext, policy_kind: str, policy: Mapping[str, Any], target: str) -> set[str]:
    """Ids of the ``target`` rows that ``policy`` (a row of ``policy_kind``) selects. Do not mutate the result."""
    roles = policy.get(role_field_name(ctx, policy_kind, target)) or []
    return ctx.cached(("selected", policy_kind, policy["id"], target),
                      lambda: select_ids(ctx.txn, target, roles, _semantic(policy)))


def selecting_policy_ids(ctx: ReadContext, policy_kind: str, target: str, entity: Mapping[str, Any]) -> set[str]:
    """Ids of the ``policy_kind`` rows whose role list over ``target`` selects ``entity`` (a row of ``target``).

    Do not mutate the result (it is remembered for the snapshot)."""
    field_name = role_field_name(ctx, policy_kind, target)

    def compute() -> set[str]:
        entries = {f"@{entity['id']}", ALL, *(f"#{a}" for a in entity.get("roleAttributes") or ())}
        candidates = {pid for entry in entries for pid in ctx.txn.ids_by_set(policy_kind, field_name, entry)}
        return {policy["id"] for policy in rows(ctx, policy_kind, sorted(candidates))
                if matches(entity, policy.get(field_name) or [], _semantic(policy))}

    return ctx.cached(("selecting", policy_kind, target, entity["id"]), compute)


def reachable(ctx: ReadContext, policy_kind: str, source_kind: str, source: Mapping[str, Any], target: str,
              policy_type: str | None = None) -> set[str]:
    """Ids of ``target`` rows linked to ``source`` through any ``policy_kind`` policy selecting both.

    For example the edge routers an identity may use (edge router policies, identities → edge routers), or the
    identities that may dial a service (service policies of type ``Dial``, services → identities). Do not mutate
    the result (it is remembered for the snapshot).
    """
    def compute() -> set[str]:
        found: set[str] = set()
        policy_ids = selecting_policy_ids(ctx, policy_kind, source_kind, source)
        for policy in rows(ctx, policy_kind, sorted(policy_ids)):
            if policy_type is None or policy.get("type") == policy_type:
                found |= selected_ids(ctx, policy_kind, policy, target)
        return found

    return ctx.cached(("reachable", policy_kind, source_kind, source["id"], target, policy_type), compute)
