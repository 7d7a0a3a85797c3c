"""The identity actor's state machine: pure and synchronous, ``now`` passed in.

:func:`step` takes the identity's state, its Dial/Bind sessions, its plan (``controller/posture/plan.py``) and every
message queued for it, and returns a :class:`Transition`: the new state (posture data, MFA state per API session,
timed-out marks, failed requests, access digest, next deadline), the sessions to revoke and to create, and what to
answer. Every state change happens here; the shell (``controller/posture/engine.py``) only loads, writes and
replies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from msgspec.structs import replace

from actors.live_actors import OneShot
from controller.clock import format_time
from controller.errors import ApiError, field_cause, not_found
from controller.model.events import Event
from controller.posture import step_events
from controller.posture.decision import decide
from controller.posture.messages import (
    ADOPTED,
    ApiSessionEnded,
    ApiSessionStarted,
    CreateSession,
    DeadlineReached,
    MfaPassed,
    MfaRemoved,
    PostureReported,
    ReadState,
    Reevaluate,
    Settle,
    WriteFailed,
)
from controller.posture.plan import IdentityPlan
from controller.posture.records import MfaState, apply_response
from controller.posture.session_mfa import (
    MAX_API_SESSIONS,
    endpoint_state,
    mfa_of,
    next_deadline,
    timer_changes,
    with_mfa,
)
from controller.posture.state import IdentityState, SessionPosture

__all__ = ["MAX_API_SESSIONS", "MAX_FAILURES", "REVOKE_CAUSES", "Grant", "SessionRef", "Transition", "step"]

MAX_FAILURES = 50
"""Failed session requests kept per identity (the last ones)."""


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A Dial/Bind session of the identity, as re-checking it needs it."""

    session_id: str
    api_session_id: str
    service_id: str
    session_type: str


@dataclass(slots=True)
class Grant:
    """A session request granted: the shell creates the session (its id and token are the shell's) and answers
    every request in ``replies`` with the stored row once it is durable. ``events`` are recorded with the session
    once the shell has given it its id (their ``session_id``)."""

    request: CreateSession
    policy_ids: list[str]
    replies: list[OneShot[Any]]
    events: tuple[Event, ...] = ()


REVOKE_CAUSES = ("policy", "posture", "mfa_timeout")
"""Why a re-check revokes a session: no policy grants its service and type any more; a posture check fails; an MFA
check timed out."""


@dataclass(slots=True)
class Transition:
    """What one step decided. ``replies`` are sent at once unless ``durable``, in which case they wait for the
    step's write (as do the grants' answers and ``settles``). ``existing`` are requests for a session the identity
    already has: answered with its stored row. ``decided`` are the deadlines this step decided on (for lateness).
    ``gone``: the identity no longer exists (its state is dropped). ``revoke_causes`` holds the cause of each of
    ``revoke``, in order (one of :data:`REVOKE_CAUSES`), and ``revoke_details`` the same causes as events name them
    (``controller/posture/step_events.py``). ``events`` are recorded with the step's write."""

    state: IdentityState
    revoke: list[str] = field(default_factory=list)
    revoke_causes: tuple[str, ...] = ()
    revoke_details: tuple[tuple[Any, ...], ...] = ()  # tuples: most steps have none, and allocate nothing
    events: tuple[Event, ...] = ()
    grants: list[Grant] = field(default_factory=list)
    existing: list[tuple[OneShot[Any], str]] = field(default_factory=list)
    replies: list[tuple[OneShot[Any], Any]] = field(default_factory=list)
    settles: list[OneShot[Any]] = field(default_factory=list)
    decided: list[float] = field(default_factory=list)
    persist: bool = False
    clear_pending: bool = False
    gone: bool = False

    @property
    def durable(self) -> bool:
        """The step revokes or creates a session: nobody may hear of the step before its write is durable."""
        return bool(self.revoke or self.grants)


