"""API sessions: token lookup with sliding expiry, logout, and expiry at the exact instant.

Live sessions are held in memory by the SHA-256 of their token (a request's authentication is a hash and a dict
lookup) and persisted as rows of ``api-sessions``, which hold that digest, never the token: a copy of the store lets
nobody in. The token itself is known only to its client, which is given it once, at login. Expiry needs no sweep:
one service task keeps a heap of candidate expiry deadlines and sleeps on a cancel scope's deadline until the
earliest; when it wakes it either ends the session or, if the session was used since, re-arms at its new deadline
and persists the new ``lastActivityAt``.

Deadlines are kept in Trio time, not wall-clock time: a session used at Trio time ``t`` ends at exactly ``t +
timeout``, with no rounding through the wall clock (so tests on a virtual clock can assert the instant). Wall-clock
values (``lastActivityAt``, ``expiresAt``) are derived for display and persistence.

A session is partially authenticated while it owes a second factor: its MFA code, or a JWT from the external JWT
signer its auth policy requires (``controller/authentication/ext_jwt_login.py``). The signer owed and the instant
until which a JWT satisfied it are kept on the row under internal keys (never shown), so a restart keeps them. A
partial session lives at most :data:`PARTIAL_SECONDS` from its login and its use does not extend that: tries at a
second factor cannot keep it alive; once the factor is given, it slides like any other.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio
from cryptography import x509

from controller.authentication.lockout import FailedLogins
from controller.clock import format_time, parse_time
from controller.data.domain import Domain
from controller.data.write_path import create_row, delete_row
from controller.errors import ApiError
from controller.model.spec import Change, WriteContext
from controller.resources.api_session_certificates import record_session_certificate
from controller.resources.identities import identity_disabled

__all__ = ["KIND", "PARTIAL_SECONDS", "TOKEN_DIGEST", "ApiSessions", "ApiSessionsStatistics", "LiveSession",
           "token_digest"]

PARTIAL_SECONDS = 300.0
"""How long a session owing its second factor lives, from its login."""

KIND = "api-sessions"
TOKEN_DIGEST = "_tokenSha256"
"""The row key of the token's digest (internal: never shown)."""
# Internal row keys (present() hides keys starting with "_"): the signer owed, and until when (wall-clock epoch
# seconds) a JWT from it satisfies the factor.
_EXT_JWT_SIGNER = "_extJwtSignerId"
_EXT_JWT_UNTIL = "_extJwtUntil"


