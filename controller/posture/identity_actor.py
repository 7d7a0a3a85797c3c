"""The shell of an identity actor: :class:`IdentityBehavior`, around the pure machine
(``controller/posture/machine.py``).

A live identity (:class:`LiveIdentity`) keeps in memory its state, its Dial/Bind sessions and its plan
(``controller/posture/plan.py``); a step hands the machine everything queued, then carries out the transition:

* **Writes are queued, not awaited** (``controller/posture/persistence.py``): the actor goes on with the next
  messages while the write waits for its group commit (written behind: the state is at most one commit behind
  the actor). An identity has at most one write queued and not yet begun; a later step merges into it. Whatever a
  step changed (a session created or revoked, a report recorded) is durable before anyone hears of it: the
  step's answers go out from the write's completion. A crash therefore loses at most reports nobody was answered
  for, and the state on restart is one the endpoint reported.
* **Sessions are kept in memory**: loaded with the identity, changed by the actor's own grants and revocations, and
  by every other committed change of the sessions kind (an admin's delete, a cascade:
  :meth:`controller.posture.engine.PostureEngine.sessions_changed`), so a step reads no session row.
* **The plan is kept while valid**: rebuilt when a write to a kind that shapes access replaced the store's shared
  memo, or when the identity's own roles changed (``Reevaluate``); shared by every identity with the same roles.

The shell reaches its engine through :class:`ActorHost`, the part of
:class:`~controller.posture.engine.PostureEngine` it uses.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Sequence
from typing import Protocol

from actors.live_actors import OneShot
from controller.ids import new_id
from controller.model.events import Event
from controller.posture import machine
from controller.posture.machine import SessionRef, Transition
from controller.posture.messages import (
    CreateSession,
    DeadlineReached,
    IdentityMessage,
    PostureReported,
    ReadState,
    Reevaluate,
    Settle,
    WriteFailed,
)
from controller.posture.persistence import (
    SESSIONS,
    STATE_KIND,
    StepWrite,
    WriteOwner,
    answer_existing,
    drop_state,
    ignore_outcome,
    send_replies,
)
from controller.posture.plan import IdentityPlan, identity_plan
from controller.posture.state import IdentityState, decode_state

__all__ = ["ActorHost", "IdentityBehavior", "LiveIdentity"]


class ActorHost(WriteOwner, Protocol):
    """What an identity actor's shell asks of its engine: where its writes go, and the revocation counts."""

    @property
    def revocations(self) -> dict[str, int]: ...

    def queue(self, write: StepWrite) -> None:
        """Queue an identity's write for the next flush."""


class LiveIdentity:
    """A loaded identity: its state, its Dial/Bind sessions, its plan (None until a step needs it) and its latest
    queued write."""

    __slots__ = ("plan", "sessions", "state", "write")

    def __init__(self, state: IdentityState, sessions: tuple[SessionRef, ...]) -> None:
        self.state = state
        self.sessions = sessions
        self.plan: IdentityPlan | None = None
        self.write: StepWrite | None = None