# Session decisions and re-checks ---------------------------------------------------------------------------------


def _criteria_times(entry: dict[str, Any]) -> dict[str, Any]:
    criteria = entry.get("criteria")
    if isinstance(criteria, dict):
        for key in ("passedMfaAt", "wokenAt", "unlockedAt"):
            value = criteria.get(key)
            criteria[key] = format_time(value) if isinstance(value, int | float) else value
    return entry


def _decide(t: Transition, sessions: Sequence[SessionRef], plan: IdentityPlan, request: CreateSession, now: float,
            evaluate_posture: bool) -> None:
    """The order of checks of the reference controller: idempotency, visibility, permission, posture, routers."""
    for ref in sessions:
        if (ref.api_session_id == request.api_session_id and ref.service_id == request.service_id
                and ref.session_type == request.session_type):
            t.existing.append((request.reply, ref.session_id))
            return
    for grant in t.grants:
        earlier = grant.request
        if (earlier.api_session_id == request.api_session_id and earlier.service_id == request.service_id
                and earlier.session_type == request.session_type):
            grant.replies.append(request.reply)
            return
    access = plan.services.get(request.service_id)
    state = t.state
    mfa = mfa_of(state, request.api_session_id)
    decision = decide(access, request.session_type, state.posture, mfa, now, evaluate_posture=evaluate_posture)
    if decision.code == "NOT_FOUND":
        t.replies.append((request.reply, not_found("service", request.service_id)))
        return
    if decision.code == "COULD_NOT_VALIDATE":
        t.replies.append((request.reply, ApiError("COULD_NOT_VALIDATE", field_cause(
            "ServiceId", "service not found", request.service_id))))
        return
    assert access is not None  # decided on a service the identity sees, with a policy of the type
    access_plan = access.plans[request.session_type]
    if decision.code == "INVALID_POSTURE":
        failing = access_plan.failing(decision.verdicts, state.posture, mfa, now)
        cause, failures = access_plan.refusal(failing)
        failure = {"when": format_time(now), "serviceId": access.service_id, "serviceName": access.name,
                   "apiSessionId": request.api_session_id, "sessionType": request.session_type,
                   "policyFailures": [{**f, "checks": [_criteria_times(c) for c in f["checks"]]} for f in failures]}
        t.state = replace(state, failures=(*state.failures, failure)[-MAX_FAILURES:])
        t.persist = True
        t.replies.append((request.reply, ApiError("INVALID_POSTURE", cause)))
        t.events += (step_events.denied(state.identity_id, request.api_session_id, request.service_id,
                                        request.session_type, access_plan.failing_rules(decision.verdicts),
                                        state.posture, mfa, now),)
    elif not decision.granted:
        t.replies.append((request.reply, ApiError(decision.code)))
    else:
        # The grant's event is the session's creation (edge.sessions.created names the policies that pass).
        events: tuple[Event, ...] = ()
        if access_plan.report_only and access_plan.would_deny(decision.verdicts):
            subject = (state.identity_id, request.api_session_id, request.service_id, request.session_type)
            events = (step_events.would_deny(*subject, None, "request", access_plan, decision.verdicts,
                                             state.posture, mfa, now),)
            # Noted for the session it gets, so that re-checks do not report it again.
            t.state = replace(state, would_deny=state.would_deny | {_flag(*subject[1:])})
            t.persist = True
        t.grants.append(Grant(request, list(decision.policy_ids), [request.reply], events))


def _flag(api_session_id: str, service_id: str, session_type: str) -> str:
    """The key of a session in ``IdentityState.would_deny`` (a session is unique per API session, service, type)."""
    return f"{api_session_id}/{service_id}/{session_type}"


