"""The posture engine: one actor per identity, its shell, and the facade request handlers call.

:class:`IdentityBehavior` is the thin async shell around the pure machine (``controller/posture/machine.py``): it
loads and persists state, decides session requests, re-evaluates the identity's sessions and deletes those that
fail, and works out the next MFA deadline, which the actor registry arms on its single scheduler heap. Everything
an effect writes (state, revoked sessions, a created session) goes into one durable write before any reply is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import trio

from actors.messages import DeadlineReached, IdentityMessage
from actors.registry import ActorRegistry, OneShot
from controller.crud import create_row, delete_row
from controller.domain import Domain
from controller.errors import ApiError
from controller.posture.access import access_digest, mfa_checks_for
from controller.posture.codec import decode_state, encode_state
from controller.posture.decide import decide_session, revaluate, timer_changes
from controller.posture.evaluate import mfa_deadline
from controller.posture.machine import (
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

__all__ = ["STATE_KIND", "IdentityBehavior", "PostureEngine"]

STATE_KIND = "posture-state"
T = TypeVar("T")


@dataclass
class _Plan:
    """What one ``perform`` will write and answer, collected while reading one snapshot."""

    persist: bool = False
    revoke: list[str] = field(default_factory=list)
    create: dict[str, Any] | None = None
    replies: list[tuple[OneShot[Any], Any]] = field(default_factory=list)
    create_reply: OneShot[Any] | None = None


class IdentityBehavior:
    """The shell of an identity actor (see :class:`actors.registry.Behavior`)."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain

    def load(self, key: str) -> IdentityState:
        with self.domain.store.read() as txn:
            return decode_state(key, txn.get(STATE_KIND, key))

    def handle(self, state: IdentityState, message: IdentityMessage, now: float) -> tuple[IdentityState,
                                                                                           Sequence[Effect]]:
        return handle(state, message, now)

    def next_deadline(self, state: IdentityState) -> float | None:
        return state.deadline

    def deadline_message(self, deadline: float) -> DeadlineReached:
        return DeadlineReached(deadline)

    async def perform(self, key: str, before: IdentityState, after: IdentityState,
                      effects: Sequence[Effect]) -> IdentityState:
        now = self.domain.clock.now()
        plan = _Plan()
        state = after
        with self.domain.read() as ctx:
            identity = ctx.txn.get("identities", key)
            if identity is None:
                # The identity is gone: drop its state; any pending reply learns the identity no longer exists.
                for effect in effects:
                    if isinstance(effect, Decide):
                        plan.replies.append((effect.request.reply, ApiError("UNAUTHORIZED")))
                    elif isinstance(effect, Reply | ReportTimers) and effect.reply is not None:
                        plan.replies.append((effect.reply, ApiError("NOT_FOUND") if isinstance(effect, Reply)
                                             else []))
                await self.domain.write(lambda w: w.txn.delete(STATE_KIND, key) and None)
                _send(plan.replies)
                return IdentityState(key)
            for effect in effects:
                match effect:
                    case Persist():
                        plan.persist = True
                    case Revaluate():
                        digest = access_digest(ctx, identity)
                        if digest != state.access_digest:
                            # Gained or lost a service, a session type or a check: clients must refresh.
                            changed_at = now if state.access_digest is not None else state.last_change_at
                            state = replace(state, access_digest=digest, last_change_at=changed_at)
                            plan.persist = True
                        revoked, timed_out = revaluate(ctx, identity, state, now)
                        plan.revoke.extend(revoked)
                        if timed_out:
                            state = mark_timed_out(state, timed_out)
                        if revoked:
                            state = replace(state, last_change_at=now)
                        plan.persist = plan.persist or bool(revoked or timed_out)
                    case Decide(request):
                        outcome = decide_session(ctx, identity, state, request, now)
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
            deadline = self._next_deadline(ctx, identity, state, now)
        if deadline != state.deadline:
            state = replace(state, deadline=deadline)
            plan.persist = True
        created = await self._apply(key, state, plan)
        if plan.create_reply is not None:
            plan.replies.append((plan.create_reply, created))
        _send(plan.replies)
        return state

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

    async def _apply(self, key: str, state: IdentityState, plan: _Plan) -> Any:
        if not (plan.persist or plan.revoke or plan.create is not None):
            return None
        sessions = self.domain.registry["sessions"]
        encoded = encode_state(state)

        def write(ctx: WriteContext) -> Any:
            created = None
            for session_id in plan.revoke:
                if ctx.txn.exists("sessions", session_id):
                    delete_row(ctx, sessions, session_id)
            if plan.create is not None:
                created = create_row(ctx, sessions, plan.create, None)
            ctx.txn.put(STATE_KIND, encoded)
            return created

        return await self.domain.write(write)


def _send(replies: list[tuple[OneShot[Any], Any]]) -> None:
    for reply, value in replies:
        reply.send(value)


class PostureEngine:
    """The identity actors of one controller, and the calls request handlers make to them."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.behavior = IdentityBehavior(domain)
        self.actors: ActorRegistry[IdentityState, IdentityMessage, Effect] = ActorRegistry(
            self.behavior, domain.clock.now, domain.clock.to_trio)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the actors; re-arm every persisted deadline at the same wall-clock instant."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.actors.run)
            with self.domain.store.read() as txn:
                for row in txn.scan(STATE_KIND):
                    if row.get("deadline") is not None:
                        self.actors.arm(str(row["id"]), float(row["deadline"]))
            task_status.started()

    def post(self, identity_id: str, message: IdentityMessage) -> None:
        self.actors.post(identity_id, message)

    async def ask(self, identity_id: str, make: Callable[[OneShot[T]], IdentityMessage]) -> T:
        """Send a message carrying a reply slot and return the reply; an :class:`ApiError` reply is raised."""
        value: T = await self.actors.ask(identity_id, make)
        if isinstance(value, ApiError):
            raise value
        return value

    async def state(self, identity_id: str) -> IdentityState:
        from actors.messages import ReadState

        state: IdentityState = await self.ask(identity_id, ReadState)
        return state
