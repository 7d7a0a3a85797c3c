"""The identity actor's pure state machine: ``handle(state, message, now) -> (state, effects)``.

The state is everything the posture engine knows about one identity: its posture data, the MFA state of each of its
API sessions, the last 50 failed service requests, when its service list last changed, and the next deadline. The
transitions here never read storage or the clock; what needs the current policies (deciding a session,
re-evaluating, working out the next MFA deadline) is asked for as an effect and done by the shell
(``controller/posture/engine.py``), which applies the pure helpers below to the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec.structs import replace

from actors.messages import (
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
)
from actors.registry import OneShot
from controller.posture.evaluate import DomainRecord, MacRecord, MfaState, OsRecord, PostureData, ProcessRecord
from controller.posture.normalize import canonical_mac, clean_hex

__all__ = [
    "MAX_FAILURES",
    "MAX_PROCESSES",
    "PERSIST",
    "REVALUATE",
    "REVALUATE_ACCESS",
    "ClearPendingRemoval",
    "Decide",
    "Effect",
    "IdentityState",
    "Persist",
    "Reply",
    "ReportTimers",
    "Revaluate",
    "SessionPosture",
    "apply_response",
    "handle",
    "mark_timed_out",
    "record_failure",
]

MAX_FAILURES = 50
MAX_PROCESSES = 64
"""PROCESS responses kept per identity (by check id, and by path)."""


class SessionPosture(msgspec.Struct, frozen=True, gc=False):
    """Per API session: its MFA state. (What the session reported at login, such as its SDK, is on its durable
    API-session row, written before the login is answered.) A Struct for the reasons the posture records are
    (``controller/posture/evaluate.py``)."""

    mfa: MfaState = msgspec.field(default_factory=MfaState)


class IdentityState(msgspec.Struct, frozen=True, gc=False):
    """Everything the posture engine keeps for one identity (persisted after every change). A Struct for the
    reasons the posture records are (``controller/posture/evaluate.py``)."""

    identity_id: str
    posture: PostureData = msgspec.field(default_factory=PostureData)
    sessions: Mapping[str, SessionPosture] = msgspec.field(default_factory=dict)
    failures: tuple[Mapping[str, Any], ...] = ()
    last_change_at: float | None = None
    deadline: float | None = None
    access_digest: str | None = None


# Effects: what the shell must do after a transition ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Persist:
    """Write the new state to storage."""


@dataclass(frozen=True, slots=True)
class Revaluate:
    """Check every Dial/Bind session of the identity against the policies; delete those that now fail.

    ``access`` asks to work out again what the identity may use (its access digest) too: only policies, checks or
    the identity's roles can change that, so :class:`Reevaluate` sets it, and a login does (the identity may have
    had no API session, and so no re-evaluation, when its access last changed); posture, MFA and deadline
    transitions leave it alone, which spares them the policy walk. It qualifies how the shell carries the effect
    out, not what the effect is, so it takes no part in equality.
    """

    access: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class Decide:
    """Decide a session request (and record a failure for posture)."""

    request: CreateSession


@dataclass(frozen=True, slots=True)
class ReportTimers:
    """Answer an endpoint-state report with the services whose MFA timers it changed."""

    api_session_id: str
    woken: bool
    unlocked: bool
    reply: OneShot[Any] | None


@dataclass(frozen=True, slots=True)
class Reply:
    reply: OneShot[Any]
    value: Any


@dataclass(frozen=True, slots=True)
class ClearPendingRemoval:
    """The MFA removal recorded for the actor (``record_mfa_removal`` in ``controller/posture/engine.py``) is
    handled: delete its record in this step's write."""


Effect = Persist | Revaluate | Decide | ReportTimers | Reply | ClearPendingRemoval

# The effects without a payload, shared: a step allocates as little as it can for the collector (a step waiting for
# its commit holds its effects).
PERSIST = Persist()
REVALUATE = Revaluate()
REVALUATE_ACCESS = Revaluate(access=True)


# Pure helpers ---------------------------------------------------------------------------------------------------


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _bounded(records: Mapping[str, ProcessRecord], key: str, record: ProcessRecord) -> dict[str, ProcessRecord]:
    """``records`` with ``key`` set, the oldest entries dropped beyond :data:`MAX_PROCESSES`."""
    out = {k: v for k, v in records.items() if k != key}
    while len(out) >= MAX_PROCESSES:
        del out[next(iter(out))]
    out[key] = record
    return out