def token_digest(token: str) -> str:
    """Lower-case hex SHA-256 of a session token: what the store and the in-memory index keep of it."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True)
class LiveSession:
    """The in-memory state of one API session.

    ``token_digest`` is :func:`token_digest` of the session's token. ``last_activity`` is wall-clock epoch seconds
    (what ``lastActivityAt`` shows); ``deadline`` is the Trio time at which the session ends unless it is used
    again. ``ext_jwt_signer_id`` names the external JWT signer the auth policy required at login (None when it
    required none); ``ext_jwt_until`` is the Trio time until which a JWT from it satisfies that factor (minus
    infinity until one is brought).
    """

    id: str
    token_digest: str
    identity_id: str
    last_activity: float
    persisted_activity: float
    mfa_required: bool = False
    mfa_complete: bool = False
    deadline: float = 0.0
    ext_jwt_signer_id: str | None = None
    ext_jwt_until: float = -math.inf

    @property
    def mfa_owed(self) -> bool:
        """MFA is required and no code was given yet."""
        return self.mfa_required and not self.mfa_complete

    @property
    def ext_jwt_owed(self) -> bool:
        """A JWT from the required external signer is owed: none was brought, or the last one has expired."""
        return self.ext_jwt_signer_id is not None and trio.current_time() >= self.ext_jwt_until

    @property
    def never_complete(self) -> bool:
        """Owing a second factor it has never given since its login (an external JWT that has merely expired was
        given): such a session lives at most :data:`PARTIAL_SECONDS` from its login."""
        return self.mfa_owed or (self.ext_jwt_signer_id is not None and self.ext_jwt_until == -math.inf)

    @property
    def partial(self) -> bool:
        """Still owing a second factor (MFA, an external JWT, or both): only the MFA routes and the session's own
        detail and logout are open to it."""
        return self.mfa_owed or self.ext_jwt_owed


@dataclass(frozen=True, slots=True)
class ApiSessionsStatistics:
    """A snapshot of :class:`ApiSessions` counters.

    Attributes:
        live_sessions: sessions held in memory.
    """

    live_sessions: int


class ApiSessions:
    """Owns every API session.

    Args:
        domain: the store facade.
        timeout: idle seconds after which a session ends.
    """

    def __init__(self, domain: Domain, timeout: float) -> None:
        self.domain = domain
        self.timeout = timeout
        # Consecutive wrong passwords per authenticator, for the auth policies' lockout (password_login.py).
        self.failed_logins = FailedLogins()
        self._by_token: dict[str, LiveSession] = {}
        self._by_id: dict[str, LiveSession] = {}
        self._heap: list[tuple[float, str]] = []
        self._wake: trio.CancelScope | None = None

    def statistics(self) -> ApiSessionsStatistics:
        """Counters for monitoring and tests."""
        return ApiSessionsStatistics(live_sessions=len(self._by_id))

    # Restore and expiry ------------------------------------------------------------------------------------

    def restore(self) -> None:
        """Load the persisted sessions (at start-up, before serving); each keeps its persisted last activity."""
        with self.domain.read() as ctx:
            for row in ctx.txn.scan(KIND):
                last = parse_time(row["lastActivityAt"])
                digest = row.get(TOKEN_DIGEST) or token_digest(str(row.get("token", "")))
                session = LiveSession(row["id"], digest, row["identityId"], last, last,
                                      bool(row.get("isMfaRequired")), bool(row.get("isMfaComplete")))
                session.ext_jwt_signer_id = row.get(_EXT_JWT_SIGNER)
                if row.get(_EXT_JWT_UNTIL) is not None:
                    session.ext_jwt_until = self.domain.clock.to_trio(float(row[_EXT_JWT_UNTIL]))
                # As while running: a session that never completed its login keeps the cap from its login (its
                # last activity, which a partial session does not move); any other one idles out as usual.
                lifetime = min(self.timeout, PARTIAL_SECONDS) if session.never_complete else self.timeout
                session.deadline = self.domain.clock.to_trio(last) + lifetime
                self._add(session)

    def _add(self, session: LiveSession) -> None:
        self._by_token[session.token_digest] = session
        self._by_id[session.id] = session
        self._arm(session.deadline, session.id)

    def _arm(self, deadline: float, session_id: str) -> None:
        heapq.heappush(self._heap, (deadline, session_id))
        if self._wake is not None and self._heap[0][0] == deadline:
            self._wake.deadline = deadline

    def _pop(self, session_id: str) -> LiveSession | None:
        session = self._by_id.pop(session_id, None)
        if session is not None:
            self._by_token.pop(session.token_digest, None)
        return session

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The expiry service: ends each session at the instant its idle time reaches the timeout."""
        task_status.started()
        while True:
            with trio.CancelScope(deadline=self._heap[0][0] if self._heap else float("inf")) as scope:
                self._wake = scope
                await trio.sleep_forever()
            self._wake = None
            await self._expire_due()

    async def flush(self) -> None:
        """Persist every session's last activity (at shutdown, while the writer still runs)."""
        await self._persist_activity(list(self._by_id.values()))

    async def _expire_due(self) -> None:
        now = trio.current_time()
        expired: list[str] = []
        moved: list[LiveSession] = []
        while self._heap and self._heap[0][0] <= now:
            _, session_id = heapq.heappop(self._heap)
            session = self._by_id.get(session_id)
            if session is None:
                continue
            if session.deadline <= now:
                expired.append(session_id)
            else:
                # Used since this entry was armed: wait for its new deadline, and persist the activity.
                heapq.heappush(self._heap, (session.deadline, session_id))
                moved.append(session)
        await self._end_many(expired, "expiry")
        await self._persist_activity(moved)

    async def _persist_activity(self, sessions: list[LiveSession]) -> None:
        stale = [(s, s.last_activity) for s in sessions if s.last_activity != s.persisted_activity]
        if not stale:
            return

        def write(ctx: WriteContext) -> None:
            for session, last in stale:
                row = ctx.txn.get(KIND, session.id)
                if row is not None:
                    ctx.txn.put(KIND, {**row, "lastActivityAt": format_time(last)})

        await self.domain.write(write)
        for session, last in stale:
            session.persisted_activity = last

    # Login, lookup, logout ---------------------------------------------------------------------------------

    async def create(self, identity_id: str, authenticator_id: str, ip: str, extra: Mapping[str, Any],
                     mfa_required: bool = False, ext_jwt_signer_id: str | None = None,
                     certificate: x509.Certificate | None = None) -> dict[str, Any]:
        """Start a session for an authenticated identity; returns the stored row with ``token``, the session's
        token, added (the one time it is known: the store keeps only its digest).

        Args:
            identity_id: the authenticated identity.
            authenticator_id: what vouched for it (an authenticator id, or a synthetic one such as
                ``extJwtId:<signerId>``).
            ip: the client's address.
            extra: ``envInfo``, ``sdkInfo`` and ``configTypes`` of the login.
            mfa_required: the session owes an MFA code.
            ext_jwt_signer_id: the session owes a JWT from this external signer (None: it owes none).
            certificate: the client certificate the identity logged in with; it becomes one of the session's
                certificates (``/current-api-session/certificates``) in the same write.

        Raises:
            ApiError: 401 INVALID_AUTH when the identity is gone or disabled. It is checked again inside the write:
                one disabled (or deleted) while its password was being verified gets no session, so a disable can
                never leave a live session behind.
        """
        token = str(uuid.uuid4())
        now = self.domain.clock.now()
        partial = mfa_required or ext_jwt_signer_id is not None
        deadline = trio.current_time() + (min(self.timeout, PARTIAL_SECONDS) if partial else self.timeout)
        digest = token_digest(token)
        body = {TOKEN_DIGEST: digest, "identityId": identity_id, "authenticatorId": authenticator_id,
                "ipAddress": ip, "lastActivityAt": format_time(now), "isMfaRequired": mfa_required,
                "isMfaComplete": False, **extra}
        resource = self.domain.registry[KIND]

        def write(ctx: WriteContext) -> dict[str, Any]:
            identity = ctx.txn.get("identities", identity_id)
            if identity is None or identity_disabled(identity, ctx.now):
                raise ApiError("INVALID_AUTH")
            row = create_row(ctx, resource, body, None)
            if ext_jwt_signer_id is not None:
                row = {**row, _EXT_JWT_SIGNER: ext_jwt_signer_id}
                ctx.txn.put(KIND, row)
            if certificate is not None:
                record_session_certificate(ctx, row["id"], certificate)
            return row

        row = await self.domain.write(write)
        session = LiveSession(row["id"], digest, identity_id, now, now, mfa_required, False, deadline,
                              ext_jwt_signer_id)
        self._add(session)
        return {**row, "token": token}

    def lookup(self, token: str | None) -> LiveSession | None:
        """The live session of a token, its idle time reset; None when unknown or expired."""
        if not token:
            return None
        session = self._by_token.get(token_digest(token))
        if session is None:
            return None
        now = trio.current_time()
        if session.deadline <= now:
            return None
        if not session.partial:
            self._slide(session, now)
        return session

    def _slide(self, session: LiveSession, now: float) -> None:
        """The session was used at ``now`` (Trio time): it ends a timeout from now unless used again."""
        session.deadline = now + self.timeout
        session.last_activity = self.domain.clock.now()

    def get(self, session_id: str) -> LiveSession | None:
        return self._by_id.get(session_id)

    def sessions_of(self, identity_id: str) -> list[LiveSession]:
        return [s for s in self._by_id.values() if s.identity_id == identity_id]

    def expires_at(self, session: LiveSession) -> float:
        """Wall-clock instant at which the session ends unless used again."""
        return session.last_activity + self.timeout

    async def end(self, session_id: str, cause: str = "logout") -> None:
        """End a session (by ``cause``, which its event names: ``logout`` or ``expiry``); a no-op when already
        gone."""
        await self._end_many([session_id], cause)

    async def _end_many(self, session_ids: list[str], cause: str) -> None:
        if not session_ids:
            return
        for session_id in session_ids:
            # Dropped from memory first: the token is refused from this instant, before the commit.
            self._pop(session_id)
        resource = self.domain.registry[KIND]
        why = {"code": cause}

        def remove(ctx: WriteContext) -> None:
            for session_id in session_ids:
                if ctx.txn.exists(KIND, session_id):
                    ctx.end_cause(KIND, session_id, why)
                    delete_row(ctx, resource, session_id)

        await self.domain.write(remove)

    def forget(self, session_id: str) -> None:
        """Drop a session whose row was deleted by another write (a cascade, an admin delete)."""
        self._pop(session_id)

    def changes_committed(self, changes: list[Change]) -> None:
        """Forget every API session a committed write deleted, whoever deleted it (a listener of
        :meth:`controller.data.domain.Domain.subscribe` over :data:`KIND`): its token is refused from then on."""
        for change in changes:
            if change.after is None:
                self._pop(change.id)

    def require(self, token: str | None) -> LiveSession:
        session = self.lookup(token)
        if session is None:
            raise ApiError("UNAUTHORIZED")
        return session

    # MFA and the posture engine -----------------------------------------------------------------------------

    def identities(self) -> set[str]:
        """Identities that have at least one live API session."""
        return {s.identity_id for s in self._by_id.values()}

    async def _set_mfa_flags(self, session_id: str, **flags: bool) -> None:
        session = self._by_id.get(session_id)
        if session is None:
            return
        if "isMfaRequired" in flags:
            session.mfa_required = flags["isMfaRequired"]
        if "isMfaComplete" in flags:
            session.mfa_complete = flags["isMfaComplete"]
        if not session.partial:
            self._slide(session, trio.current_time())

        def write(ctx: WriteContext) -> None:
            row = ctx.txn.get(KIND, session_id)
            if row is not None:
                ctx.txn.put(KIND, {**row, **flags})

        await self.domain.write(write)

    async def mark_mfa_complete(self, session_id: str) -> None:
        """The session proved MFA: it is no longer partially authenticated (persisted for restarts)."""
        await self._set_mfa_flags(session_id, isMfaComplete=True)

    async def mark_mfa_required(self, session_id: str) -> None:
        """The identity completed MFA enrolment in this session: MFA is now required and already done."""
        await self._set_mfa_flags(session_id, isMfaRequired=True, isMfaComplete=True)

    # External JWT factor ------------------------------------------------------------------------------------------

    async def mark_ext_jwt_satisfied(self, session_id: str, until: float) -> None:
        """A JWT from the session's required external signer was brought: the factor is satisfied until ``until``
        (wall-clock epoch seconds), persisted for restarts. A JWT expiring earlier than one already brought changes
        nothing; a no-op when the session is gone."""
        session = self._by_id.get(session_id)
        if session is None:
            return
        trio_until = self.domain.clock.to_trio(until)
        if trio_until <= session.ext_jwt_until:
            return
        session.ext_jwt_until = trio_until
        if not session.partial:
            self._slide(session, trio.current_time())

        def write(ctx: WriteContext) -> None:
            row = ctx.txn.get(KIND, session_id)
            # Two requests may bring JWTs at once: the later expiry wins whatever order their writes commit in.
            if row is not None and until > float(row.get(_EXT_JWT_UNTIL, -math.inf)):
                ctx.txn.put(KIND, {**row, _EXT_JWT_UNTIL: until})

        await self.domain.write(write)
