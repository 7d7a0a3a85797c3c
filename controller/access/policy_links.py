"""Policy links in both directions: the entities a policy selects, and the policies that select an entity.

A policy kind (service policies, edge router policies, service edge router policies) holds one role-selector field
per target kind; the field is found from the specs (``Field.roles``), so nothing here names a field. Both directions
run on the role index: forward through :func:`controller.access.roles.select_ids`, backward by reading the policies
whose role list holds ``@id``, ``#all`` or one of the entity's attributes (an entity can only match a policy through one
of those entries), then confirming each with :func:`controller.access.roles.matches` for the AllOf semantic.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from controller.access.roles import ALL, matches, select_ids
from controller.model.spec import ReadContext

__all__ = ["reachable", "role_field_name", "row", "rows", "selected_ids", "selecting_policy_ids"]


def role_field_name(ctx: ReadContext, policy_kind: str, target: str) -> str:
    """The wire name of ``policy_kind``'s role-selector field over ``target`` (``identityRoles``...).

    Raises:
        LookupError: the policy kind has no role field over ``target`` (a wiring mistake, not bad input).
    """
    return ctx.shared_cached(("role-field", policy_kind, target),
                             lambda: _role_field_name(ctx, policy_kind, target))


def _role_field_name(ctx: ReadContext, policy_kind: str, target: str) -> str:
    for f in ctx.registry[policy_kind].all_fields():
        if f.roles == target:
            return f.name
    raise LookupError(f"{policy_kind} has no role field over {target}")


def rows(ctx: ReadContext, kind: str, ids: Iterable[str]) -> list[dict[str, Any]]:
    """The rows of ``ids`` that exist, in the order given; each decoded once per snapshot (once per change of
    the access kinds, for rows of those kinds). Do not mutate them."""
    return [found for row_id in ids if (found := row(ctx, kind, row_id)) is not None]


def row(ctx: ReadContext, kind: str, row_id: str) -> dict[str, Any] | None:
    """The row ``row_id`` of ``kind``, or None; remembered as :func:`rows` remembers it. Do not mutate it."""
    remember = ctx.shared_cached if kind in ctx.registry.access_kinds else ctx.cached
    found: dict[str, Any] | None = remember(("row", kind, row_id), functools.partial(ctx.txn.get, kind, row_id))
    return found


def _semantic(policy: Mapping[str, Any]) -> str:
    return str(policy.get("semantic") or "AllOf")


def selected_ids(ctx: ReadContext, policy_kind: str, policy: Mapping[str, Any], target: str) -> set[str]:
    """Ids of the ``target`` rows that ``policy`` (a row of ``policy_kind``) selects. Do not mutate the result."""
    roles = policy.get(role_field_name(ctx, policy_kind, target)) or []
    # Targets outside the access kinds (identities) come and go without touching the shared memo.
    remember = ctx.shared_cached if target in ctx.registry.access_kinds else ctx.cached
    return remember(("selected", policy_kind, policy["id"], target),
                    lambda: select_ids(ctx.txn, target, roles, _semantic(policy)))


def selecting_policy_ids(ctx: ReadContext, policy_kind: str, target: str,
                         entity: Mapping[str, Any]) -> frozenset[str]:
    """Ids of the ``policy_kind`` rows whose role list over ``target`` selects ``entity`` (a row of ``target``).

    A role list selects an entity by ``#all``, by its attributes, or by naming it (``@id``, which selects it
    whatever the semantic). All three are read from the policies alone, so the answer is kept across snapshots in
    one :class:`_SelectingIndex` per policy kind and target (see ``ReadContext.shared_cached``): per attribute
    combination for the first two, in one map from named id to policies for the third. Entities with the same
    attributes and not named by any policy share one frozenset. Every actor step asks this on a fresh snapshot, so
    the path is a memo lookup, the attribute tuple and two dict reads.
    """
    index: _SelectingIndex = ctx.shared_cached(("selecting-index", policy_kind, target),
                                               functools.partial(_SelectingIndex, ctx, policy_kind, target))
    attributes = entity.get("roleAttributes")
    key = tuple(attributes) if attributes else ()
    by_attributes = index.by_attributes.get(key)
    if by_attributes is None:
        by_attributes = index.by_attributes[key] = _selecting_by_attributes(ctx, policy_kind, index.field_name,
                                                                           key)
    named = index.naming.get(str(entity["id"]))
    return by_attributes | named if named else by_attributes


class _SelectingIndex:
    """What :func:`selecting_policy_ids` keeps per policy kind and target: the role field's name, the policies
    selecting each attribute combination seen so far (filled on demand), and entity id → the policies that name
    it (``@id``). Derived from the policies alone."""

    __slots__ = ("by_attributes", "field_name", "naming")

    def __init__(self, ctx: ReadContext, policy_kind: str, target: str) -> None:
        self.field_name = field_name = role_field_name(ctx, policy_kind, target)
        txn = ctx.txn
        self.naming: dict[str, frozenset[str]] = {
            element[1:]: frozenset(txn.ids_by_set(policy_kind, field_name, element))
            for element in txn.set_elements(policy_kind, field_name) if element.startswith("@")}
        self.by_attributes: dict[tuple[str, ...], frozenset[str]] = {}


def _selecting_by_attributes(ctx: ReadContext, policy_kind: str, field_name: str,
                             attributes: tuple[str, ...]) -> frozenset[str]:
    """Policies that select any entity holding exactly ``attributes``, through ``#all`` or their attributes."""
    entries = {ALL, *(f"#{a}" for a in attributes)}
    candidates = {pid for entry in entries for pid in ctx.txn.ids_by_set(policy_kind, field_name, entry)}
    anonymous = {"id": "", "roleAttributes": attributes}  # no id: an ``@id`` entry never matches it
    return frozenset(policy["id"] for policy in rows(ctx, policy_kind, sorted(candidates))
                     if matches(anonymous, policy.get(field_name) or [], _semantic(policy)))


def reachable(ctx: ReadContext, policy_kind: str, source_kind: str, source: Mapping[str, Any], target: str,
              policy_type: str | None = None) -> set[str]:
    """Ids of ``target`` rows linked to ``source`` through any ``policy_kind`` policy selecting both.

    For example the edge routers an identity may use (edge router policies, identities → edge routers), or the
    identities that may dial a service (service policies of type ``Dial``, services → identities). Do not mutate
    the result (it is remembered).
    """
    def union(policy_ids: Iterable[str]) -> set[str]:
        found: set[str] = set()
        for policy in rows(ctx, policy_kind, sorted(policy_ids)):
            if policy_type is None or policy.get("type") == policy_type:
                found |= selected_ids(ctx, policy_kind, policy, target)
        return found

    def compute() -> set[str]:
        policy_ids = selecting_policy_ids(ctx, policy_kind, source_kind, source)
        if target not in ctx.registry.access_kinds:
            return union(policy_ids)
        # Sources selected by the same policies reach the same targets: one union per policy set, kept.
        return ctx.shared_cached(("reachable-through", policy_kind, target, policy_type, policy_ids),
                                 lambda: union(policy_ids))

    return ctx.cached(("reachable", policy_kind, source_kind, source["id"], target, policy_type), compute)