class IdentityBehavior:
    """The shell of an identity actor (see :class:`actors.live_actors.Behavior`).

    ``evaluate_posture`` False is the global off switch: sessions are decided and re-checked on policies alone.
    """

    def __init__(self, engine: ActorHost, *, evaluate_posture: bool = True) -> None:
        self.engine = engine
        self.domain = engine.domain
        self.evaluate_posture = evaluate_posture

    def load(self, key: str) -> LiveIdentity:
        with self.domain.store.read() as txn:
            state = decode_state(key, txn.get_raw(STATE_KIND, key))
            # Service ids and types interned: many identities' sessions name the same ones, and parked actors
            # keep their sessions in memory.
            refs = tuple(SessionRef(str(row["id"]), str(row["apiSessionId"]), sys.intern(str(row["serviceId"])),
                                    sys.intern(str(row["type"])))
                         for row in txn.get_many(SESSIONS, txn.ids_by_ref(SESSIONS, "identityId", key)))
        return LiveIdentity(state, refs)

    def next_deadline(self, live: LiveIdentity) -> float | None:
        return live.state.deadline

    def deadline_message(self, deadline: float) -> DeadlineReached:
        return DeadlineReached(deadline)

    def failed(self, message: IdentityMessage, error: Exception) -> None:
        match message:
            case (PostureReported(reply=reply) | CreateSession(reply=reply) | ReadState(reply=reply)
                  | Settle(reply=reply)):
                if reply is not None:
                    reply.fail(error)

    async def settled(self, live: LiveIdentity) -> None:
        write = live.write
        if write is not None and not write.done:
            if write.waiter is None:
                write.waiter = OneShot()
            await write.waiter.receive()

    def step(self, key: str, live: LiveIdentity, messages: list[IdentityMessage], now: float) -> LiveIdentity:
        plan = live.plan
        rebuild = plan is None or not plan.valid(self.domain.store)
        known = True  # the plan already holds every service this step needs
        for message in messages:
            if isinstance(message, CreateSession):
                known = known and plan is not None and message.service_id in plan.services
            elif isinstance(message, Reevaluate):
                rebuild = True
            elif isinstance(message, WriteFailed):
                live = self.load(key)
                rebuild = True
        if known and not rebuild:
            services = plan.services  # type: ignore[union-attr]  # not rebuild: there is a plan
            for ref in live.sessions:
                if ref.service_id not in services:
                    known = False
                    break
        if rebuild or not known:
            plan = self._plan(key, live, messages, rebuild=rebuild)
        t = machine.step(live.state, live.sessions, plan, messages, now, evaluate_posture=self.evaluate_posture)
        return self._carry_out(key, live, t, now)

    def _plan(self, key: str, live: LiveIdentity, messages: Sequence[IdentityMessage], *,
              rebuild: bool) -> IdentityPlan | None:
        """The identity's plan from a snapshot, knowing every service the step needs (None: the identity is gone).
        Built anew when ``rebuild`` (it is no longer valid, or the identity changed: ``Reevaluate``)."""
        with self.domain.read() as ctx:
            if rebuild:
                identity = ctx.txn.get("identities", key)
                live.plan = identity_plan(ctx, identity, self.domain.store) if identity is not None else None
            plan = live.plan
            if plan is not None:
                for ref in live.sessions:
                    plan.service(ctx, ref.service_id)
                for message in messages:
                    if type(message) is CreateSession:
                        plan.service(ctx, message.service_id)
        return plan

    def _carry_out(self, key: str, live: LiveIdentity, t: Transition, now: float) -> LiveIdentity:
        if t.gone:
            self.domain.post_write(lambda ctx: drop_state(ctx, key), ignore_outcome)
            send_replies(t.replies)
            send_replies([(reply, None) for reply in t.settles])
            return LiveIdentity(t.state, ())
        live.state = t.state
        write = live.write
        if t.persist or t.revoke or t.grants or t.clear_pending or t.events:
            if write is None or write.begun:
                write = live.write = StepWrite(self.engine, key)
                self.engine.queue(write)
            write.state = t.state
            if t.clear_pending:
                write.pending_cleared = True
            if t.revoke:
                gone = set(t.revoke)
                live.sessions = tuple(ref for ref in live.sessions if ref.session_id not in gone)
                write.revoke = (write.revoke or []) + t.revoke
                write.revoke_causes = [*(write.revoke_causes or ()), *t.revoke_details]
                revocations = self.engine.revocations
                for cause in t.revoke_causes:
                    revocations[cause] += 1
            if t.decided:
                decided_at = self.domain.clock.now()
                write.lateness = (write.lateness or []) + [(deadline, decided_at, len(t.revoke))
                                                           for deadline in t.decided]
            if t.events:
                write.events = [*(write.events or ()), *t.events]
            if t.grants:
                self._grant(key, live, write, t, now)
            if t.replies:
                # Nobody hears of this step before what it changed is durable; the actor does not wait for that.
                write.replies = (write.replies or []) + t.replies
        elif t.replies:
            send_replies(t.replies)
        if t.existing:
            answer_existing(self.domain.store, live.write, t.existing)
        if t.settles:
            if write is not None and not write.done:
                write.settles = (write.settles or []) + t.settles
            else:
                send_replies([(reply, None) for reply in t.settles])
        return live

    def _grant(self, key: str, live: LiveIdentity, write: StepWrite, t: Transition, now: float) -> None:
        """Queue the sessions the step granted (their ids and tokens are made here); they are the identity's from
        now on."""
        grants = write.grants if write.grants is not None else []
        sessions = live.sessions
        for grant in t.grants:
            session_id = new_id(now)
            request = grant.request
            body = {"apiSessionId": request.api_session_id, "identityId": key, "serviceId": request.service_id,
                    "type": request.session_type, "token": str(uuid.uuid4()), "servicePolicies": grant.policy_ids,
                    "tags": dict(request.tags)}
            events = tuple(Event(e.namespace, e.event_type, {**e.fields, "session_id": session_id})
                           for e in grant.events) if grant.events else ()
            grants.append((session_id, body, grant.replies, events))
            sessions += (SessionRef(session_id, request.api_session_id, request.service_id, request.session_type),)
        write.grants = grants
        live.sessions = sessions
