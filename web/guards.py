"""Request authentication: the ``zt-session`` header to a live API session, the admin check, and the bearer JWTs
that satisfy a session's external JWT second factor."""

from __future__ import annotations

from quart import g, request

from controller.authentication import LiveSession
from controller.authentication.ext_jwt_login import MAX_BEARER_TOKENS, satisfy_ext_jwt_factor
from controller.errors import ApiError
from controller.root import Controller

__all__ = ["bearer_tokens", "bring_ext_jwt_factor", "current_session", "require_admin", "require_session"]


def require_session(controller: Controller, *, allow_partial: bool = False) -> LiveSession:
    """The caller's API session; 401 UNAUTHORIZED when absent, expired, or still owing a second factor (MFA or an
    external JWT) unless ``allow_partial``."""
    session = controller.sessions.lookup(request.headers.get("zt-session"))
    if session is None or (session.partial and not allow_partial):
        raise ApiError("UNAUTHORIZED")
    g.session = session
    return session


def require_admin(controller: Controller) -> LiveSession:
    """The caller's session if its identity is an admin; 401 UNAUTHORIZED otherwise (never 403)."""
    session = require_session(controller)
    if not controller.is_admin(session.identity_id):
        raise ApiError("UNAUTHORIZED")
    return session


def current_session() -> LiveSession:
    session: LiveSession = g.session
    return session


def bearer_tokens(values: list[str]) -> tuple[str, ...]:
    """The non-empty tokens of ``Authorization: Bearer`` header values, in order, at most two (as the reference
    reads them)."""
    tokens = [v[7:].strip() for v in values if v[:7].lower() == "bearer "]
    return tuple(t for t in tokens if t)[:MAX_BEARER_TOKENS]


async def bring_ext_jwt_factor(controller: Controller) -> None:
    """Before a request's handler: when the request carries ``Authorization: Bearer`` and a ``zt-session`` whose
    session owes an external JWT, let those tokens satisfy the factor (a refused token only leaves the session
    partial). Requests without an ``Authorization`` header, or of sessions owing no JWT, cost a header lookup."""
    authorization = request.headers.getlist("Authorization")
    if not authorization:
        return
    session = controller.sessions.lookup(request.headers.get("zt-session"))
    if session is None or not session.ext_jwt_owed:
        return
    tokens = bearer_tokens(authorization)
    if tokens:
        await satisfy_ext_jwt_factor(controller, session, tokens)
