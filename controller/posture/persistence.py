"""The identity actors' writes (``controller/posture/engine.py``): each identity's queued write, the one mutation that
carries every write queued since the last group commit began, and what their outcomes answer.

A write holds what a step must make durable (the identity's state, the sessions it revokes and grants, a cleared
pending record) and the answers that wait for it; steps of the same identity merge into its write until the write
begins. Answers go out from the write's completion, on the writer's task, so that nobody hears of a change before
it is on disk.
"""

from __future__ import annotations

from typing import Any, Protocol

from actors.lateness import DeadlineOutcome, LatenessRecorder
from actors.live_actors import OneShot
from controller.data.domain import Domain
from controller.data.write_path import create_row, delete_row
from controller.errors import ApiError
from controller.model.events import Cause, Event
from controller.model.spec import WriteContext
from controller.posture.messages import IdentityMessage, WriteFailed
from controller.posture.state import STATE_KIND, IdentityState, encode_state
from controller.posture.watchers import StateWatchers
from storage.batch import Outcome
from storage.store import Store

__all__ = ["PENDING_KIND", "SESSIONS", "STATE_KIND", "Flush", "StepWrite", "WriteOwner", "answer_existing",
           "drop_state", "ignore_outcome", "record_mfa_removal", "send_replies"]

PENDING_KIND = "posture-pending"
"""Per identity: an MFA removal committed but not yet handled by its actor (see :func:`record_mfa_removal`)."""
SESSIONS = "sessions"


class WriteOwner(Protocol):
    """What an identity's queued write reports back to: the posture engine
    (:class:`controller.posture.engine.PostureEngine`)."""

    @property
    def domain(self) -> Domain: ...

    @property
    def lateness(self) -> LatenessRecorder: ...

    @property
    def watchers(self) -> StateWatchers: ...

    def post(self, identity_id: str, message: IdentityMessage) -> None:
        """Queue ``message`` for the identity's actor."""


class Flush:
    """One queued write for every identity write (:class:`StepWrite`) queued since the last one began: identities
    write together, in one mutation of one group commit."""

    __slots__ = ("begun", "conditions", "engine", "writes")

    def __init__(self, engine: WriteOwner, conditions: list[object] | None = None) -> None:
        self.engine = engine
        self.writes: list[StepWrite] = []
        self.begun = False
        self.conditions = conditions
        """In a cluster, the list of fences (of its identities' owners) it was queued with, still growing until it
        begins; None on a single node, which fences nothing."""

    def __call__(self, ctx: WriteContext) -> None:
        self.begun = True
        for write in self.writes:
            write.begun = True
        for write in self.writes:
            write.apply(ctx)

    def finished(self, outcome: Outcome) -> None:
        for write in self.writes:
            write.finished(outcome)


