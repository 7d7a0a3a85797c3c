"""Edge router policies (identities to edge routers) and service edge router policies (services to edge routers).

Both are plain role-selector policies: the generic write path validates and sorts their role lists, and strips
``@id`` entries when a selected entity is deleted; the association lists resolve what they select.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.model.field import NAME, SEMANTIC, role_field
from controller.model.spec import Hooks, ReadContext, Resource

__all__ = ["EDGE_ROUTER_POLICIES", "SERVICE_EDGE_ROUTER_POLICIES"]


def _present_edge_router_policy(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["isSystem"] = bool(row.get("isSystem", False))


EDGE_ROUTER_POLICIES = Resource(
    kind="edge-router-policies", singular="edgeRouterPolicy", op_name="EdgeRouterPolicy",
    op_plural="EdgeRouterPolicies", tag="Edge Router Policy", body_name="policy",
    fields=(
        NAME,
        SEMANTIC,
        role_field("identityRoles", "identities"),
        role_field("edgeRouterRoles", "edge-routers"),
    ),
    hooks=Hooks(present=_present_edge_router_policy),
    shapes_access=True,
)

SERVICE_EDGE_ROUTER_POLICIES = Resource(
    kind="service-edge-router-policies", singular="serviceEdgeRouterPolicy", op_name="ServiceEdgeRouterPolicy",
    op_plural="ServiceEdgeRouterPolicies", tag="Service Edge Router Policy", body_name="policy",
    fields=(
        NAME,
        SEMANTIC,
        role_field("serviceRoles", "services"),
        role_field("edgeRouterRoles", "edge-routers"),
    ),
    shapes_access=True,
)
