"""Authentication and the caller's own session and identity, on both APIs."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.authentication import MFA_AUTH_QUERY, Credentials, LiveSession, login
from controller.authentication.ext_jwt_login import ext_jwt_auth_query
from controller.clock import format_time
from controller.errors import ApiError, field_cause
from controller.present import present
from controller.root import Controller
from storage.store import ReadTxn
from web.client_certs import client_certificate
from web.envelope import empty, ok
from web.guards import bearer_tokens, require_session
from web.request import read_json
from web.routes import RouteInfo, Routes

__all__ = ["register"]


def current_session_detail(controller: Controller, session_id: str) -> dict[str, Any]:
    """The current-api-session view: the stored row plus live expiry fields."""
    live = controller.sessions.get(session_id)
    resource = controller.registry["api-sessions"]
    with controller.domain.read() as ctx:
        row = ctx.txn.get("api-sessions", session_id)
        if row is None or live is None:
            raise ApiError("UNAUTHORIZED")
        out = present(ctx, resource, row)
        out["authQueries"] = _auth_queries(ctx.txn, live)
    expires = controller.sessions.expires_at(live)
    out["lastActivityAt"] = format_time(live.last_activity)
    out["cachedLastActivityAt"] = out["lastActivityAt"]
    out["expiresAt"] = format_time(expires)
    out["expirationSeconds"] = int(controller.sessions.timeout)
    out["isMfaRequired"] = live.mfa_required
    out["isMfaComplete"] = live.mfa_complete
    return out


def _auth_queries(txn: ReadTxn, live: LiveSession) -> list[dict[str, Any]]:
    """One auth query per second factor the session still owes: MFA, then the external JWT."""
    queries: list[dict[str, Any]] = []
    if live.mfa_owed:
        queries.append(dict(MFA_AUTH_QUERY))
    if live.ext_jwt_owed and live.ext_jwt_signer_id is not None:
        queries.append(ext_jwt_auth_query(txn, live.ext_jwt_signer_id))
    return queries


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    def add(method: str, path: str, operation_id: str, tag: str, handler: Any, admin: bool = False,
            **details: Any) -> None:
        routes.add(bp, RouteInfo(api, method, path, f"{operation_id}", tag, admin=admin, **details), handler)

    async def authenticate() -> Response:
        method = request.args.get("method")
        if not method:
            raise ApiError("COULD_NOT_VALIDATE", field_cause("method", "method in query is required", None))
        credentials = Credentials(await read_json(), request.remote_addr or "", client_certificate(request.scope),
                                  bearer_tokens(request.headers.getlist("Authorization")))
        row = await login(controller, method, credentials)
        detail = current_session_detail(controller, row["id"])
        headers = {"zt-session": row["token"], "expiration-seconds": str(detail["expirationSeconds"]),
                   "expires-at": detail["expiresAt"]}
        return ok(detail, headers=headers)

    async def get_current_api_session() -> Response:
        session = require_session(controller, allow_partial=True)
        return ok(current_session_detail(controller, session.id))

    async def delete_current_api_session() -> Response:
        session = require_session(controller, allow_partial=True)
        await controller.sessions.end(session.id)
        return empty()

    async def get_current_identity() -> Response:
        session = require_session(controller)
        return ok(controller.domain.detail("identities", session.identity_id))

    add("POST", "/authenticate", "authenticate", "Authentication", authenticate, session=False,
        query={"method": {"type": "string", "enum": ["password", "cert", "ext-jwt"], "required": True}})
    add("GET", "/current-api-session", "getCurrentAPISession", "Current API Session", get_current_api_session)
    add("DELETE", "/current-api-session", "deleteCurrentApiSession", "Current API Session",
        delete_current_api_session)
    add("GET", "/current-identity", "getCurrentIdentity", "Current Identity", get_current_identity)
