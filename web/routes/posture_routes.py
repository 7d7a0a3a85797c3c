"""Management views of the posture engine and of computed access: posture data, failed service requests,
services and edge routers an identity can reach, identities that can reach a service, policy advice, sessions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from quart import Blueprint, Response, request

from controller.access.grants import service_permissions_map
from controller.access.policy_links import reachable
from controller.authentication import API_SESSIONS
from controller.clock import format_time
from controller.data.present import entity_ref
from controller.errors import ApiError, field_cause, not_found
from controller.model.spec import ReadContext
from controller.posture.state import IdentityState, SessionPosture
from controller.runtime.composition import Controller
from web.envelope import ok
from web.guards import Access, current_session
from web.request import list_params
from web.route_table import RouteGroup, Routes

__all__ = ["posture_data_view", "register"]


def _time(value: float | None) -> str | None:
    return format_time(value) if value is not None else None


def _api_session_entry(row: Mapping[str, Any], session: SessionPosture | None) -> dict[str, Any]:
    """One API session's part of the posture data: its MFA and endpoint state, and the SDK it logged in with."""
    session_id = str(row["id"])
    mfa = (session or SessionPosture()).mfa
    return {
        # passedOnWake/passedOnUnlock belong to a check, not to a session: null, as in the reference.
        "mfa": {"apiSessionId": session_id, "passedMfa": mfa.passed_mfa_at is not None,
                "passedAt": _time(mfa.passed_mfa_at), "passedOnWake": None, "passedOnUnlock": None},
        "endpointState": {"wokenAt": _time(mfa.woken_at), "unlockedAt": _time(mfa.unlocked_at)},
        "sdkInfo": dict(row.get("sdkInfo") or {}),
    }


