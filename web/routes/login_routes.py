"""Authentication and the caller's own session and identity, on both APIs."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.authentication import MFA_AUTH_QUERY, Credentials, LiveSession, login
from controller.authentication.ext_jwt_login import ext_jwt_auth_query
from controller.clock import format_time
from controller.data.present import present
from controller.errors import ApiError, field_cause
from controller.resources.authenticators import PASSWORD, USERNAME
from controller.runtime.composition import Controller
from storage.store import ReadTxn
from web.client_certs import client_certificate
from web.envelope import empty, ok
from web.guards import Access, bearer_tokens, current_session
from web.request import read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]


def current_session_detail(controller: Controller, session_id: str, token: str) -> dict[str, Any]:
    """The current-api-session view: the stored row plus live expiry fields, and ``token``, the session's token
    (which its client has just been given or has just presented; the store keeps only its digest)."""
    live = controller.sessions.get(session_id)
    resource = controller.registry["api-sessions"]
    with controller.domain.read() as ctx:
        row = ctx.txn.get("api-sessions", session_id)
        if row is None or live is None:
            raise ApiError("UNAUTHORIZED")
        out = present(ctx, resource, row)
        out["authQueries"] = _auth_queries(ctx.txn, live)
    out["token"] = token
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


# The body of a login: the credentials of method=password, and what any method's session records.
_CREDENTIALS: dict[str, Any] = {"type": "object", "properties": {
    "username": USERNAME, "password": PASSWORD, "configTypes": {"type": "array", "items": {"type": "string"}},
    "envInfo": {"type": "object"}, "sdkInfo": {"type": "object"}}}


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    group = RouteGroup(routes, bp, api, tag="Authentication", access=Access.SESSION)

    async def authenticate() -> Response:
        method = request.args.get("method")
        if not method:
            raise ApiError("COULD_NOT_VALIDATE", field_cause("method", "method in query is required", None))
        credentials = Credentials(await read_json(), request.remote_addr or "", client_certificate(request.scope),
                                  bearer_tokens(request.headers.getlist("Authorization")))
        row = await login(controller, method, credentials)
        detail = current_session_detail(controller, row["id"], row["token"])
        headers = {"zt-session": row["token"], "expiration-seconds": str(detail["expirationSeconds"]),
                   "expires-at": detail["expiresAt"]}
        return ok(detail, headers=headers)

    async def get_current_api_session() -> Response:
        session = current_session()
        return ok(current_session_detail(controller, session.id, request.headers.get("zt-session", "")))

    async def delete_current_api_session() -> Response:
        session = current_session()
        await controller.sessions.end(session.id)
        return empty()

    async def get_current_identity() -> Response:
        session = current_session()
        return ok(controller.domain.detail("identities", session.identity_id))

    # 401: the credentials are refused; 429: too many wrong passwords lately, or too many waiting to be checked.
    group.add("POST", "/authenticate", "authenticate", authenticate, tag="Authentication", access=Access.ANYONE,
              query={"method": {"type": "string", "enum": ["password", "cert", "ext-jwt"], "required": True}},
              body=_CREDENTIALS, errors=(401, 429))
    # A session still owing a second factor may look at itself (to read its auth queries) and log out.
    group.add("GET", "/current-api-session", "getCurrentAPISession", get_current_api_session, tag="Current API Session",
              access=Access.PARTIAL_SESSION)
    group.add("DELETE", "/current-api-session", "deleteCurrentApiSession", delete_current_api_session,
              tag="Current API Session", access=Access.PARTIAL_SESSION)
    group.add("GET", "/current-identity", "getCurrentIdentity", get_current_identity, tag="Current Identity",
              access=Access.SESSION)