class StepWrite:
    """The queued write of an identity: sessions to revoke and create, and its state (encoded when the write runs,
    so that steps merged into it before then only replace ``state``). Answers what waits for it once durable.

    The lists stay None until a step needs them: most writes carry only the state of a posture report."""

    __slots__ = ("begun", "done", "engine", "events", "gone", "granted", "grants", "key", "lateness",
                 "pending_cleared", "replies", "revoke", "revoke_causes", "settles", "state", "waiter")

    def __init__(self, engine: WriteOwner, key: str) -> None:
        self.engine = engine
        self.key = key
        self.state: IdentityState | None = None
        self.revoke: list[str] | None = None
        self.revoke_causes: list[Cause] | None = None  # why, for each of revoke (its events' cause)
        # Per granted session: its id, its body, the requests answered with it, and the events recorded once it is
        # stored; ``granted`` pairs, in the same order, each one's requests with what the write made of it (the
        # stored row, or the ApiError that refused it).
        self.grants: list[tuple[str, Any, list[OneShot[Any]], tuple[Event, ...]]] | None = None
        self.granted: list[tuple[list[OneShot[Any]], Any]] | None = None
        self.events: list[Event] | None = None  # recorded with the write
        self.replies: list[tuple[OneShot[Any], Any]] | None = None
        self.settles: list[OneShot[Any]] | None = None
        self.lateness: list[tuple[float, float, int]] | None = None  # deadline, decided at, sessions revoked
        self.pending_cleared = self.begun = self.done = self.gone = False
        self.waiter: OneShot[None] | None = None

    def apply(self, ctx: WriteContext) -> None:
        """Write it (in the transaction of its :class:`_Flush`). Refusals of a grant are answers, not errors: only
        a failure of the store itself may raise, and that fails the whole commit anyway.

        The state of an identity deleted since the step is written all the same (a session is not: it would
        reference no identity): the identity's actor learns of the deletion (``Reevaluate``) and drops the state in
        a later write."""
        txn, key = ctx.txn, self.key
        if self.revoke or self.grants:
            # What this branch decides is decided again on every run (a cluster's commit may run a write twice);
            # a write that revokes and grants nothing decides nothing here.
            self.gone = not txn.exists("identities", key)
            self.granted = None
            if self.gone:
                return
            sessions = ctx.registry[SESSIONS]
            causes = self.revoke_causes or ()
            for index, session_id in enumerate(self.revoke or ()):
                if txn.exists(SESSIONS, session_id):
                    if index < len(causes):
                        ctx.end_cause(SESSIONS, session_id, causes[index])
                    delete_row(ctx, sessions, session_id)
            granted: list[tuple[list[OneShot[Any]], Any]] = []
            if self.grants:
                self.granted = granted
            for session_id, body, replies, events in self.grants or ():
                # Its API session may have ended, or its service gone, since the decision.
                if not (txn.exists("api-sessions", body["apiSessionId"])
                        and txn.exists("services", body["serviceId"])):
                    granted.append((replies, ApiError("NOT_FOUND")))
                else:
                    granted.append((replies, create_row(ctx, sessions, body, None, session_id)))
                    for event in events:
                        ctx.record(event)
        for event in self.events or ():
            ctx.record(event)
        if self.state is not None:
            txn.put_raw(STATE_KIND, key, encode_state(self.state))
        if self.pending_cleared:
            txn.delete_raw(PENDING_KIND, key)

    def finished(self, outcome: Outcome) -> None:
        """The write's outcome, on the writer's task: answer what waited for it."""
        self.done = True
        error: BaseException | None = ApiError("UNAUTHORIZED") if self.gone else outcome.error
        if error is not None:
            for reply, _ in self.replies or ():
                reply.fail(error)
            for _, _, replies, _ in self.grants or ():
                for reply in replies:
                    reply.fail(error)
            # What the actor holds is ahead of what is stored: it loads again (and finds a deleted identity gone).
            self.engine.post(self.key, WriteFailed())
        else:
            if self.replies:
                send_replies(self.replies)
            if self.granted:
                for replies, row in self.granted:
                    send_replies([(reply, row) for reply in replies])
            if self.lateness:
                engine = self.engine
                durable_at = engine.domain.clock.now()
                for deadline, decided_at, revoked in self.lateness:
                    engine.lateness.record(DeadlineOutcome(self.key, deadline, decided_at, durable_at, revoked))
            if self.state is not None:
                watchers = self.engine.watchers
                if watchers.watching:
                    watchers.committed(self.key)
        for reply in self.settles or ():
            if outcome.error is not None:  # not durable: whoever waits for it must not hear that it is
                reply.fail(outcome.error)
            else:
                reply.send(None)
        if self.waiter is not None:
            self.waiter.send(None)


def answer_existing(store: Store, write: StepWrite | None, existing: list[tuple[OneShot[Any], str]]) -> None:
    """Requests for a session the identity already has get its stored row (once written, for one granted by
    ``write``, the identity's write, while it is still queued)."""
    queued = {grant[0]: grant[2] for grant in write.grants or ()} if write is not None and not write.done else {}
    with store.read() as txn:
        for reply, session_id in existing:
            if session_id in queued:
                queued[session_id].append(reply)
            else:
                send_replies([(reply, txn.get(SESSIONS, session_id) or ApiError("NOT_FOUND"))])


def send_replies(replies: list[tuple[OneShot[Any], Any]]) -> None:
    """Answer every reply slot; an :class:`ApiError` answer is raised in its receiver."""
    for reply, value in replies:
        if isinstance(value, ApiError):
            reply.fail(value)
        else:
            reply.send(value)


def drop_state(ctx: WriteContext, key: str) -> None:
    """The write of an actor whose identity is gone: delete its stored state (and any pending record)."""
    ctx.txn.delete_raw(STATE_KIND, key)
    ctx.txn.delete_raw(PENDING_KIND, key)


def ignore_outcome(outcome: Outcome) -> None:
    """The completion of a write nobody waits for."""
    return None


def record_mfa_removal(ctx: WriteContext, identity_id: str) -> None:
    """Record, in the write that removes an identity's MFA enrolment, that its actor must take every MFA pass away.

    The actor learns of the removal by a message after the commit; a crash in between would leave the passes in its
    stored state. The record closes that gap: the actor deletes it in the write that persists the removal's effect,
    and a start delivers the removal again for every record still there.
    """
    ctx.txn.put(PENDING_KIND, {"id": identity_id, "mfaRemovedAt": ctx.now})