def _recheck(t: Transition, sessions: Sequence[SessionRef], plan: IdentityPlan, now: float, *, access: bool,
             evaluate_posture: bool, reason: str, mfa_removed: bool) -> None:
    """Check every session again: revoke those no policy passes any more (with the cause of each), mark API
    sessions whose MFA timed out, note the sessions that report-only checks would revoke (an event the first time),
    and record what the identity may use (its access digest) when ``access`` asks or none is recorded."""
    state = t.state
    if (access or state.access_digest is None) and plan.digest != state.access_digest:
        # Gained or lost a service, a session type or a check: clients must refresh.
        changed_at = now if state.access_digest is not None else state.last_change_at
        state = replace(state, access_digest=plan.digest, last_change_at=changed_at)
        t.persist = True
    timed_out: set[str] = set()
    revoked: dict[str, str] = {}  # session id: its cause (REVOKE_CAUSES)
    posture = state.posture
    flagged = state.would_deny
    would: set[str] | None = None
    for ref in sessions:
        service = plan.services.get(ref.service_id)
        access_plan = service.plans.get(ref.session_type) if service is not None else None
        if access_plan is None:
            revoked[ref.session_id] = "policy"
            t.revoke_details += (step_events.revocation_cause(None, None, posture, None, now, expired=False,
                                                              mfa_removed=mfa_removed, reason=reason),)
            continue
        mfa = mfa_of(state, ref.api_session_id)
        passing, expired, verdicts = access_plan.evaluate(posture, mfa, now, evaluate_posture=evaluate_posture)
        if expired:
            timed_out.add(ref.api_session_id)
        if not passing:
            revoked[ref.session_id] = "mfa_timeout" if expired else "posture"
            t.revoke_details += (step_events.revocation_cause(access_plan, verdicts, posture, mfa, now,
                                                              expired=expired, mfa_removed=mfa_removed,
                                                              reason=reason),)
        elif access_plan.report_only and access_plan.would_deny(verdicts):  # the call only with report-only checks
            key = _flag(ref.api_session_id, ref.service_id, ref.session_type)
            would = would if would is not None else set()
            would.add(key)
            if key not in flagged:
                t.events += (step_events.would_deny(state.identity_id, ref.api_session_id, ref.service_id,
                                                    ref.session_type, ref.session_id, "recheck", access_plan,
                                                    verdicts, posture, mfa, now),)
    if would or flagged:
        # Sessions not checked here (one granted in this very step) keep their mark.
        checked = {_flag(ref.api_session_id, ref.service_id, ref.session_type) for ref in sessions}
        marks = frozenset((flagged - checked) | (would or set()))
        if marks != flagged:
            state = replace(state, would_deny=marks)
            t.persist = True
    if timed_out:
        marked = dict(state.sessions)
        for api_session_id in timed_out:
            current = marked.get(api_session_id)
            if current is not None and not current.mfa.timed_out:
                old = current.mfa
                marked[api_session_id] = SessionPosture(MfaState(old.passed_mfa_at, old.woken_at, old.unlocked_at,
                                                                 True))
        state = replace(state, sessions=marked, last_change_at=now if revoked else state.last_change_at)
        t.persist = True
    elif revoked:
        state = replace(state, last_change_at=now)
    if revoked:
        t.revoke.extend(revoked)
        t.revoke_causes += tuple(revoked.values())
    t.state = state


# The step ----------------------------------------------------------------------------------------------------------


def _gone(state: IdentityState, messages: Sequence[Any]) -> Transition:
    """The identity no longer exists: drop its state; every pending request learns it."""
    t = Transition(IdentityState(state.identity_id), gone=True)
    for message in messages:
        match message:
            case CreateSession(reply=reply):
                t.replies.append((reply, ApiError("UNAUTHORIZED")))
            case ReadState(reply=reply):
                t.replies.append((reply, ApiError("NOT_FOUND")))
            case PostureReported(reply=reply) if reply is not None:
                t.replies.append((reply, []))
            case Settle(reply=reply):
                t.settles.append(reply)
    return t