def posture_data_view(state: IdentityState, api_sessions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``GET /identities/{id}/posture-data``: identity-wide records plus, for each of the identity's live API
    sessions (``api_sessions``, their rows), its MFA and endpoint state."""
    posture = state.posture
    os, mac, domain = posture.os, posture.mac, posture.domain
    return {
        "os": {"postureCheckId": os.posture_check_id if os else "", "timedOut": False,
               "lastUpdatedAt": _time(os.last_updated_at) if os else None, "type": os.type if os else None,
               "version": os.version if os else None, "build": os.build if os else None},
        "mac": {"postureCheckId": mac.posture_check_id if mac else "", "timedOut": False,
                "lastUpdatedAt": _time(mac.last_updated_at) if mac else None,
                "addresses": list(mac.addresses) if mac else None},
        "domain": {"postureCheckId": domain.posture_check_id if domain else "", "timedOut": False,
                   "lastUpdatedAt": _time(domain.last_updated_at) if domain else None,
                   "domain": domain.domain if domain else None},
        "processes": [{"postureCheckId": check_id, "timedOut": p.timed_out, "lastUpdatedAt": _time(p.last_updated_at),
                       "isRunning": p.is_running, "binaryHash": p.hash,
                       "signerFingerprints": list(p.signer_fingerprints)}
                      for check_id, p in posture.processes.items()],
        "apiSessionPostureData": {str(row["id"]): _api_session_entry(row, state.sessions.get(str(row["id"])))
                                  for row in api_sessions},
    }


# What an endpoint may see of an edge router (the Client API's edge router detail): never enrollment tokens,
# fingerprints or certificates.
_CLIENT_ROUTER_FIELDS = ("id", "createdAt", "updatedAt", "tags", "name", "hostname", "supportedProtocols", "syncStatus",
                         "isOnline", "cost", "noTraversal", "disabled", "appData")


def _client_router(item: dict[str, Any]) -> dict[str, Any]:
    out = {name: item.get(name) for name in _CLIENT_ROUTER_FIELDS}
    out["_links"] = {"self": item["_links"]["self"]}
    return out


def _policy_type() -> str | None:
    value = request.args.get("policyType")
    if value is None or value == "":
        return None
    for known in ("Dial", "Bind"):
        if value.lower() == known.lower():
            return known
    raise ApiError("COULD_NOT_VALIDATE", field_cause("policyType", "policyType in query should be one of [dial bind]",
                                                     value))


def register(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    domain = controller.domain
    engine = controller.posture

    group = RouteGroup(routes, bp, "management", tag="Identity", access=Access.ADMIN)

    def parent(kind: str, row_id: str) -> dict[str, Any]:
        with domain.read() as ctx:
            row = ctx.txn.get(kind, row_id)
        if row is None:
            raise not_found(controller.registry[kind].singular, row_id)
        return row

    def related(kind: str, target: str, resolve: Callable[[ReadContext, dict[str, Any]], Iterable[str]]) -> Any:
        async def handler(id: str) -> Response:
            row = parent(kind, id)
            with domain.read() as ctx:
                ids = set(resolve(ctx, row))
            items, meta = domain.list_page(target, list_params(False), ids)
            return ok(items, meta)
        return handler

    async def posture_data(id: str) -> Response:
        parent("identities", id)
        state = await engine.state(id)
        with domain.read() as ctx:
            api_sessions = ctx.txn.get_many(API_SESSIONS, ctx.txn.ids_by_ref(API_SESSIONS, "identityId", id))
        return ok(posture_data_view(state, api_sessions))

    async def failed_requests(id: str) -> Response:
        parent("identities", id)
        state = await engine.state(id)
        return ok([dict(f) for f in state.failures])

    def identity_services(ctx: ReadContext, identity: dict[str, Any]) -> set[str]:
        wanted = _policy_type()
        return {sid for sid, types in service_permissions_map(ctx, identity).items()
                if wanted is None or wanted in types}

    async def policy_advice(id: str, serviceId: str) -> Response:
        identity = parent("identities", id)
        service = parent("services", serviceId)
        with domain.read() as ctx:
            perms = service_permissions_map(ctx, identity).get(serviceId, set())
            identity_routers = reachable(ctx, "edge-router-policies", "identities", identity, "edge-routers")
            service_routers = reachable(ctx, "service-edge-router-policies", "services", service, "edge-routers")
            common = [{**(entity_ref(ctx, "edge-routers", router_id) or {}), "isOnline": False}
                      for router_id in sorted(identity_routers & service_routers)]
            return ok({
                "identityId": id, "identity": entity_ref(ctx, "identities", id),
                "serviceId": serviceId, "service": entity_ref(ctx, "services", serviceId),
                "isBindAllowed": "Bind" in perms, "isDialAllowed": "Dial" in perms,
                "identityRouterCount": len(identity_routers), "serviceRouterCount": len(service_routers),
                "commonRouters": common,
            })

    async def route_path(id: str) -> Response:
        parent("sessions", id)
        # The route path lists the routers of the session's live circuit. No router connects to this controller
        # yet, so no session has a circuit: the path is empty (never null).
        return ok({"routePath": []})

    # The related-entity lists take the list parameters; the posture views answer one object or a fixed list.
    group.add("GET", "/identities/{id}/posture-data", "getIdentityPostureData", posture_data)
    group.add("GET", "/identities/{id}/failed-service-requests", "getIdentityFailedServiceRequests", failed_requests)
    group.add("GET", "/identities/{id}/services", "listIdentityServices",
              related("identities", "services", identity_services), paged=True)
    group.add("GET", "/identities/{id}/edge-routers", "listIdentityEdgeRouters",
              related("identities", "edge-routers",
                      lambda ctx, row: reachable(ctx, "edge-router-policies", "identities", row, "edge-routers")),
              paged=True)
    group.add("GET", "/services/{id}/identities", "listServiceIdentities",
              related("services", "identities",
                      lambda ctx, row: reachable(ctx, "service-policies", "services", row, "identities",
                                                 _policy_type())),
              tag="Service", paged=True)
    group.add("GET", "/services/{id}/edge-routers", "listServiceEdgeRouters",
              related("services", "edge-routers",
                      lambda ctx, row: reachable(ctx, "service-edge-router-policies", "services", row,
                                                 "edge-routers")),
              tag="Service", paged=True)
    group.add("GET", "/edge-routers/{id}/identities", "listEdgeRouterIdentities",
              related("edge-routers", "identities",
                      lambda ctx, row: reachable(ctx, "edge-router-policies", "edge-routers", row, "identities")),
              tag="Edge Router", paged=True)
    group.add("GET", "/edge-routers/{id}/services", "listEdgeRouterServices",
              related("edge-routers", "services",
                      lambda ctx, row: reachable(ctx, "service-edge-router-policies", "edge-routers", row,
                                                 "services")),
              tag="Edge Router", paged=True)
    group.add("GET", "/identities/{id}/policy-advice/{serviceId}", "getIdentityPolicyAdvice", policy_advice)
    group.add("GET", "/sessions/{id}/route-path", "detailSessionRoutePath", route_path, tag="Session")


def register_client(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    """``GET /current-identity/edge-routers`` on the Client API."""
    domain = controller.domain

    async def current_identity_routers() -> Response:
        session = current_session()
        with domain.read() as ctx:
            identity = ctx.txn.get("identities", session.identity_id)
            ids = reachable(ctx, "edge-router-policies", "identities", identity, "edge-routers") if identity else set()
        items, meta = domain.list_page("edge-routers", list_params(False), ids)
        return ok([_client_router(item) for item in items], meta)

    group = RouteGroup(routes, bp, "client", tag="Current Identity", access=Access.SESSION)
    group.add("GET", "/current-identity/edge-routers", "getCurrentIdentityEdgeRouters", current_identity_routers,
              paged=True)
