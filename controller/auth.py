"""API sessions: password login, token lookup with sliding expiry, logout, and expiry at the exact instant.

Live sessions are held in memory by token (a request's authentication is a dict lookup) and persisted as rows of
``api-sessions``. Expiry needs no sweep: one service task keeps a heap of candidate expiry instants and sleeps on a
cancel scope's deadline until the earliest; when it wakes it either ends the session or, if the session was used
since, re-arms at its new expiry and persists the new ``lastActivityAt``.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from controller import passwords
from controller.clock import format_time, parse_time
from controller.crud import create_row, delete_row
from controller.domain import Domain
from controller.errors import ApiError
from controller.resources.context import WriteContext

__all__ = ["ApiSessions", "LiveSession"]

KIND = "api-sessions"


@dataclass(slots=True)
class LiveSession:
    """The in-memory state of one API session."""

    id: str
    token: str
    identity_id: str
    last_activity: float
    persisted_activity: float
    mfa_required: bool = False
    mfa_complete: bool = False

    @property
    def partial(self) -> bool:
        """Authenticated by password but still owing its MFA code."""
        return self.mfa_required and not self.mfa_complete


class ApiSessions:
    """Owns every API session.

    Args:
        domain: the store facade.
        timeout: idle seconds after which a session ends.
        hash_in_thread: verify passwords in worker threads (off on a virtual clock, where a thread hop lets
            virtual time jump).
        max_concurrent_hashes: bound on simultaneous password verifications, so a flood of logins cannot
            exhaust CPU or memory.
    """

    def __init__(self, domain: Domain, timeout: float, *, hash_in_thread: bool = True,
                 max_concurrent_hashes: int = 2) -> None:
        self.domain = domain
        self.timeout = timeout
        self._hash_in_thread = hash_in_thread
        self._hash_limiter = trio.CapacityLimiter(max_concurrent_hashes)
        self._by_token: dict[str, LiveSession] = {}
        self._by_id: dict[str, LiveSession] = {}
        self._heap: list[tuple[float, str]] = []
        self._wake: trio.CancelScope | None = None
        self.on_end: list[Callable[[LiveSession], None]] = []

    # Restore and expiry ------------------------------------------------------------------------------------

    def restore(self) -> None:
        """Load the persisted sessions (at start-up, before serving)."""
        with self.domain.store.read() as txn:
            for row in txn.scan(KIND):
                last = parse_time(row["lastActivityAt"])
                self._add(LiveSession(row["id"], row["token"], row["identityId"], last, last,
                                      bool(row.get("isMfaRequired")), bool(row.get("isMfaComplete"))))

    def _add(self, session: LiveSession) -> None:
        self._by_token[session.token] = session
        self._by_id[session.id] = session
        self._arm(session.last_activity + self.timeout, session.id)

    def _arm(self, when: float, session_id: str) -> None:
        heapq.heappush(self._heap, (when, session_id))
        if self._wake is not None and self._heap[0][0] == when:
            self._wake.deadline = self.domain.clock.to_trio(when)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The expiry service: ends each session at the instant its idle time reaches the timeout."""
        task_status.started()
        while True:
            deadline = self.domain.clock.to_trio(self._heap[0][0]) if self._heap else float("inf")
            with trio.CancelScope(deadline=deadline) as scope:
                self._wake = scope
                await trio.sleep_forever()
            self._wake = None
            await self._expire_due()

    async def flush(self) -> None:
        """Persist every session's last activity (at shutdown, while the writer still runs)."""
        await self._persist_activity(list(self._by_id.values()))

    async def _expire_due(self) -> None:
        now = self.domain.clock.now()
        expired: list[LiveSession] = []
        moved: list[LiveSession] = []
        while self._heap and self._heap[0][0] <= now:
            _, session_id = heapq.heappop(self._heap)
            session = self._by_id.get(session_id)
            if session is None:
                continue
            expiry = session.last_activity + self.timeout
            if expiry <= now:
                expired.append(session)
            else:
                heapq.heappush(self._heap, (expiry, session_id))
                moved.append(session)
        for session in expired:
            await self.end(session.id)
        await self._persist_activity(moved)

    async def _persist_activity(self, sessions: list[LiveSession]) -> None:
        stale = [s for s in sessions if s.last_activity != s.persisted_activity]
        if not stale:
            return

        def write(ctx: WriteContext) -> None:
            for session in stale:
                row = ctx.txn.get(KIND, session.id)
                if row is not None:
                    row["lastActivityAt"] = format_time(session.last_activity)
                    ctx.txn.put(KIND, row)

        await self.domain.write(write)
        for session in stale:
            session.persisted_activity = session.last_activity

    # Login, lookup, logout ---------------------------------------------------------------------------------

    async def verify_password(self, password: str, stored: str | None) -> bool:
        """Constant-time verification with bounded concurrency; spends the same time for unknown users."""
        def check() -> bool:
            if stored is None:
                passwords.dummy_verify(password)
                return False
            return passwords.verify_password(password, stored)

        async with self._hash_limiter:
            if self._hash_in_thread:
                return await trio.to_thread.run_sync(check)
            return check()

    async def create(self, identity_id: str, authenticator_id: str, ip: str, extra: Mapping[str, Any],
                     mfa_required: bool = False) -> dict[str, Any]:
        """Start a session for an authenticated identity; returns the stored row."""
        token = str(uuid.uuid4())
        now = self.domain.clock.now()
        body = {"token": token, "identityId": identity_id, "authenticatorId": authenticator_id,
                "ipAddress": ip, "lastActivityAt": format_time(now), "isMfaRequired": mfa_required,
                "isMfaComplete": False, **extra}
        resource = self.domain.registry[KIND]
        row = await self.domain.write(lambda ctx: create_row(ctx, resource, body, None))
        self._add(LiveSession(row["id"], token, identity_id, now, now, mfa_required, False))
        return row

    def lookup(self, token: str | None) -> LiveSession | None:
        """The live session of a token, its idle time reset; None when unknown or expired."""
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        now = self.domain.clock.now()
        if session.last_activity + self.timeout <= now:
            return None
        session.last_activity = now
        return session

    def get(self, session_id: str) -> LiveSession | None:
        return self._by_id.get(session_id)

    def sessions_of(self, identity_id: str) -> list[LiveSession]:
        return [s for s in self._by_id.values() if s.identity_id == identity_id]

    def expires_at(self, session: LiveSession) -> float:
        return session.last_activity + self.timeout

    async def end(self, session_id: str) -> None:
        """End a session (logout, admin delete, expiry, identity disabled); a no-op when already gone."""
        session = self._by_id.pop(session_id, None)
        if session is not None:
            self._by_token.pop(session.token, None)
        resource = self.domain.registry[KIND]

        def remove(ctx: WriteContext) -> None:
            if ctx.txn.exists(KIND, session_id):
                delete_row(ctx, resource, session_id)

        await self.domain.write(remove)
        if session is not None:
            for listener in self.on_end:
                listener(session)

    async def end_for_identity(self, identity_id: str) -> None:
        for session in self.sessions_of(identity_id):
            await self.end(session.id)

    def forget(self, session_id: str) -> None:
        """Drop a session whose row was deleted by a cascade (its identity was deleted)."""
        session = self._by_id.pop(session_id, None)
        if session is not None:
            self._by_token.pop(session.token, None)

    def require(self, token: str | None) -> LiveSession:
        session = self.lookup(token)
        if session is None:
            raise ApiError("UNAUTHORIZED")
        return session
