"""Request authentication: the ``zt-session`` header to a live API session, and the admin check."""

from __future__ import annotations

from quart import g, request

from controller.authentication import LiveSession
from controller.errors import ApiError
from controller.root import Controller

__all__ = ["current_session", "require_admin", "require_session"]


def require_session(controller: Controller, *, allow_partial: bool = False) -> LiveSession:
    """The caller's API session; 401 UNAUTHORIZED when absent, expired, or still owing MFA."""
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
