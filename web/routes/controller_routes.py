"""``GET /controllers`` on both APIs: the controllers of the network, which is this one alone
(``controller/runtime/controllers.py``)."""

from __future__ import annotations

from quart import Blueprint, Response

from controller.runtime.composition import Controller
from controller.runtime.controllers import CONTROLLER_DETAIL_SCHEMA, list_controllers
from web.envelope import ok
from web.guards import Access
from web.request import list_params
from web.route_table import RouteGroup, Routes

__all__ = ["register"]


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    """Add ``GET /controllers`` to the blueprint of ``api`` ("management" or "client"). On the Client API any full
    session may call it, as in the reference; the Management API is the administrators', as all of it is here."""

    access = Access.ADMIN if api == "management" else Access.SESSION

    async def controllers() -> Response:
        items, meta = list_controllers(controller, api, list_params(False))
        return ok(items, meta)

    group = RouteGroup(routes, bp, api, tag="Controllers", access=access)
    group.add("GET", "/controllers", "listControllers", controllers, summary="List the controllers of the network",
              paged=True, data={"type": "array", "items": CONTROLLER_DETAIL_SCHEMA})
