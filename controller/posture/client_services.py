"""What the Client API shows of services to the calling identity: its service list and detail (with permissions,
posture queries and the config data its API session asked for), when that list last changed, and for one service
the edge routers it may use (``GET /services/{id}/edge-routers``) and the service's terminators
(``GET /services/{id}/terminators``).

The routers and terminators answer only for a service the caller sees in its own service list: one a service
policy grants it, or any service for an administrator (as ``GET /services`` on the Client API). Any other id is
404, whether or not the service exists, so that a client cannot probe for services it may not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller.access.grants import service_permissions_map
from controller.clock import format_time
from controller.data.listing import ListParams
from controller.errors import ApiError, not_found
from controller.model.spec import ReadContext
from controller.posture.queries import posture_queries
from controller.resources.edge_sessions import session_edge_routers
from controller.resources.service_configs import apply_service_configs, service_configs_changed_at, wanted_config_types

if TYPE_CHECKING:
    from collections.abc import Sequence

    from controller.data.domain import Domain
    from controller.posture.state import IdentityState

__all__ = ["CLIENT_TERMINATOR_SCHEMA", "SERVICE_EDGE_ROUTERS_SCHEMA", "client_service_edge_routers",
           "client_service_terminators", "client_services", "require_visible_service", "service_updates_at"]

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
    items, meta = domain.list_page("terminators", params, ids, frozenset(_CLIENT_TERMINATOR_FIELDS))
    return [{key: item.get(key) for key in _CLIENT_TERMINATOR_FIELDS} for item in items], meta


def client_services(domain: Domain, state: IdentityState, api_session_id: str, service_id: str | None,
                    params: ListParams, config_types: Sequence[str], now: float) -> tuple[list[dict[str, Any]],
                                                                                          dict[str, Any]]:
    """The identity's services as the Client API lists them (only ``service_id`` when given), with their
    ``permissions``, ``postureQueries`` (from the identity's posture ``state``) and the data of the config types the
    API session asked for at login or ``config_types`` names; and the list ``meta``.

    Raises:
        ApiError: UNAUTHORIZED when the identity is gone; NOT_FOUND for a ``service_id`` it does not see; 400 for
            bad list parameters.
    """
    identity_id = state.identity_id
    with domain.read() as ctx:
        identity = ctx.txn.get("identities", identity_id)
        if identity is None:
            raise ApiError("UNAUTHORIZED")
        permitted = service_permissions_map(ctx, identity)
        # Admins see every service (as Invalid where no policy grants it), others only what policies grant.
        visible = set(ctx.txn.ids("services")) if identity.get("isAdmin") else set(permitted)
    if service_id is not None:
        if service_id not in visible:
            raise not_found("service", service_id)
        visible = {service_id}
    items, meta = domain.list_page("services", params, visible)
    with domain.read() as ctx:
        for item in items:
            perms = permitted.get(item["id"], set())
            granted: list[str] = [t for t in ("Dial", "Bind") if t in perms]
            item["permissions"] = granted or ["Invalid"]
            item["postureQueries"] = posture_queries(ctx, identity, item, state, api_session_id, now)
        api_session = ctx.txn.get("api-sessions", api_session_id) or {}
        wanted = wanted_config_types(ctx.txn, api_session.get("configTypes") or [], config_types)
        apply_service_configs(ctx, identity_id, items, wanted)
    return items, meta


def service_updates_at(domain: Domain, state: IdentityState, api_session_id: str, now: float) -> str:
    """When the identity's service list last changed for this API session: the latest of its posture change, its
    config overrides' change and the API session's start (RFC 3339 strings of one format compare as times)."""
    with domain.read() as ctx:
        row = ctx.txn.get("api-sessions", api_session_id)
        overrides_changed = service_configs_changed_at(ctx, state.identity_id)
    created_at = str(row["createdAt"]) if row else format_time(now)
    last = format_time(state.last_change_at) if state.last_change_at is not None else created_at
    return max(last, created_at, overrides_changed or created_at)
