"""The posture engine: one actor per identity and the methods callers use. Each actor's shell is
:class:`controller.posture.identity_actor.IdentityBehavior`; this module hosts the actors, queues their writes and
answers callers.

The first re-check at or after the state's deadline is the decision on that deadline: the engine's
:class:`~actors.lateness.LatenessRecorder` (``PostureEngine.lateness``) learns how late the decision was computed and
how late its revocations became durable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import trio

from actors.lateness import LatenessRecorder
from actors.live_actors import ActorRegistry, OneShot
from controller.data.commit_step import ConditionFailed
from controller.data.domain import Barrier, Domain
from controller.model.spec import Change
from controller.posture import machine
from controller.posture.adoption import Adoption, read_adoption, read_adoption_chunked
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
from controller.posture.rechecks import RECHECK_CHUNK, RecheckQueue
from controller.posture.service import Moved, Ownership, RechecksElsewhere
from controller.posture.state import IdentityState
from controller.posture.watchers import StateWatchers
from controller.resources.identities import IDENTITIES
from controller.resources.sessions import API_SESSIONS

__all__ = ["CLUSTER_FLUSH_WRITES", "PENDING_KIND", "STATE_KIND", "PostureEngine", "record_mfa_removal"]

T = TypeVar("T")

CLUSTER_FLUSH_WRITES = 16
"""Identity writes in one flush, in a cluster. A cluster ships each mutation whole in one etcd txn, which takes 128
operations by default (each write's rows, each fence's compare): a change of policies that many identities re-check
after must not become one mutation that no txn can hold. The writer still packs consecutive flushes into one txn."""


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
        # Re-checks of adopted identities, and of a write that many identities re-check, sent a chunk at a time.
        self._rechecks = RecheckQueue(self.post, lambda identity_id: ownership is None or ownership.owns(identity_id))
        self.behavior = IdentityBehavior(self, evaluate_posture=evaluate_posture)
        self.actors: ActorRegistry[LiveIdentity, IdentityMessage] = ActorRegistry(
            self.behavior, domain.clock.now, domain.clock.to_trio, releasable=ownership is not None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the actors; re-arm every stored deadline at the same wall-clock instant, and deliver every MFA
        removal a crash kept from its actor (see :func:`record_mfa_removal`)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.actors.run)
            nursery.start_soon(self._rechecks.run)
            if self.ownership is None:  # in a cluster, identities are adopted as their shards are claimed
                self.adopt(lambda _identity_id: True)
            task_status.started()

    async def read_adoption(self, select: Callable[[str], bool]) -> Adoption:
        """What :meth:`adopt` re-arms for the identities ``select`` accepts, read a chunk at a time
        (:func:`controller.posture.adoption.read_adoption_chunked`: only while nobody writes their states)."""
        return await read_adoption_chunked(self.domain.store, select)

    def adopt(self, select: Callable[[str], bool], adoption: Adoption | None = None) -> None:
        """Host the identities ``select`` accepts from their stored state (``adoption``, read now if not given:
        :meth:`read_adoption`): re-arm each one's deadline at the same
        wall-clock instant (one already past fires at once), deliver every MFA removal not yet handled, and have
        every one holding API sessions re-check them (``Reevaluate("adopted")``, sent by the engine's own task a
        chunk at a time, :class:`controller.posture.rechecks.RecheckQueue`; :meth:`settle_hosted` waits for
        them).

        The re-check is what makes a committed change of policies, checks or roles take effect whatever happened to
        its re-checks: the previous host (this process before a crash, or the node that held the shard) may have
        stopped before it revoked what the change takes away. Re-checking sessions the rules still grant changes
        nothing."""
        if adoption is None:
            adoption = read_adoption(self.domain.store, select)
        for identity_id, deadline in adoption.deadlines:
            self.actors.arm(identity_id, deadline)
        for identity_id in adoption.pending:
            self.actors.post(identity_id, MfaRemoved())
        message = Reevaluate(ADOPTED)
        self._rechecks.add([identity_id for identity_id in self._live_identities() if select(identity_id)], message)

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
        queued = 0
        if len(identity_ids) > RECHECK_CHUNK:  # a chunk at a time (see RecheckQueue)
            queued = self._rechecks.add(identity_ids, message)
        else:
            for identity_id in identity_ids:
                self.actors.post(identity_id, message)

        async def settled() -> None:
            await self._rechecks.settled(queued)
            # One that left this node meanwhile (in a cluster) is re-checked by its next host as it adopts it, and
            # RechecksElsewhere waits for that.
            await self._settle_owned(identity_ids)

        return settled

    async def adoptions_rechecked(self) -> None:
        """Return once every identity adopted so far has been re-checked (what a benchmark of adoption waits for)."""
        await self._rechecks.settled(self._rechecks.queued)

    async def settle_hosted(self, identity_ids: Iterable[str] | None) -> set[str]:
        """Return once every identity this node hosts among ``identity_ids`` (None: every one holding API sessions)
        has handled every message posted before this call, its writes durable: the re-checks of a write another
        node committed, once this node applied it, and those of every identity it adopted before the call. Returns
        the identities that left this node meanwhile (their actor released, or their write fenced out): not
        settled here."""
        wanted = list(self._live_identities() if identity_ids is None else identity_ids)
        # Re-checks still queued for a few of them are sent now, so that this waits for theirs and not for the whole
        # queue (the queue's later re-check of them changes nothing); for many, the queue sends them.
        waiting = self._rechecks.waiting(set(wanted))
        if len(waiting) <= RECHECK_CHUNK:
            for identity_id, message in waiting:
                self.post(identity_id, message)
        else:
            await self._rechecks.settled(self._rechecks.queued)
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
        """Queue an identity's write with the others not yet begun (one :class:`Flush`); in a cluster it carries
        the fence of the identity's owner, and a flush holds at most :data:`CLUSTER_FLUSH_WRITES` writes."""
        flush, ownership = self._flush, self.ownership
        if flush is None or flush.begun or (ownership is not None and len(flush.writes) >= CLUSTER_FLUSH_WRITES):
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
