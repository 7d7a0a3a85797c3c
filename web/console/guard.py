"""Who may see a console page, and which requests may change anything.

Every console request passes :meth:`Gate.admit` before its page (a ``before_request`` hook of the blueprint):

* a state-changing request (any method but GET and HEAD) must come from a console page: a browser's
  ``Sec-Fetch-Site`` must say ``same-origin`` and its ``Origin`` must be the console's own, and the request must
  carry the session's CSRF token (the ``csrf_token`` form field, or the ``X-CSRF-Token`` header htmx sends). The
  login form, before any session exists, carries a token of its own that must match its cookie (double submit);
  ``SameSite=Strict`` cookies already keep other sites' requests from carrying a session.
* every page but the login pages needs a console session whose API session is alive; a session still owing its
  MFA code reaches only the MFA prompt; an identity that is no administrator sees only a page saying so.

A refusal is an :class:`Refused` the blueprint renders as a page (or, for htmx, a redirect header).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from quart import Response, g, request

from controller.authentication import LiveSession
from web.console.sessions import COOKIE, ConsoleSession, ConsoleSessions

__all__ = ["CSRF_FIELD", "CSRF_HEADER", "LOGIN_COOKIE", "Gate", "Refused", "clear_cookie", "current",
           "login_token", "set_cookie"]

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
LOGIN_COOKIE = "tollgate_console_login"
"""The login form's own CSRF token, before there is a session (double submit)."""
COOKIE_PATH = "/console/"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Refused(Exception):
    """A console request that may not go on.

    Attributes:
        status: 303 to redirect (``location`` set), 403 when refused outright.
        reason: ``login`` (no live session), ``mfa`` (the MFA code is owed), ``not-admin``, ``cross-site`` (an
            origin or fetch-site check failed), ``csrf`` (the CSRF token is missing or wrong).
        location: where a redirect goes.
    """

    def __init__(self, status: int, reason: str, location: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.location = location


@dataclass(frozen=True, slots=True)
class Admitted:
    """The console session a request was let in with, and its live API session."""

    session: ConsoleSession
    live: LiveSession


def current() -> Admitted:
    """The session :meth:`Gate.admit` let the current request in with.

    Raises:
        LookupError: the page is one of the login pages, which need no session.
    """
    admitted: Admitted | None = g.get("console")
    if admitted is None:
        raise LookupError("no console session was admitted for this page")
    return admitted


def own_origin() -> str:
    """The console's own origin, as a browser on it sends ``Origin``."""
    return f"{request.scheme}://{request.host}"


def _from_this_site() -> bool:
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        return False
    origin = request.headers.get("Origin")
    return origin is None or origin == own_origin()


def login_token() -> str:
    """The login form's CSRF token: the one its cookie already holds, or a new one (which the page sets)."""
    existing = request.cookies.get(LOGIN_COOKIE)
    return existing if existing and len(existing) >= 32 else secrets.token_urlsafe(32)


def set_cookie(response: Response, name: str, value: str) -> None:
    """Set a console cookie: ``HttpOnly; Secure; SameSite=Strict`` under ``/console/``, also on plain HTTP
    (browsers accept Secure cookies from localhost and loopback addresses; anywhere else the console is served over
    TLS)."""
    response.set_cookie(name, value, path=COOKIE_PATH, httponly=True, secure=True, samesite="Strict")


def clear_cookie(response: Response, name: str) -> None:
    response.delete_cookie(name, path=COOKIE_PATH, httponly=True, secure=True, samesite="Strict")


async def _sent_token() -> str:
    header = request.headers.get(CSRF_HEADER)
    if header:
        return header
    form = await request.form
    return str(form.get(CSRF_FIELD, ""))


def _same(a: str, b: str) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


class Gate:
    """The console's access checks.

    Args:
        sessions: the console sessions.
        is_admin: whether an identity is an administrator.
        open_pages: endpoints that need no session (the login pages, static files).
        partial_pages: endpoints a session still owing its MFA code may reach (the prompt, logout).
        login_page: where a request without a session is sent.
        mfa_page: where a session owing its MFA code is sent.
    """

    def __init__(self, sessions: ConsoleSessions, is_admin: Callable[[str], bool], *, open_pages: frozenset[str],
                 partial_pages: frozenset[str], login_page: str, mfa_page: str) -> None:
        self._sessions = sessions
        self._is_admin = is_admin
        self._open = open_pages
        self._partial = partial_pages
        self._login_page = login_page
        self._mfa_page = mfa_page

    async def admit(self) -> None:
        """Let the current request through, or raise :class:`Refused`.

        Raises:
            Refused: see the module docstring for each reason.
        """
        changes = request.method not in _SAFE_METHODS
        if changes and not _from_this_site():
            raise Refused(403, "cross-site")
        endpoint = request.endpoint or ""
        if endpoint in self._open:
            if changes and not _same(await _sent_token(), request.cookies.get(LOGIN_COOKIE, "")):
                raise Refused(403, "csrf")
            return
        found = self._sessions.find(request.cookies.get(COOKIE))
        if found is None:
            raise Refused(303, "login", self._login_page)
        session, live = found
        if changes and not _same(await _sent_token(), session.csrf):
            raise Refused(403, "csrf")
        g.console = Admitted(session, live)
        if live.partial:
            if endpoint not in self._partial:
                raise Refused(303, "mfa", self._mfa_page)
            return
        if endpoint not in self._partial and not self._is_admin(live.identity_id):
            raise Refused(403, "not-admin")
