"""Policy links in both directions: the entities a policy selects, and the policies that select an entity.

A policy kind (service policies, edge router policies, service edge router policies) holds one role-selector field
per target kind; the field is found from the specs (``Field.roles``), so nothing here names a field. Both directions
run on the role index: forward through :func:`controller.roles.select_ids`, backward by reading the policies whose
role list holds ``@id``, ``#all`` or one of the entity's attributes (an entity can only match a policy through one
of those entries), then confirming each with :func:`controller.roles.matches` for the AllOf semantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.resources.context import ReadContext
from controller.roles import ALL, matches, select_ids

__all__ = ["reachable", "role_field_name", "selected_ids", "selecting_policy_ids"]


def role_field_name(ctx: ReadContext, policy_kind: str, target: str) -> str:
    """The wire name of ``policy_kind``'s role-selector field over ``target`` (``identityRoles``...).

    Raises:
        LookupError: the policy kind has no role field over ``target`` (a wiring mistake, not bad input).
    """
    for f in ctx.registry[policy_kind].all_fields():
        if f.roles == target:
            return f.name
    raise LookupError(f"{policy_kind} has no role field over {target}")


def _semantic(policy: Mapping[str, Any]) -> str:
    return str(policy.get("semantic") or "AllOf")


def selected_ids(ctx: ReadContext, policy_kind: str, policy: Mapping[str, Any], target: str) -> set[str]:
    """Ids of the ``target`` rows that ``policy`` (a row of ``policy_kind``) selects."""
    roles = policy.get(role_field_name(ctx, policy_kind, target)) or []
    return select_ids(ctx.txn, target, roles, _semantic(policy))


def selecting_policy_ids(ctx: ReadContext, policy_kind: str, target: str, entity: Mapping[str, Any]) -> set[str]:
    """Ids of the ``policy_kind`` rows whose role list over ``target`` selects ``entity`` (a row of ``target``)."""
    field_name = role_field_name(ctx, policy_kind, target)
    entries = {f"@{entity['id']}", ALL, *(f"#{a}" for a in entity.get("roleAttributes") or ())}
    candidates = {pid for entry in entries for pid in ctx.txn.ids_by_set(policy_kind, field_name, entry)}
    return {policy["id"] for policy in ctx.txn.get_many(policy_kind, sorted(candidates))
            if matches(entity, policy.get(field_name) or [], _semantic(policy))}


def reachable(ctx: ReadContext, policy_kind: str, source_kind: str, source: Mapping[str, Any], target: str,
              policy_type: str | None = None) -> set[str]:
    """Ids of ``target`` rows linked to ``source`` through any ``policy_kind`` policy selecting both.

    For example the edge routers an identity may use (edge router policies, identities → edge routers), or the
    identities that may dial a service (service policies of type ``Dial``, services → identities).
    """
    found: set[str] = set()
    policy_ids = selecting_policy_ids(ctx, policy_kind, source_kind, source)
    for policy in ctx.txn.get_many(policy_kind, sorted(policy_ids)):
        if policy_type is None or policy.get("type") == policy_type:
            found |= selected_ids(ctx, policy_kind, policy, target)
    return found
