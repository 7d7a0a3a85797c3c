"""Management operations on what an identity is configured with beyond its own fields: its service config
overrides (``/identities/{id}/service-configs``) and its data-flow trace (``PUT /identities/{id}/trace``).
Administrators only."""

from __future__ import annotations

from quart import Blueprint, Response

from controller.resources.identity_trace import TRACE_DETAIL_SCHEMA, TRACE_SPEC_SCHEMA, update_identity_trace
from controller.resources.service_configs import (
    ASSIGN_SCHEMA,
    DETAIL_SCHEMA,
    assign_service_configs,
    list_service_configs,
    remove_service_configs,
)
from controller.runtime.composition import Controller
from web.envelope import empty, ok
from web.guards import Access
from web.request import read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]


def register(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    """Add the service-config and trace operations to the management blueprint."""
    domain = controller.domain
    path = "/identities/{id}/service-configs"

    async def list_configs(id: str) -> Response:
        items, meta = list_service_configs(domain, id)
        return ok(items, meta)

    async def assign(id: str) -> Response:
        await assign_service_configs(domain, id, await read_json("serviceConfigs"))
        return empty()

    async def remove(id: str) -> Response:
        # No body removes every override; a body must be the list of pairs (JSON null is not one).
        await remove_service_configs(domain, id, await read_json("serviceConfigIdPairs", absent=[]))
        return empty()

    async def trace(id: str) -> Response:
        return ok(await update_identity_trace(domain, id, await read_json("traceSpec")))

    group = RouteGroup(routes, bp, "management", tag="Identity", access=Access.ADMIN)

    group.add("GET", path, "listIdentitysServiceConfigs", list_configs,
              summary="List an identity's service config "
        "overrides",
              data={"type": "array", "items": DETAIL_SCHEMA})
    group.add("POST", path, "associateIdentitysServiceConfigs", assign,
              summary="Override service configs for an "
        "identity, replacing its override of the same service and config type",
              body=ASSIGN_SCHEMA)
    group.add("DELETE", path, "disassociateIdentitysServiceConfigs", remove,
              summary="Remove the listed service config "
        "overrides of an identity, or all of them without a body",
              body=ASSIGN_SCHEMA, body_optional=True)
    group.add("PUT", "/identities/{id}/trace", "updateIdentityTracing", trace,
              summary="Enable or disable the data-flow "
        "trace of an identity (recorded and reported; Tollgate has no data plane to trace)",
              body=TRACE_SPEC_SCHEMA, data=TRACE_DETAIL_SCHEMA)
