"""Request authentication: the access levels an operation declares, the check that enforces them from the
``zt-session`` header, the session it lets in, and the bearer JWTs that satisfy a session's external JWT factor.

Every operation is served behind :func:`admit` for its declared :class:`Access` (``web.route_table.Routes.add`` wraps
the handler), so a handler never checks authentication itself: it reads the admitted session with
:func:`current_session`. Every refusal is 401 UNAUTHORIZED, non-admins on admin operations included (never 403).
"""

from __future__ import annotations

import enum

from quart import g, request

from controller.authentication import LiveSession
from controller.authentication.ext_jwt_login import MAX_BEARER_TOKENS, satisfy_ext_jwt_factor
from controller.errors import ApiError
from controller.runtime.composition import Controller

__all__ = ["Access", "admit", "bearer_tokens", "bring_ext_jwt_factor", "current_session"]


class Access(enum.Enum):
    """Who may call an operation, from the most to the least open level.

    Attributes:
        ANYONE: no session needed; a ``zt-session`` header, valid or not, is neither looked up nor refreshed.
        PARTIAL_SESSION: any live session, including one still owing a second factor (its MFA code or an
            external JWT): the operations that let a caller finish logging in, look at its session, or leave.
        SESSION: a live, fully authenticated session.
        ADMIN: a live, fully authenticated session whose identity is an administrator.
    """

    ANYONE = "anyone"
    PARTIAL_SESSION = "partial-session"
    SESSION = "session"
    ADMIN = "admin"


def admit(controller: Controller, access: Access) -> None:
    """Let the current request through to an operation of level ``access``, or refuse it.

    Looks the ``zt-session`` header up (which resets the session's idle time) unless ``access`` is
    :attr:`Access.ANYONE`, and keeps the admitted session for :func:`current_session`.

    Raises:
        ApiError: 401 UNAUTHORIZED when the level needs a session and the token is missing, unknown (malformed
            included) or expired; when the session still owes a second factor and the level is not
            :attr:`Access.PARTIAL_SESSION`; when the level is :attr:`Access.ADMIN` and the identity is no admin.
    """
    if access is Access.ANYONE:
        return
    session = controller.sessions.lookup(request.headers.get("zt-session"))
    if session is None or (session.partial and access is not Access.PARTIAL_SESSION):
        raise ApiError("UNAUTHORIZED")
    if access is Access.ADMIN and not controller.is_admin(session.identity_id):
        raise ApiError("UNAUTHORIZED")
    g.session = session


def current_session() -> LiveSession:
    """The session :func:`admit` let in for the current request.

    Raises:
        LookupError: when the operation's level is :attr:`Access.ANYONE` (no session was looked up): a handler
            of such an operation has no session to read.
    """
    session: LiveSession | None = g.get("session")
    if session is None:
        raise LookupError("no session was admitted: the operation's access level is Access.ANYONE")
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
