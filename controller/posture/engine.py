"""The posture engine: one actor per identity, its shell, and the facade request handlers call.

:class:`IdentityBehavior` is the thin async shell around the pure machine (``controller/posture/machine.py``): it
loads and persists state, decides session requests, re-evaluates the identity's sessions and deletes those that
fail, and works out the next MFA deadline, which the actor registry arms on its single scheduler heap. Everything
an effect writes (state, revoked sessions, a created session) goes into one durable write before any reply is sent.

The first re-evaluation at or after the state's deadline is the decision on that deadline (usually the one the
deadline itself prompts; a message that arrives just after the deadline decides it first): the engine's
:class:`~actors.lateness.LatenessRecorder` (``PostureEngine.lateness``) learns how late the decision was computed and
how late its revocations became durable.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import trio
from msgspec.structs import replace

from actors.lateness import DeadlineOutcome, LatenessRecorder
from actors.messages import (
    CreateSession,
    DeadlineReached,
    IdentityMessage,
    MfaRemoved,
    PostureReported,
    ReadState,
    Settle,
)
from actors.registry import ActorRegistry, OneShot
from controller.domain import Domain
from controller.errors import ApiError
from controller.posture.access import access_digest, mfa_checks_for
from controller.posture.codec import decode_state, encode_state
from controller.posture.decide import decide_session, revaluate, timer_changes
from controller.posture.evaluate import PostureData, mfa_deadline
from controller.posture.machine import (
    ClearPendingRemoval,
    Decide,
    Effect,
    IdentityState,
    Persist,
    Reply,
    ReportTimers,
    Revaluate,
    handle,
    mark_timed_out,
    record_failure,
)
from controller.resources.context import ReadContext, WriteContext
from controller.resources.spec import Resource
from controller.write_path import create_row, delete_row

__all__ = ["PENDING_KIND", "STATE_KIND", "IdentityBehavior", "PostureEngine", "record_mfa_removal"]

STATE_KIND = "posture-state"
PENDING_KIND = "posture-pending"
"""Per identity: an MFA removal committed but not yet handled by its actor (see :func:`record_mfa_removal`)."""

T = TypeVar("T")

# Shared by every loaded state that has nothing of its own: a parked actor holds its state for as long as it waits
# (a million of them at once), and most identities report no posture data and no SDK details.
_EMPTY: Mapping[str, Any] = MappingProxyType({})
_NO_POSTURE = PostureData(processes=_EMPTY, process_paths=_EMPTY)


@dataclass(slots=True)
class _Plan:
    """What one ``perform`` will write and answer, collected while reading one snapshot."""

    persist: bool = False
    clear_pending: bool = False  # delete the identity's pending MFA removal record
    gone: bool = False  # the identity no longer exists
    revoke: list[str] = field(default_factory=list)
    create: dict[str, Any] | None = None
    replies: list[tuple[OneShot[Any], Any]] = field(default_factory=list)
    create_reply: OneShot[Any] | None = None
    deadline: float | None = None
    decided_at: float = 0.0


class IdentityBehavior:
    """The shell of an identity actor (see :class:`actors.registry.Behavior`).

    ``evaluate_posture`` False is the global off switch: sessions are decided and re-evaluated on policies alone.
    """

    def __init__(self, domain: Domain, *, evaluate_posture: bool = True) -> None:
        self.domain = domain
        self.evaluate_posture = evaluate_posture
        self.lateness = LatenessRecorder()

    def load(self, key: str) -> IdentityState:
        with self.domain.store.read() as txn:
            return _compact(decode_state(key, txn.get(STATE_KIND, key)))

    def handle(self, state: IdentityState, message: IdentityMessage, now: float) -> tuple[IdentityState,
                                                                                           Sequence[Effect]]:
        return handle(state, message, now)

    def next_deadline(self, state: IdentityState) -> float | None:
        return state.deadline

    def deadline_message(self, deadline: float) -> DeadlineReached:
        return DeadlineReached(deadline)

    def failed(self, message: IdentityMessage, error: Exception) -> None:
        match message:
            case (PostureReported(reply=reply) | CreateSession(reply=reply) | ReadState(reply=reply)
                  | Settle(reply=reply)):
                if reply is not None:
                    reply.fail(error)

    async def perform(self, key: str, before: IdentityState, after: IdentityState,
                      effects: Sequence[Effect]) -> IdentityState:
        state, plan = self._plan(key, before, after, effects, self.domain.clock.now())
        if plan.gone:
            await self.domain.write(functools.partial(_drop_state, key))
            _send(plan.replies)
            return IdentityState(key)
        created = None
        if plan.persist or plan.revoke or plan.create is not None or plan.clear_pending:
            # Awaited here, not in a helper coroutine: a step waiting for its commit holds one frame less.
            created = await self.domain.write(_StepWrite(self.domain.registry["sessions"], state, plan))
        if plan.deadline is not None:
            self.lateness.record(DeadlineOutcome(key, plan.deadline, plan.decided_at, self.domain.clock.now(),
                                                 len(plan.revoke)))
        if plan.create_reply is not None:
            plan.replies.append((plan.create_reply, created))
        _send(plan.replies)
        return state

    def _plan(self, key: str, before: IdentityState, after: IdentityState, effects: Sequence[Effect],
              now: float) -> tuple[IdentityState, _Plan]:
        """Carry out the effects against one snapshot: the state to keep and what to write and answer.

        Synchronous, so that the snapshot, its memo and the rows read die with this frame before the write is
        awaited: every step waiting for its commit would otherwise keep them for the collector to traverse."""
        plan = _Plan()
        state = after
        # Only a re-evaluation (policies or MFA state may have moved) or a decision can change the next deadline;
        # a read must not pay for working it out again.
        rearm = False
        with self.domain.read() as ctx:
            identity = ctx.txn.get("identities", key)
            if identity is None:
                # The identity is gone: drop its state; any pending reply learns the identity no longer exists.
                plan.gone = True
                for effect in effects:
                    if isinstance(effect, Decide):
                        plan.replies.append((effect.request.reply, ApiError("UNAUTHORIZED")))
                    elif isinstance(effect, Reply | ReportTimers) and effect.reply is not None:
                        plan.replies.append((effect.reply, [] if isinstance(effect, ReportTimers) else
                                             ApiError("NOT_FOUND") if isinstance(effect.value, IdentityState)
                                             else effect.value))
                return state, plan
            for effect in effects:
                match effect:
                    case Persist():
                        plan.persist = True
                    case ClearPendingRemoval():
                        plan.clear_pending = True
                    case Revaluate(access=access):
                        rearm = True
                        digest = (access_digest(ctx, identity) if access or state.access_digest is None
                                  else state.access_digest)
                        if digest != state.access_digest:
                            # Gained or lost a service, a session type or a check: clients must refresh.
                            changed_at = now if state.access_digest is not None else state.last_change_at
                            state = replace(state, access_digest=digest, last_change_at=changed_at)
                            plan.persist = True
                        revoked, timed_out = revaluate(ctx, identity, state, now,
                                                       evaluate_posture=self.evaluate_posture)
                        plan.revoke.extend(revoked)
                        if before.deadline is not None and before.deadline <= now:
                            plan.deadline, plan.decided_at = before.deadline, self.domain.clock.now()
                        changed_at = now if revoked else state.last_change_at
                        if timed_out:
                            state = mark_timed_out(state, timed_out, last_change_at=changed_at)
                        elif revoked:
                            state = replace(state, last_change_at=now)
                        plan.persist = plan.persist or bool(revoked or timed_out)
                    case Decide(request):
                        rearm = True
                        outcome = decide_session(ctx, identity, state, request, now,
                                                 evaluate_posture=self.evaluate_posture)
                        if outcome.failure is not None:
                            state = record_failure(state, outcome.failure)
                            plan.persist = True
                        if outcome.create is not None:
                            plan.create = outcome.create
                            plan.create_reply = request.reply
                        else:
                            plan.replies.append((request.reply, outcome.reply))
                    case ReportTimers(api_session_id, woken, unlocked, reply):
                        if reply is not None:
                            plan.replies.append((reply, timer_changes(ctx, identity, state, api_session_id, woken,
                                                                      unlocked, now)))
                    case Reply(reply, value):
                        plan.replies.append((reply, state if isinstance(value, IdentityState) else value))
            deadline = self._next_deadline(ctx, identity, state, now) if rearm else state.deadline
        if deadline != state.deadline:
            state = replace(state, deadline=deadline)
            plan.persist = True
        return state, plan

    def _next_deadline(self, ctx: ReadContext, identity: Mapping[str, Any], state: IdentityState,
                       now: float) -> float | None:
        """The earliest instant at which a currently passing MFA check of this identity will start failing."""
        passed = [s.mfa for s in state.sessions.values() if s.mfa.passed_mfa_at is not None and not s.mfa.timed_out]
        if not passed:
            return None
        checks = mfa_checks_for(ctx, identity)
        candidates = [d for mfa in passed for check in checks
                      if (d := mfa_deadline(check, mfa)) is not None and d > now]
        return min(candidates, default=None)


class _StepWrite:
    """The one durable write of an actor step: revoked sessions, the created session, the new state. Returns the
    created session (or None). A slotted object rather than a closure, for the reason given on
    :class:`controller.domain._Mutation`; the state is encoded only when the write runs, so that a step waiting
    for its turn holds no row dicts of it."""

    __slots__ = ("plan", "sessions", "state")

    def __init__(self, sessions: Resource, state: IdentityState, plan: _Plan) -> None:
        self.sessions = sessions
        self.state = state
        self.plan = plan

    def __call__(self, ctx: WriteContext) -> Any:
        created = None
        for session_id in self.plan.revoke:
            if ctx.txn.exists("sessions", session_id):
                delete_row(ctx, self.sessions, session_id)
        if self.plan.create is not None:
            created = create_row(ctx, self.sessions, self.plan.create, None)
        ctx.txn.put(STATE_KIND, encode_state(self.state))
        if self.plan.clear_pending:
            ctx.txn.delete(PENDING_KIND, self.state.identity_id)
        return created


def _drop_state(key: str, ctx: WriteContext) -> None:
    """The write of an actor whose identity is gone: delete its stored state (and any pending record)."""
    ctx.txn.delete(STATE_KIND, key)
    ctx.txn.delete(PENDING_KIND, key)


def _compact(state: IdentityState) -> IdentityState:
    """``state`` with the parts every other identity has too shared instead of copied (see ``_EMPTY``)."""
    posture = state.posture
    if (posture.os is None and posture.mac is None and posture.domain is None and not posture.processes
            and not posture.process_paths):
        posture = _NO_POSTURE
    digest = sys.intern(state.access_digest) if state.access_digest is not None else None
    return replace(state, posture=posture, access_digest=digest)


def record_mfa_removal(ctx: WriteContext, identity_id: str) -> None:
    """Record, in the write that removes an identity's MFA enrolment, that its actor must take every MFA pass away.

    The actor learns of the removal by a message after the commit; a crash in between would leave the passes in its
    stored state. The record closes that gap: the actor deletes it in the write that persists the removal's effect,
    and a start delivers the removal again for every record still there.
    """
    ctx.txn.put(PENDING_KIND, {"id": identity_id, "mfaRemovedAt": ctx.now})


def _send(replies: list[tuple[OneShot[Any], Any]]) -> None:
    """Answer every reply slot; an :class:`ApiError` answer is raised in its receiver."""
    for reply, value in replies:
        if isinstance(value, ApiError):
            reply.fail(value)
        else:
            reply.send(value)


class PostureEngine:
    """The identity actors of one controller, and the calls request handlers make to them."""

    def __init__(self, domain: Domain, *, evaluate_posture: bool = True) -> None:
        self.domain = domain
        self.behavior = IdentityBehavior(domain, evaluate_posture=evaluate_posture)
        self.lateness = self.behavior.lateness
        self.actors: ActorRegistry[IdentityState, IdentityMessage, Effect] = ActorRegistry(
            self.behavior, domain.clock.now, domain.clock.to_trio)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the actors; re-arm every persisted deadline at the same wall-clock instant, and deliver every MFA
        removal a crash kept from its actor (see :func:`record_mfa_removal`)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.actors.run)
            with self.domain.store.read() as txn:
                for row in txn.scan(STATE_KIND):
                    identity_id = str(row["id"])
                    if row.get("deadline") is not None:
                        self.actors.arm(identity_id, float(row["deadline"]))
                for row in txn.scan(PENDING_KIND):
                    self.actors.post(str(row["id"]), MfaRemoved())
            task_status.started()

    def post(self, identity_id: str, message: IdentityMessage) -> None:
        self.actors.post(identity_id, message)

    async def ask(self, identity_id: str, make: Callable[[OneShot[T]], IdentityMessage]) -> T:
        """Send a message carrying a reply slot and return the reply.

        Raises:
            ApiError: the actor refused the request (an unknown identity, a denied session).
            Exception: handling the message failed; the actor restarted from its persisted state.
        """
        return await self.actors.ask(identity_id, make)

    async def settle(self, identity_id: str) -> None:
        """Return once the identity's actor has handled every message posted before this call and its writes
        (revocations included) are durable; also for an identity that no longer exists."""
        await self.ask(identity_id, Settle)

    async def state(self, identity_id: str) -> IdentityState:
        state: IdentityState = await self.ask(identity_id, ReadState)
        return state