def step(state: IdentityState, sessions: Sequence[SessionRef], plan: IdentityPlan | None, messages: Sequence[Any],
         now: float, *, evaluate_posture: bool = True) -> Transition:
    """The transition of every message in ``messages``, in order, then one re-check of the sessions if any message
    calls for it. ``plan`` None: the identity no longer exists. The plan must know every service of ``sessions``
    and of the session requests among ``messages`` (``IdentityPlan.service``)."""
    if plan is None:
        return _gone(state, messages)
    t = Transition(state)
    recheck = access = mfa_removed = False
    reason = "policyChange"
    named = False  # a Reevaluate other than an adoption's named the reason
    before = state.deadline
    for message in messages:
        match message:
            case PostureReported(api_session_id, responses, reply, woken, unlocked):
                posture = t.state.posture
                for response in responses:
                    posture, changed = apply_response(posture, response, now, api_session_id)
                    # The same values as before renew their times only: no verdict can change for them.
                    recheck = recheck or changed
                t.state = replace(t.state, posture=posture, last_change_at=now)
                if woken or unlocked:
                    t.state = endpoint_state(t.state, api_session_id, woken, unlocked, now)
                    recheck = True
                if reply is not None:
                    t.replies.append((reply, timer_changes(plan, t.state, api_session_id, woken, unlocked, now)))
                t.persist = True
            case MfaPassed(api_session_id):
                old = mfa_of(t.state, api_session_id) or MfaState()
                t.state = with_mfa(t.state, api_session_id, MfaState(now, old.woken_at, old.unlocked_at), now)
                recheck = t.persist = True
            case MfaRemoved():
                cleared = {k: SessionPosture(replace(v.mfa, passed_mfa_at=None)) for k, v in t.state.sessions.items()}
                t.state = replace(t.state, sessions=cleared, last_change_at=now)
                recheck = t.persist = t.clear_pending = mfa_removed = True
            case ApiSessionStarted(api_session_id):
                if api_session_id not in t.state.sessions:
                    t.state = with_mfa(t.state, api_session_id, MfaState(), None)
                # Re-checking records what the identity may use now, the baseline for telling clients of changes.
                recheck = access = t.persist = True
            case ApiSessionEnded(api_session_id):
                if api_session_id in t.state.sessions:
                    t.state = replace(t.state, sessions={k: v for k, v in t.state.sessions.items()
                                                         if k != api_session_id})
                    recheck = t.persist = True
                if t.state.would_deny:
                    prefix = api_session_id + "/"
                    t.state = replace(t.state, would_deny=frozenset(k for k in t.state.would_deny
                                                                    if not k.startswith(prefix)))
                    t.persist = True
            case DeadlineReached():
                # An MFA timer ran out: the identity's posture changed even if no session needs revoking.
                t.state = replace(t.state, last_change_at=now)
                recheck = t.persist = True
            case Reevaluate(why):
                recheck = access = True
                if why != ADOPTED or not named:  # the change named wins over an adoption's re-check
                    reason, named = why, why != ADOPTED
            case CreateSession() as request:
                _decide(t, sessions, plan, request, now, evaluate_posture)
                recheck = True  # the next deadline may be one this request's checks bring
            case WriteFailed():
                recheck = True  # from the stored state the shell reloaded: what the failed write revoked, again
            case Settle(reply):
                t.settles.append(reply)
            case ReadState(reply):
                t.replies.append((reply, t.state))
            case _:
                raise TypeError(f"unknown identity message {message!r}")
    if recheck:
        _recheck(t, sessions, plan, now, access=access, evaluate_posture=evaluate_posture, reason=reason,
                 mfa_removed=mfa_removed)
        if before is not None and before <= now:
            # The first re-check at or after the deadline decides it (usually the one the deadline prompts; a
            # message that arrives just after the deadline decides it first).
            t.decided.append(before)
        deadline = next_deadline(t.state, plan, now)
        if deadline != t.state.deadline:
            t.state = replace(t.state, deadline=deadline)
            t.persist = True
    return t
