"""What the Client API shows of one service to the calling identity beyond its detail: the edge routers it may use
for it (``GET /services/{id}/edge-routers``) and the service's terminators (``GET /services/{id}/terminators``).

Both answer only for a service the caller sees in its own service list: one a service policy grants it, or any
service for an administrator (as ``GET /services`` on the Client API). Any other id is 404, whether or not the
service exists, so that a client cannot probe for services it may not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller.errors import ApiError, not_found
from controller.listing import ListParams
from controller.posture.access import service_permissions_map
from controller.resources.context import ReadContext
from controller.resources.edge_sessions import session_edge_routers

if TYPE_CHECKING:
    from controller.domain import Domain

__all__ = ["CLIENT_TERMINATOR_SCHEMA", "SERVICE_EDGE_ROUTERS_SCHEMA", "client_service_edge_routers",
           "client_service_terminators", "require_visible_service"]

_ROUTER: dict[str, Any] = {"type": "object", "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "hostname": {"type": "string"},
    "isOnline": {"type": "boolean"}, "syncStatus": {"type": "string"},
    "supportedProtocols": {"type": "object", "additionalProperties": {"type": "string"}},
    "urls": {"type": "object", "additionalProperties": {"type": "string"}},
    "cost": {"type": ["integer", "null"]}, "noTraversal": {"type": ["boolean", "null"]},
    "disabled": {"type": "boolean"}, "appData": {"type": "object"}}}

SERVICE_EDGE_ROUTERS_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "edgeRouters": {"type": "array", "items": _ROUTER}}}
"""The answer of ``GET /services/{id}/edge-routers``: the routers as a session of the service lists them."""

_CLIENT_TERMINATOR_FIELDS = ("id", "createdAt", "updatedAt", "tags", "_links", "serviceId", "service", "routerId",
                             "identity")
CLIENT_TERMINATOR_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["id", "createdAt", "updatedAt", "_links", "serviceId", "service", "routerId",
                                   "identity"],
    "properties": {"id": {"type": "string"}, "createdAt": {"type": "string", "format": "date-time"},
                   "updatedAt": {"type": "string", "format": "date-time"}, "tags": {"type": "object"},
                   "_links": {"type": "object"}, "serviceId": {"type": "string"}, "service": {"type": "object"},
                   "routerId": {"type": "string"}, "identity": {"type": "string"}},
}
"""One terminator as the Client API shows it: where it is, not how it is reached (no address, binding or cost)."""


def require_visible_service(ctx: ReadContext, identity_id: str, service_id: str) -> dict[str, Any]:
    """The service row, when the identity sees the service in its Client API service list.

    Raises:
        ApiError: 401 UNAUTHORIZED when the identity no longer exists (its session outlived it); 404 NOT_FOUND when
            the service does not exist or the identity may not see it.
    """
    identity = ctx.txn.get("identities", identity_id)
    if identity is None:
        raise ApiError("UNAUTHORIZED")
    service = ctx.txn.get("services", service_id)
    if service is None or not (identity.get("isAdmin") or service_id in service_permissions_map(ctx, identity)):
        raise not_found("service", service_id)
    return service


def client_service_edge_routers(domain: Domain, identity_id: str, service_id: str) -> dict[str, Any]:
    """``{"edgeRouters": [...]}``: the edge routers both the identity (edge router policies) and the service
    (service edge router policies) may use, as a session of the service lists them (commonEdgeRouterProperties,
    with each router's ``id`` and ``urls`` beside them). Every one, unpaged, as the reference answers.

    Raises:
        ApiError: as :func:`require_visible_service`.
    """
    with domain.read() as ctx:
        require_visible_service(ctx, identity_id, service_id)
        return {"edgeRouters": session_edge_routers(ctx, {"identityId": identity_id, "serviceId": service_id})}


def client_service_terminators(domain: Domain, identity_id: str, service_id: str,
                               params: ListParams) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A page of the service's terminators (filter, sort and paging as on the management list), each as
    :data:`CLIENT_TERMINATOR_SCHEMA`, and the list ``meta``.

    Raises:
        ApiError: as :func:`require_visible_service`; 400 for bad list parameters.
    """
    with domain.read() as ctx:
        require_visible_service(ctx, identity_id, service_id)
        ids = ctx.txn.ids_by_ref("terminators", "service", service_id)
    items, meta = domain.list_page("terminators", params, ids)
    return [{key: item.get(key) for key in _CLIENT_TERMINATOR_FIELDS} for item in items], meta
