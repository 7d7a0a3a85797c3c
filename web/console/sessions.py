"""Console sessions: the opaque cookie a browser holds, mapped on the server to the API session it logged in with.

A console login is a real API session, made by the same login path as ``POST /authenticate``; its ``zt-session``
token stays here and never reaches the browser. The browser holds only a random cookie (:data:`COOKIE`); the server
keeps its SHA-256, so a copy of this table lets nobody in. A console session lives exactly as long as its API
session: a lookup that finds the API session gone (logged out, expired, deleted by an admin) forgets the console
session, and so does every committed deletion of an API-session row (:meth:`ConsoleSessions.changes_committed`, a
listener of the domain), so the table never outlives what it maps to.

Each console session has its own CSRF token, which every state-changing request must carry (``web/console/
guard.py``), and a place for what one page hands the next: one-shot messages and the model file waiting between
its preview and its apply.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.authentication import ApiSessions, LiveSession
from controller.model.spec import Change

__all__ = ["COOKIE", "ConsoleSession", "ConsoleSessions", "PendingModel"]

COOKIE = "tollgate_console"
"""The console session's cookie (``HttpOnly; Secure; SameSite=Strict``, path ``/console/``)."""


def _digest(cookie: str) -> str:
    return hashlib.sha256(cookie.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingModel:
    """A model file uploaded for apply, between its preview and its apply.

    Attributes:
        text: the file's text.
        prune: whether the apply deletes what the file does not name.
        plan_lines: the plan the preview showed; the apply goes ahead only while planning again gives these.
    """

    text: str
    prune: bool
    plan_lines: tuple[str, ...]


@dataclass(slots=True)
class ConsoleSession:
    """One browser's login: its API session, the token that session is used with, and the CSRF token.

    Attributes:
        api_session_id: the API session made at login.
        token: that session's ``zt-session`` token (never sent to the browser).
        identity_id: who logged in.
        csrf: the token every state-changing request of this session carries.
        messages: one-shot messages for the next page shown (a delete's outcome...).
        pending_model: a model file waiting for its apply, if any.
    """

    api_session_id: str
    token: str
    identity_id: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    messages: list[str] = field(default_factory=list)
    pending_model: PendingModel | None = None

    def take_messages(self) -> list[str]:
        """The messages waiting for the next page, which are then gone."""
        taken, self.messages = self.messages, []
        return taken


class ConsoleSessions:
    """Every console session of one application, by the digest of its cookie.

    Args:
        api_sessions: the controller's API sessions, which decide whether a console session is still alive (and
            whose idle time a console request resets, as any API request does).
    """

    def __init__(self, api_sessions: ApiSessions) -> None:
        self._api_sessions = api_sessions
        self._by_digest: dict[str, ConsoleSession] = {}
        self._digest_by_api_session: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def start(self, login: Mapping[str, Any]) -> tuple[str, ConsoleSession]:
        """A console session for the API session row ``login`` made (with its ``token``); returns the new cookie
        value (32 random bytes, URL-safe) and the session."""
        cookie = secrets.token_urlsafe(32)
        session = ConsoleSession(str(login["id"]), str(login["token"]), str(login["identityId"]))
        digest = _digest(cookie)
        self._by_digest[digest] = session
        self._digest_by_api_session[session.api_session_id] = digest
        return cookie, session

    def find(self, cookie: str | None) -> tuple[ConsoleSession, LiveSession] | None:
        """The console session of ``cookie`` and its live API session (whose idle time this resets); None when the
        cookie is unknown or its API session has ended, in which case the console session is forgotten."""
        if not cookie:
            return None
        digest = _digest(cookie)
        session = self._by_digest.get(digest)
        if session is None:
            return None
        live = self._api_sessions.lookup(session.token)
        if live is None:
            self._forget(digest)
            return None
        return session, live

    async def end(self, cookie: str | None) -> None:
        """Log out: end the cookie's API session (as ``DELETE /current-api-session`` does) and forget it."""
        if not cookie:
            return
        digest = _digest(cookie)
        session = self._by_digest.get(digest)
        if session is None:
            return
        self._forget(digest)
        await self._api_sessions.end(session.api_session_id)

    def changes_committed(self, changes: list[Change]) -> None:
        """Forget the console sessions whose API-session rows a committed write deleted (a listener of
        :meth:`controller.data.domain.Domain.subscribe` over the API-session kind)."""
        for change in changes:
            if change.after is None:
                digest = self._digest_by_api_session.get(change.id)
                if digest is not None:
                    self._forget(digest)

    def _forget(self, digest: str) -> None:
        session = self._by_digest.pop(digest, None)
        if session is not None:
            self._digest_by_api_session.pop(session.api_session_id, None)
