"""Identity operations beyond the generic CRUD routes: ``POST /identities/{id}/disable`` and ``/enable`` (admin)."""

from __future__ import annotations

from quart import Blueprint, Response

from controller.authentication import DISABLE_SCHEMA, disable_identity, enable_identity
from controller.runtime.composition import Controller
from web.envelope import empty
from web.guards import Access
from web.request import read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]


def register(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    """Add the disable/enable operations to the management blueprint."""

    async def disable(id: str) -> Response:
        await disable_identity(controller.domain, id, await read_json())
        # The reference answers with no body at all; ours is the empty envelope of every other update.
        return empty()

    async def enable(id: str) -> Response:
        await enable_identity(controller.domain, id)
        return empty()

    group = RouteGroup(routes, bp, "management", tag="Identity", access=Access.ADMIN)
    group.add("POST", "/identities/{id}/disable", "disableIdentity", disable, summary="Disable an identity",
              body=DISABLE_SCHEMA)
    group.add("POST", "/identities/{id}/enable", "enableIdentity", enable, summary="Enable an identity")