def apply_response(posture: PostureData, response: Mapping[str, Any], now: float) -> PostureData:
    """Fold one posture response (OS, MAC, DOMAIN or PROCESS, in wire names) into the identity's data. PROCESS
    data is kept for the :data:`MAX_PROCESSES` checks and paths reported last: an endpoint cannot grow its stored
    state without bound by reporting under made-up ids and paths."""
    check_id = str(response.get("id", ""))
    match response.get("typeId"):
        case "OS":
            record = OsRecord(str(response.get("type", "")), str(response.get("version", "")),
                              response.get("build"), now, check_id)
            return replace(posture, os=record)
        case "MAC":
            addresses = tuple(canonical_mac(a) or a.lower() for a in _strings(response.get("macAddresses")))
            return replace(posture, mac=MacRecord(addresses, now, check_id))
        case "DOMAIN":
            return replace(posture, domain=DomainRecord(str(response.get("domain", "")), now, check_id))
        case "PROCESS":
            process = ProcessRecord(str(response.get("path") or ""), bool(response.get("isRunning")),
                                    clean_hex(str(response.get("hash") or "")),
                                    tuple(clean_hex(f) for f in _strings(response.get("signerFingerprints"))),
                                    now, check_id)
            processes = _bounded(posture.processes, check_id, process)
            paths = _bounded(posture.process_paths, process.path, process) if process.path else posture.process_paths
            return replace(posture, processes=processes, process_paths=paths)
    return posture


def _with_session(state: IdentityState, api_session_id: str, session: SessionPosture,
                  **changes: Any) -> IdentityState:
    return replace(state, sessions={**state.sessions, api_session_id: session}, **changes)


def record_failure(state: IdentityState, entry: Mapping[str, Any]) -> IdentityState:
    """Append a failed service request, keeping the last :data:`MAX_FAILURES` (oldest dropped first)."""
    return replace(state, failures=(*state.failures, entry)[-MAX_FAILURES:])


def mark_timed_out(state: IdentityState, api_session_ids: Sequence[str], **changes: Any) -> IdentityState:
    """Set the sticky MFA ``timedOut`` flag of the given API sessions (and apply ``changes`` in the same copy)."""
    sessions = dict(state.sessions)
    for session_id in api_session_ids:
        current = sessions.get(session_id)
        if current is not None and not current.mfa.timed_out:
            old = current.mfa
            mfa = MfaState(passed_mfa_at=old.passed_mfa_at, woken_at=old.woken_at, unlocked_at=old.unlocked_at,
                           timed_out=True)
            sessions[session_id] = SessionPosture(mfa)
    return replace(state, sessions=sessions, **changes)


def _endpoint_state(state: IdentityState, api_session_id: str, woken: bool, unlocked: bool,
                    now: float) -> IdentityState:
    """The API session's endpoint woke and/or was unlocked at ``now`` (only True flags count)."""
    session = state.sessions.get(api_session_id, SessionPosture())
    old = session.mfa
    mfa = MfaState(passed_mfa_at=old.passed_mfa_at, woken_at=now if woken else old.woken_at,
                   unlocked_at=now if unlocked else old.unlocked_at, timed_out=old.timed_out)
    return _with_session(state, api_session_id, SessionPosture(mfa), last_change_at=now)


def handle(state: IdentityState, message: Any, now: float) -> tuple[IdentityState, list[Effect]]:
    """The transition of one message. Effects are carried out by the shell in order."""
    match message:
        case PostureReported(api_session_id, responses, reply, woken, unlocked):
            posture = state.posture
            for response in responses:
                posture = apply_response(posture, response, now)
            state = replace(state, posture=posture, last_change_at=now)
            if woken or unlocked:
                state = _endpoint_state(state, api_session_id, woken, unlocked, now)
                return state, [PERSIST, REVALUATE, ReportTimers(api_session_id, woken, unlocked, reply)]
            effects: list[Effect] = [PERSIST, REVALUATE]
            if reply is not None:
                effects.append(Reply(reply, []))
            return state, effects
        case MfaPassed(api_session_id):
            session = state.sessions.get(api_session_id, SessionPosture())
            old = session.mfa
            mfa = MfaState(passed_mfa_at=now, woken_at=old.woken_at, unlocked_at=old.unlocked_at, timed_out=False)
            new = _with_session(state, api_session_id, SessionPosture(mfa), last_change_at=now)
            return new, [PERSIST, REVALUATE]
        case MfaRemoved():
            sessions = {k: replace(v, mfa=replace(v.mfa, passed_mfa_at=None)) for k, v in state.sessions.items()}
            return replace(state, sessions=sessions, last_change_at=now), [PERSIST, REVALUATE, ClearPendingRemoval()]
        case ApiSessionStarted(api_session_id):
            current = state.sessions.get(api_session_id, SessionPosture())
            # Re-evaluating records what the identity may use now, the baseline for telling clients of changes.
            new = _with_session(state, api_session_id, current)
            return new, [PERSIST, REVALUATE_ACCESS]
        case ApiSessionEnded(api_session_id):
            if api_session_id not in state.sessions:
                return state, []
            sessions = {k: v for k, v in state.sessions.items() if k != api_session_id}
            return replace(state, sessions=sessions), [PERSIST, REVALUATE]
        case DeadlineReached():
            # An MFA timer ran out: the identity's posture changed even if no session needs revoking.
            return replace(state, last_change_at=now), [PERSIST, REVALUATE]
        case Reevaluate():
            return state, [REVALUATE_ACCESS]
        case CreateSession() as request:
            return state, [Decide(request)]
        case Settle(reply):
            return state, [Reply(reply, None)]
        case ReadState(reply):
            return state, [Reply(reply, state)]
    raise TypeError(f"unknown identity message {message!r}")
