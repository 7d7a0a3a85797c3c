"""Client API ``GET /external-jwt-signers``: the identity providers a client may log in with.

Anonymous (a client needs it to find its identity provider before it has a session). Only enabled signers are
listed, with the standard list parameters and ``meta``; each shows only what a client needs to reach its provider:
``id``, ``createdAt``, ``updatedAt``, ``tags``, ``_links``, ``name`` and ``externalAuthUrl`` (null when unset), never
the issuer, audience, keys or certificate. The management API serves the signers themselves (generic routes).
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response

from controller.runtime.composition import Controller
from web.envelope import ok
from web.guards import Access
from web.request import list_params
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_KIND = "external-jwt-signers"
_CLIENT_FIELDS = ("id", "createdAt", "updatedAt", "tags", "_links", "name", "externalAuthUrl")
_CLIENT_SIGNER: dict[str, Any] = {
    "type": "object", "required": list(_CLIENT_FIELDS),
    "properties": {"id": {"type": "string"}, "createdAt": {"type": "string", "format": "date-time"},
                   "updatedAt": {"type": "string", "format": "date-time"}, "tags": {"type": "object"},
                   "_links": {"type": "object"}, "name": {"type": "string"},
                   "externalAuthUrl": {"type": ["string", "null"], "format": "url"}},
}


def _client_view(item: dict[str, Any]) -> dict[str, Any]:
    """A signer as the Client API shows it."""
    out = {name: item.get(name) for name in _CLIENT_FIELDS}
    out["_links"] = {"self": {"href": f"./{_KIND}/{item['id']}"}}
    return out


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    """Add ``GET /external-jwt-signers`` to the client API's blueprint ``bp`` (nothing on the management API)."""
    if api != "client":
        return

    async def list_external_jwt_signers() -> Response:
        with controller.domain.read() as ctx:
            enabled = [row["id"] for row in ctx.txn.scan(_KIND, frozenset({"id", "enabled"})) if row.get("enabled")]
        items, meta = controller.domain.list_page(_KIND, list_params(False), enabled)
        return ok([_client_view(item) for item in items], meta)

    group = RouteGroup(routes, bp, "client", tag="External JWT Signer", access=Access.ANYONE)
    group.add("GET", f"/{_KIND}", "listExternalJwtSigners", list_external_jwt_signers, paged=True,
              summary="List the enabled external JWT signers a client may log in with",
              data={"type": "array", "items": _CLIENT_SIGNER})
