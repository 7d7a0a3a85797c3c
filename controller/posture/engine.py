"""The posture engine: one actor per identity and the methods callers use. Each actor's shell is
:class:`controller.posture.identity_actor.IdentityBehavior`; this module hosts the actors, queues their writes and
answers callers.

The first re-check at or after the state's deadline is the decision on that deadline: the engine's
:class:`~actors.lateness.LatenessRecorder` (``PostureEngine.lateness``) learns how late the decision was computed and
how late its revocations became durable.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import trio

from actors.lateness import LatenessRecorder
from actors.live_actors import ActorRegistry, OneShot
from controller.data.commit_step import ConditionFailed
from controller.data.domain import Barrier, Domain
from controller.model.spec import Change
from controller.posture import machine
from controller.posture.identity_actor import IdentityBehavior, LiveIdentity
from controller.posture.machine import SessionRef
from controller.posture.messages import (
    ADOPTED,
    ApiSessionEnded,
    ApiSessionStarted,
    CreateSession,
    IdentityMessage,
    MfaPassed,
    MfaRemoved,
    PostureReported,
    ReadState,
    Reevaluate,
    Settle,
)
from controller.posture.persistence import (
    PENDING_KIND,
    SESSIONS,
    STATE_KIND,
    Flush,
    StepWrite,
    record_mfa_removal,
)
from controller.posture.service import Moved, Ownership, RechecksElsewhere
from controller.posture.state import IdentityState, decode_state
from controller.posture.watchers import StateWatchers
from controller.resources.identities import IDENTITIES
from controller.resources.sessions import API_SESSIONS

__all__ = ["PENDING_KIND", "STATE_KIND", "PostureEngine", "record_mfa_removal"]

T = TypeVar("T")

RECHECK_CHUNK = 256
"""Adopted identities whose re-checks run at once (:meth:`PostureEngine.adopt`)."""


class _Handled(OneShot[None]):
    """The reply of a settle that only paces the adoption re-checks: a failure answers it too (an actor that crashed
    on its re-check was logged at the actor boundary, and goes on from its state before)."""

    __slots__ = ()

    def fail(self, error: BaseException) -> None:
        self.send(None)


class PostureEngine:
    """The identity actors of one controller, and what callers ask of them.

    Args:
        domain: the store the actors read and write through.
        live_identities: the identities that hold API sessions now: those whose sessions a change of policies or
            checks may revoke (``ApiSessions.identities``).
        evaluate_posture: the global posture switch (:class:`IdentityBehavior`).
    """

    def __init__(self, domain: Domain, live_identities: Callable[[], Iterable[str]], *,
                 evaluate_posture: bool = True, ownership: Ownership | None = None) -> None:
        self.domain = domain
        self._live_identities = live_identities
        self.ownership = ownership
        self.elsewhere: RechecksElsewhere | None = None
        """In a cluster: how a write this node committed waits for the re-checks of identities hosted elsewhere."""
        self.lateness = LatenessRecorder()
        # Sessions revoked since start, by cause (machine.REVOKE_CAUSES), counted when decided: what monitoring reads.
        self.revocations = dict.fromkeys(machine.REVOKE_CAUSES, 0)
        self.decisions = 0
        """Session requests decided since start (granted or refused): what monitoring and the console read."""
        self.watchers = StateWatchers()
        """Who is called back when an identity's state is written (``watchers.watch``: the console's live pages)."""
        self._flush: Flush | None = None
        self._adopted: collections.deque[str] = collections.deque()  # adopted identities not yet sent a re-check
        self._adopted_queued = trio.lowlevel.ParkingLot()
        self._adopted_done = trio.lowlevel.ParkingLot()  # woken when the queue is empty and its last chunk settled
        self._rechecking = False  # a chunk of adopted identities is being re-checked
        self.behavior = IdentityBehavior(self, evaluate_posture=evaluate_posture)
        self.actors: ActorRegistry[LiveIdentity, IdentityMessage] = ActorRegistry(
            self.behavior, domain.clock.now, domain.clock.to_trio, releasable=ownership is not None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the actors; re-arm every stored deadline at the same wall-clock instant, and deliver every MFA
        removal a crash kept from its actor (see :func:`record_mfa_removal`)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.actors.run)
            nursery.start_soon(self._recheck_adopted)
            if self.ownership is None:  # in a cluster, identities are adopted as their shards are claimed
                self.adopt(lambda _identity_id: True)
            task_status.started()

    def adopt(self, select: Callable[[str], bool]) -> None:
        """Host the identities ``select`` accepts from their stored state: re-arm each one's deadline at the same
        wall-clock instant (one already past fires at once), deliver every MFA removal not yet handled, and have
        every one holding API sessions re-check them (``Reevaluate("adopted")``, sent by the engine's own task a
        chunk at a time; :meth:`settle_hosted` waits for them).

        The re-check is what makes a committed change of policies, checks or roles take effect whatever happened to
        its re-checks: the previous host (this process before a crash, or the node that held the shard) may have
        stopped before it revoked what the change takes away. Re-checking sessions the rules still grant changes
        nothing."""
        with self.domain.store.read() as txn:
            for identity_id, data in txn.scan_raw(STATE_KIND):
                if select(identity_id):
                    deadline = decode_state(identity_id, data).deadline
                    if deadline is not None:
                        self.actors.arm(identity_id, deadline)
            pending = [str(row["id"]) for row in txn.scan(PENDING_KIND) if select(str(row["id"]))]
        for identity_id in pending:
            self.actors.post(identity_id, MfaRemoved())
        self._adopted.extend(identity_id for identity_id in self._live_identities() if select(identity_id))
        self._adopted_queued.unpark_all()

    async def _recheck_adopted(self) -> None:
        """Post the adopted identities' re-checks :data:`RECHECK_CHUNK` at a time, each chunk settled before the
        next: a host adopting many identities keeps answering requests and firing deadlines meanwhile."""
        message = Reevaluate(ADOPTED)
        while True:
            while not self._adopted:
                self._rechecking = False
                self._adopted_done.unpark_all()
                await self._adopted_queued.park()
            self._rechecking = True
            ownership = self.ownership
            replies: list[_Handled] = []
            for _ in range(min(RECHECK_CHUNK, len(self._adopted))):
                identity_id = self._adopted.popleft()
                if ownership is None or ownership.owns(identity_id):  # one let go is its next host's to re-check
                    # Posted together, the re-check and the settle are one step of the actor.
                    reply = _Handled()
                    self.actors.post(identity_id, message)
                    self.actors.post(identity_id, Settle(reply))
                    replies.append(reply)
            for reply in replies:
                await reply.receive()

    def release(self, select: Callable[[str], bool]) -> int:
        """Stop hosting the identities ``select`` accepts (another node does from now on): their actors stop, what
        waited for them fails with :class:`Moved`. Returns how many actors stopped."""
        return self.actors.release(select, Moved())

    # What callers ask ----------------------------------------------------------------------------------------

    async def report_posture(self, identity_id: str, api_session_id: str, responses: Sequence[Mapping[str, Any]],
                             *, woken: bool = False, unlocked: bool = False) -> list[dict[str, Any]]:
        """Record what an API session's endpoint reported (responses, a wake, an unlock) and re-check the
        identity's sessions; returns the services whose MFA timer a wake or unlock started."""
        changed: list[dict[str, Any]] = await self._ask(identity_id, lambda reply: PostureReported(
            api_session_id, tuple(responses), reply, woken, unlocked))
        return changed

    async def request_session(self, identity_id: str, api_session_id: str, service_id: str, session_type: str,
                              tags: Mapping[str, Any]) -> dict[str, Any]:
        """Decide a Dial/Bind session request; returns the session's row (a new one, durable, or the one the API
        session already has for that service and type).

        Raises:
            ApiError: refused (NOT_FOUND, COULD_NOT_VALIDATE, INVALID_POSTURE, NO_EDGE_ROUTERS_AVAILABLE), or the
                identity no longer exists (UNAUTHORIZED).
        """
        self.decisions += 1
        row: dict[str, Any] = await self._ask(identity_id, lambda reply: CreateSession(
            api_session_id, service_id, session_type, tags, reply))
        return row

    async def mfa_passed(self, identity_id: str, api_session_id: str) -> None:
        """The API session proved MFA; returns once that is durable and its consequences are decided."""
        self.actors.post(identity_id, MfaPassed(api_session_id))
        await self.settle(identity_id)

    async def mfa_removed(self, identity_id: str) -> None:
        """The identity removed its own MFA: every API session loses its pass; returns once the sessions depending
        on it are revoked, durably."""
        self.actors.post(identity_id, MfaRemoved())
        await self.settle(identity_id)

    def api_session_started(self, identity_id: str, api_session_id: str) -> None:
        self.actors.post(identity_id, ApiSessionStarted(api_session_id))

    def api_session_ended(self, identity_id: str, api_session_id: str) -> None:
        self.actors.post(identity_id, ApiSessionEnded(api_session_id))

    def reevaluate(self, identity_ids: Sequence[str], reason: str = "policyChange") -> Callable[[], Awaitable[None]]:
        """Policies, checks or the identities themselves (``reason`` ``roleChange``) changed: each re-checks its
        sessions. Returns the barrier that completes once every one of them has, durably."""
        message = Reevaluate(reason)
        for identity_id in identity_ids:
            self.actors.post(identity_id, message)

        async def settled() -> None:
            # One that left this node meanwhile (in a cluster) is re-checked by its next host as it adopts it, and
            # RechecksElsewhere waits for that.
            await self._settle_owned(identity_ids)

        return settled

    async def adoptions_rechecked(self) -> None:
        """Return once every identity adopted so far has been re-checked (what a benchmark of adoption waits for)."""
        while self._adopted or self._rechecking:
            await self._adopted_done.park()

    async def settle_hosted(self, identity_ids: Iterable[str] | None) -> set[str]:
        """Return once every identity this node hosts among ``identity_ids`` (None: every one holding API sessions)
        has handled every message posted before this call, its writes durable: the re-checks of a write another
        node committed, once this node applied it, and those of every identity it adopted before the call. Returns
        the identities that left this node meanwhile (their actor released, or their write fenced out): not
        settled here."""
        wanted = list(self._live_identities() if identity_ids is None else identity_ids)
        if self._adopted:
            # Adopted identities whose re-check is still queued get it now, so that this waits for theirs and not
            # for the whole queue (the queue's later re-check of them changes nothing).
            queued = set(self._adopted).intersection(wanted)
            message = Reevaluate(ADOPTED)
            for identity_id in queued:
                self.post(identity_id, message)
        return await self._settle_owned(wanted)

    async def _settle_owned(self, identity_ids: Iterable[str]) -> set[str]:
        ownership = self.ownership
        left: set[str] = set()
        for identity_id in list(identity_ids):
            if ownership is None or ownership.owns(identity_id):
                try:
                    await self.settle(identity_id)
                except (Moved, ConditionFailed):  # its shard went to another node meanwhile: not settled here
                    left.add(identity_id)
        return left

    async def settle(self, identity_id: str) -> None:
        """Return once the identity's actor has handled every message posted before this call and its writes
        (revocations included) are durable; also for an identity that no longer exists.

        Raises:
            Exception: the error of a write that failed (it is not durable), or :class:`Moved` when the identity
                left this node meanwhile."""
        await self._ask(identity_id, Settle)

    async def state(self, identity_id: str) -> IdentityState:
        """The identity's current state (every earlier message handled)."""
        state: IdentityState = await self._ask(identity_id, ReadState)
        return state

    def upcoming_deadlines(self, limit: int) -> list[tuple[float, str]]:
        """The next MFA deadlines (an MFA check's timeout, or the end of the grace after a wake or unlock), as
        ``(wall-clock instant, identity id)``, earliest first, at most ``limit``: when the identity's sessions are
        checked again."""
        return self.actors.upcoming(limit)

    def post(self, identity_id: str, message: IdentityMessage) -> None:
        """Queue a message for the identity's actor (what the methods above do; for the engine's own use); in a
        cluster, only for an identity this node hosts."""
        if self.ownership is None or self.ownership.owns(identity_id):
            self.actors.post(identity_id, message)

    def queue(self, write: StepWrite) -> None:
        """Queue an identity's write with the others not yet begun (one :class:`_Flush`); in a cluster it carries
        the fence of the identity's owner."""
        flush, ownership = self._flush, self.ownership
        if flush is None or flush.begun:
            if ownership is None:
                flush = self._flush = Flush(self)
                self.domain.post_write(flush, flush.finished)
            else:  # the writer reads the fences from this list once the flush has run, so it may still grow
                fences: list[object] = []
                flush = self._flush = Flush(self, fences)
                self.domain.post_write(flush, flush.finished, conditions=fences)
        flush.writes.append(write)
        if ownership is not None and (conditions := flush.conditions) is not None:
            conditions.extend(fence for fence in ownership.fence(write.key) if fence not in conditions)

    @property
    def watched_kinds(self) -> frozenset[str]:
        """The kinds whose committed changes :meth:`changes_committed` must see."""
        return self.domain.registry.access_kinds | {SESSIONS, IDENTITIES.kind, API_SESSIONS.kind}

    def changes_committed(self, changes: list[Change]) -> Barrier | None:
        """Keep the actors in step with a committed write (a listener of :meth:`Domain.subscribe` over
        :attr:`watched_kinds`): sessions written by anyone, API sessions ended, identities whose roles changed or
        that are gone, and policies or checks changed, after which every identity holding API sessions re-checks its
        sessions. Returns a barrier when identities re-check: the write is answered once each of them has, durably
        (the re-evaluation is queued before the barrier is awaited)."""
        reevaluate: set[str] = set()
        roles_changed = policies_changed = False
        access_kinds = self.domain.registry.access_kinds
        ownership = self.ownership
        for change in changes:
            if change.kind == SESSIONS:
                self.sessions_changed(change)
            elif change.kind == API_SESSIONS.kind:
                identity_id = (change.before or {}).get("identityId")
                if change.after is None and identity_id:
                    self.post(str(identity_id), ApiSessionEnded(change.id))
                elif ownership is not None and change.before is None and change.after is not None:
                    # In a cluster the owner learns of a login on any node from the committed row.
                    self.post(str(change.after.get("identityId")), ApiSessionStarted(change.id))
            elif change.kind == IDENTITIES.kind:
                if change.before is not None and (
                        change.after is None or _access_fields(change.before) != _access_fields(change.after)):
                    reevaluate.add(change.id)
                    roles_changed = True
            elif change.kind in access_kinds:
                reevaluate.update(self._live_identities())
                policies_changed = True
        reason = "roleChange" if roles_changed and not policies_changed else "policyChange"
        if ownership is None or not reevaluate:
            return self.reevaluate(sorted(reevaluate), reason) if reevaluate else None
        hosted = sorted(identity_id for identity_id in reevaluate if ownership.owns(identity_id))
        here = self.reevaluate(hosted, reason) if hosted else None
        elsewhere = self.elsewhere
        if elsewhere is None:
            return here
        # Policies or checks changed: every node re-checks the live identities it hosts; roles changed: the nodes
        # hosting those identities do. Either way the identities whose shard leaves this node meanwhile are waited
        # for at their next host.
        there = elsewhere(None if policies_changed else frozenset(reevaluate))

        async def everywhere() -> None:
            if here is not None:
                await here()
            await there()

        return everywhere

    def sessions_changed(self, change: Change) -> None:
        """A committed change of the sessions kind: keep the live identity's sessions in step (the actor's own
        grants and revocations come back here too, and change nothing twice)."""
        row = change.after if change.after is not None else change.before
        if row is None:
            return
        live = self.actors.state_of(str(row.get("identityId")))
        if live is None:
            return
        if change.after is None:
            live.sessions = tuple(ref for ref in live.sessions if ref.session_id != change.id)
        elif not any(ref.session_id == change.id for ref in live.sessions):
            live.sessions += (SessionRef(change.id, str(row["apiSessionId"]), str(row["serviceId"]),
                                         str(row["type"])),)

    async def _ask(self, identity_id: str, make: Callable[[OneShot[T]], IdentityMessage]) -> T:
        return await self.actors.ask(identity_id, make)


def _access_fields(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The identity fields that decide which policies select it."""
    return tuple(row.get("roleAttributes") or ()), row.get("isAdmin")
