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

Nodes of a cluster (``shared``) each hold every session, since every row reaches every node: a session created,
used or ended on one node is known on the others (:meth:`ApiSessions.changes_committed` learns of rows written
anywhere). Sliding expiry then holds cluster-wide without ending a session early because it was used elsewhere: a
node persists a session's ``lastActivityAt`` once it moved :data:`SHARED_GRACE` of the timeout past the stored
value, every node extends a session by what is stored, and a session ends only when its stored activity is older
than the timeout plus that grace, checked again inside the write that deletes it.
"""

from __future__ import annotations

import heapq
import logging
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

import trio
from cryptography import x509

from controller.authentication.live_session import (
    EXT_JWT_SIGNER,
    KIND,
    PARTIAL_SECONDS,
    TOKEN_DIGEST,
    ApiSessionsStatistics,
    LiveSession,
    session_of_row,
    token_digest,
)
from controller.authentication.lockout import FailedLogins
from controller.authentication.session_writes import (
    activity_write,
    expiry_write,
    ext_jwt_write,
    flags_write,
    removal_write,
)
from controller.clock import format_time
from controller.data.domain import Domain
from controller.data.write_path import create_row
from controller.errors import ApiError
from controller.model.spec import Change, WriteContext
from controller.resources.api_session_certificates import record_session_certificate
from controller.resources.identities import identity_disabled
from storage.batch import Outcome

__all__ = ["KIND", "PARTIAL_SECONDS", "SHARED_GRACE", "TOKEN_DIGEST", "ApiSessions", "ApiSessionsStatistics",
           "LiveSession", "token_digest"]

log = logging.getLogger("tollgate.auth")

T = TypeVar("T")

_RETRY_SECONDS = 1.0
SHARED_PER_WRITE = 16
"""Sessions whose activity or expiry one write stores, when shared: a cluster ships each write whole in one etcd txn
of a bounded size, and an expiry deletes each session's Dial sessions with it."""
SHARED_GRACE = 0.1
"""Nodes of a cluster (``shared``) persist a session's activity once it has moved this fraction of the timeout past
what is stored, and end a session only this fraction of the timeout after its stored activity would have ended it
(the activity another node saw and has not persisted yet is never more recent than that)."""

class ApiSessions:
    """Owns every API session.

    Args:
        domain: the store facade.
        timeout: idle seconds after which a session ends.
        shared: this is a node of a cluster: sessions are used and ended on other nodes too.
    """

    def __init__(self, domain: Domain, timeout: float, *, shared: bool = False) -> None:
        self.domain = domain
        self.timeout = timeout
        self.shared = shared
        self._grace = timeout * SHARED_GRACE if shared else 0.0
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
                # As while running: a session that never completed its login keeps the cap from its login (its
                # last activity, which a partial session does not move); any other one idles out as usual.
                self._add(session_of_row(row, self.domain.clock, self.timeout, self._grace))

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
            try:
                await self._expire_due()
            except ApiError as error:  # a cluster's store refused the activity's write: it is written later
                log.warning("persisting API-session activity failed", extra={"error": error.code})

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
        for part in self._parts(stale):
            await self.domain.write(activity_write([(s.id, last) for s, last in part], forward_only=self.shared))
            for session, last in part:
                session.persisted_activity = max(session.persisted_activity, last)

    def _parts(self, items: list[T]) -> list[list[T]]:
        """``items`` a write's worth at a time: all at once on a single node, :data:`SHARED_PER_WRITE` when
        shared."""
        size = SHARED_PER_WRITE if self.shared else max(1, len(items))
        return [items[i:i + size] for i in range(0, len(items), size)]

    def _share_activity(self, session: LiveSession) -> None:
        """Shared: queue the write of a session's activity once it moved the grace past what is stored."""
        if session.persisting or session.last_activity - session.persisted_activity < self._grace:
            return
        session.persisting = True
        last = session.last_activity

        def done(outcome: Outcome) -> None:
            session.persisting = False
            if outcome.error is None:
                session.persisted_activity = max(session.persisted_activity, last)

        self.domain.post_write(activity_write([(session.id, last)], forward_only=True), done)

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
                row = {**row, EXT_JWT_SIGNER: ext_jwt_signer_id}
                ctx.txn.put(KIND, row)
            if certificate is not None:
                record_session_certificate(ctx, row["id"], certificate)
            return row

        row = await self.domain.write(write)
        if row["id"] not in self._by_id:  # shared: the write's listener already took it from the row
            self._add(LiveSession(row["id"], digest, identity_id, now, now, mfa_required, False, deadline,
                                  ext_jwt_signer_id))
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
            if self.shared:
                self._share_activity(session)
        return session

    def _slide(self, session: LiveSession, now: float) -> None:
        """The session was used at ``now`` (Trio time): it ends a timeout from now unless used again (or later,
        when what other nodes stored says so)."""
        session.deadline = max(session.deadline, now + self.timeout)
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
        if cause == "expiry" and self.shared:
            await self._expire_shared(session_ids)
            return
        for session_id in session_ids:
            # Dropped from memory first: the token is refused from this instant, before the commit.
            self._pop(session_id)
        await self.domain.write(removal_write(self.domain.registry[KIND], session_ids, cause))

    async def _expire_shared(self, session_ids: list[str]) -> None:
        """End sessions whose time is up as this node sees it, unless what is stored (another node's use) says
        otherwise: judged again inside the write, where the latest rows are. Those kept wait for their new end."""
        for part in self._parts(session_ids):
            try:
                kept = await self.domain.write(expiry_write(self.domain.registry[KIND], part, self.timeout,
                                                            self._grace))
            except ApiError as error:  # the cluster's store is unavailable: judge them again shortly
                log.warning("expiring API sessions failed; trying again", extra={"error": error.code})
                for session_id in part:
                    self._arm(trio.current_time() + _RETRY_SECONDS, session_id)
                continue
            for row in kept:
                self._learn(row)
                self._arm(self._by_id[row["id"]].deadline, row["id"])

    def forget(self, session_id: str) -> None:
        """Drop a session whose row was deleted by another write (a cascade, an admin delete)."""
        self._pop(session_id)

    def changes_committed(self, changes: list[Change]) -> None:
        """Forget every API session a committed write deleted, whoever deleted it (a listener of
        :meth:`controller.data.domain.Domain.subscribe` over :data:`KIND`): its token is refused from then on.
        Shared: also learn every session created or changed (by any node)."""
        for change in changes:
            if change.after is None:
                self._pop(change.id)
            elif self.shared:
                self._learn(change.after)

    def _learn(self, row: Mapping[str, Any]) -> None:
        """Shared: take what a stored row says of a session (new to this node, or used, completed or extended
        elsewhere); nothing it holds goes back."""
        stored = session_of_row(row, self.domain.clock, self.timeout, self._grace)
        session = self._by_id.get(stored.id)
        if session is None:
            self._add(stored)
            return
        session.mfa_required, session.mfa_complete = stored.mfa_required, stored.mfa_complete
        session.ext_jwt_until = max(session.ext_jwt_until, stored.ext_jwt_until)
        session.persisted_activity = max(session.persisted_activity, stored.persisted_activity)
        session.last_activity = max(session.last_activity, stored.last_activity)
        # The heap holds an entry at or before the old deadline: when it comes up, it re-arms at this one.
        session.deadline = max(session.deadline, stored.deadline)

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
        await self.domain.write(flags_write(session_id, flags))

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
        await self.domain.write(ext_jwt_write(session_id, until))
