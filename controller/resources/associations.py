"""The association lists ``GET /{kind}/{id}/{path}`` of every kind, computed from role selectors and references.

Each list is declared by one of four resolvers: the entities a policy selects, the policies that select an entity,
the rows whose reference field holds the parent's id, and the ids listed in (or listing) a plain id-list field.
The web layer serves them through the generic list machinery, so filter, sort, paging and ``meta`` behave as on the
target's own list. Operation ids are the reference's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.access.policy_links import selected_ids, selecting_policy_ids
from controller.model.spec import Association, ReadContext

__all__ = ["ASSOCIATIONS"]

Resolve = Callable[[ReadContext, Mapping[str, Any]], set[str]]


def _selected(policy_kind: str, target: str) -> Resolve:
    """The ``target`` rows a policy of ``policy_kind`` selects."""
    def resolve(ctx: ReadContext, policy: Mapping[str, Any]) -> set[str]:
        return selected_ids(ctx, policy_kind, policy, target)
    return resolve


def _selecting(policy_kind: str, entity_kind: str) -> Resolve:
    """The policies of ``policy_kind`` that select an ``entity_kind`` row."""
    def resolve(ctx: ReadContext, entity: Mapping[str, Any]) -> set[str]:
        return set(selecting_policy_ids(ctx, policy_kind, entity_kind, entity))
    return resolve


def _referencing(kind: str, field_name: str) -> Resolve:
    """The ``kind`` rows whose reference field ``field_name`` holds the parent's id (ref index)."""
    def resolve(ctx: ReadContext, parent: Mapping[str, Any]) -> set[str]:
        return set(ctx.txn.ids_by_ref(kind, field_name, parent["id"]))
    return resolve


def _listed(field_name: str) -> Resolve:
    """The ids the parent lists in its id-list field ``field_name`` (missing ones drop out of the list query)."""
    def resolve(ctx: ReadContext, parent: Mapping[str, Any]) -> set[str]:
        return set(parent.get(field_name) or ())
    return resolve


def _listing(kind: str, field_name: str) -> Resolve:
    """The ``kind`` rows whose indexed id-list field ``field_name`` holds the parent's id."""
    def resolve(ctx: ReadContext, parent: Mapping[str, Any]) -> set[str]:
        return set(ctx.txn.ids_by_set(kind, field_name, parent["id"]))
    return resolve


def _policy_lists(policy_kind: str, op_stem: str, targets: Mapping[str, str]) -> tuple[Association, ...]:
    """A policy kind's lists of selected entities; ``targets`` maps target kind to its operationId suffix."""
    return tuple(Association(target, target, _selected(policy_kind, target), f"list{op_stem}{suffix}")
                 for target, suffix in targets.items())


ASSOCIATIONS: dict[str, tuple[Association, ...]] = {
    "service-policies": _policy_lists("service-policies", "ServicePolicy", {
        "identities": "Identities", "services": "Services", "posture-checks": "PostureChecks"}),
    "edge-router-policies": _policy_lists("edge-router-policies", "EdgeRouterPolicy", {
        "edge-routers": "EdgeRouters", "identities": "Identities"}),
    "service-edge-router-policies": _policy_lists("service-edge-router-policies", "ServiceEdgeRouterPolicy", {
        "edge-routers": "EdgeRouters", "services": "Services"}),
    "identities": (
        Association("service-policies", "service-policies", _selecting("service-policies", "identities"),
                    "listIdentityServicePolicies"),
        Association("edge-router-policies", "edge-router-policies", _selecting("edge-router-policies", "identities"),
                    "listIdentitysEdgeRouterPolicies"),
        Association("authenticators", "authenticators", _referencing("authenticators", "identityId"),
                    "getIdentityAuthenticators"),
        Association("enrollments", "enrollments", _referencing("enrollments", "identityId"),
                    "getIdentityEnrollments"),
    ),
    "services": (
        Association("service-policies", "service-policies", _selecting("service-policies", "services"),
                    "listServiceServicePolicies"),
        Association("configs", "configs", _listed("configs"), "listServiceConfig"),
        Association("service-edge-router-policies", "service-edge-router-policies",
                    _selecting("service-edge-router-policies", "services"), "listServiceServiceEdgeRouterPolicies"),
        Association("terminators", "terminators", _referencing("terminators", "service"), "listServiceTerminators"),
    ),
    "edge-routers": (
        Association("edge-router-policies", "edge-router-policies",
                    _selecting("edge-router-policies", "edge-routers"), "listEdgeRouterEdgeRouterPolicies"),
        Association("service-edge-router-policies", "service-edge-router-policies",
                    _selecting("service-edge-router-policies", "edge-routers"),
                    "listEdgeRouterServiceEdgeRouterPolicies"),
    ),
    "config-types": (
        Association("configs", "configs", _referencing("configs", "configTypeId"), "listConfigsForConfigType"),
    ),
    "configs": (
        Association("services", "services", _listing("services", "configs"), "listConfigServices"),
    ),
}
