"""An identity's MFA and endpoint state per API session, and the MFA deadline it leads to: pure functions over
:class:`~controller.posture.state.IdentityState` that the state machine (``controller/posture/machine.py``) steps
with."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from controller.posture.plan import IdentityPlan
from controller.posture.records import MFA_GRACE_SECONDS, MfaState
from controller.posture.state import IdentityState, SessionPosture

__all__ = ["MAX_API_SESSIONS", "endpoint_state", "mfa_of", "next_deadline", "timer_changes", "with_mfa"]

MAX_API_SESSIONS = 256
"""API sessions whose MFA and endpoint state an identity keeps; past that the oldest is forgotten (it loses its
MFA pass: the bound fails closed)."""


def mfa_of(state: IdentityState, api_session_id: str) -> MfaState | None:
    """The API session's MFA state (None: the identity keeps none for it)."""
    session = state.sessions.get(api_session_id)
    return session.mfa if session is not None else None


def with_mfa(state: IdentityState, api_session_id: str, mfa: MfaState, now: float | None) -> IdentityState:
    """``state`` with the API session's MFA state set (at most :data:`MAX_API_SESSIONS` kept)."""
    sessions = {**state.sessions, api_session_id: SessionPosture(mfa)}
    while len(sessions) > MAX_API_SESSIONS:
        del sessions[next(iter(sessions))]
    if now is None:
        return replace(state, sessions=sessions)
    return replace(state, sessions=sessions, last_change_at=now)


def endpoint_state(state: IdentityState, api_session_id: str, woken: bool, unlocked: bool,
                   now: float) -> IdentityState:
    """The API session's endpoint woke and/or was unlocked at ``now`` (only True flags count)."""
    old = mfa_of(state, api_session_id) or MfaState()
    mfa = MfaState(old.passed_mfa_at, now if woken else old.woken_at, now if unlocked else old.unlocked_at,
                   old.timed_out)
    return with_mfa(state, api_session_id, mfa, now)


def timer_changes(plan: IdentityPlan, state: IdentityState, api_session_id: str, woken: bool, unlocked: bool,
                  now: float) -> list[dict[str, Any]]:
    """Services whose MFA timer a wake/unlock just started (only after this session passed MFA): the first check
    of each service that prompts on the event and whose own timeout is not due within the grace."""
    mfa = mfa_of(state, api_session_id)
    if mfa is None or mfa.passed_mfa_at is None or not (woken or unlocked):
        return []
    since = now - mfa.passed_mfa_at
    found: list[dict[str, Any]] = []
    for service_id, name, prompts in plan.prompts:
        for prompt in prompts:
            prompted = (woken and prompt.on_wake) or (unlocked and prompt.on_unlock)
            if prompted and (prompt.timeout <= 0 or prompt.timeout - since > MFA_GRACE_SECONDS):
                found.append({"id": service_id, "name": name, "postureQueryType": "MFA",
                              "timeout": prompt.timeout, "timeoutRemaining": MFA_GRACE_SECONDS})
                break
    return found


def next_deadline(state: IdentityState, plan: IdentityPlan, now: float) -> float | None:
    """The earliest instant at which a currently passing MFA check of this identity will start failing."""
    found: float | None = None
    for session in state.sessions.values():
        mfa = session.mfa
        if mfa.passed_mfa_at is None or mfa.timed_out:
            continue
        for rule in plan.mfa_rules:
            at = rule.deadline(mfa)
            if at is not None and at > now and (found is None or at < found):
                found = at
    return found
