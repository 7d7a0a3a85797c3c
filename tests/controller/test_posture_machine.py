"""The identity actor's pure state machine and its codec: no Trio, exact values."""

from __future__ import annotations

from typing import Any

import pytest

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
)
from actors.registry import OneShot
from controller.posture.codec import decode_state, encode_state
from controller.posture.machine import (
    MAX_FAILURES,
    Decide,
    IdentityState,
    Persist,
    Reply,
    ReportTimers,
    Revaluate,
    SessionPosture,
    handle,
    mark_timed_out,
    record_failure,
)


def test_posture_responses_update_records_and_ask_for_reevaluation() -> None:
    state = IdentityState("i1")
    responses: tuple[dict[str, Any], ...] = (
        {"id": "c1", "typeId": "OS", "type": "Windows", "version": "10.0.19045", "build": "19045"},
        {"id": "c2", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF", "not-a-mac"]},
        {"id": "c3", "typeId": "DOMAIN", "domain": "corp.example"},
        {"id": "c4", "typeId": "PROCESS", "path": "/bin/agent", "isRunning": True, "hash": "AB:CD",
         "signerFingerprints": ["FF"]},
    )
    new, effects = handle(state, PostureReported("s1", responses), 100.0)
    assert effects == [Persist(), Revaluate()]
    assert new.posture.os is not None and new.posture.os.version == "10.0.19045"
    assert new.posture.os.last_updated_at == 100.0
    assert new.posture.mac is not None and new.posture.mac.addresses == ("aa-bb-cc-dd-ee-ff", "not-a-mac")
    assert new.posture.domain is not None and new.posture.domain.domain == "corp.example"
    assert new.posture.processes["c4"].hash == "abcd"
    assert new.posture.process_paths["/bin/agent"].signer_fingerprints == ("ff",)
    assert new.last_change_at == 100.0
    assert state.posture.os is None  # the old state is untouched


def test_mfa_and_endpoint_state_are_per_api_session() -> None:
    state, _ = handle(IdentityState("i1"), ApiSessionStarted("s1"), 1.0)
    assert state.sessions["s1"] == SessionPosture()
    state, effects = handle(state, MfaPassed("s1"), 10.0)
    assert effects == [Persist(), Revaluate()]
    assert state.sessions["s1"].mfa.passed_mfa_at == 10.0
    state, effects = handle(state, PostureReported("s1", (), woken=True, unlocked=False), 20.0)
    assert state.sessions["s1"].mfa.woken_at == 20.0
    assert state.sessions["s1"].mfa.unlocked_at is None
    assert effects[:2] == [Persist(), Revaluate()] and isinstance(effects[2], ReportTimers)
    state, _ = handle(state, PostureReported("s1", (), woken=False, unlocked=True), 30.0)
    assert state.sessions["s1"].mfa.woken_at == 20.0  # a false flag never clears
    assert state.sessions["s1"].mfa.unlocked_at == 30.0
    state, _ = handle(state, MfaPassed("s2"), 40.0)
    state, _ = handle(state, MfaRemoved(), 50.0)
    assert all(s.mfa.passed_mfa_at is None for s in state.sessions.values())
    state, effects = handle(state, ApiSessionEnded("s1"), 60.0)
    assert "s1" not in state.sessions and effects == [Persist(), Revaluate()]
    assert handle(state, ApiSessionEnded("gone"), 61.0) == (state, [])


def test_mfa_passed_clears_the_sticky_timeout() -> None:
    state, _ = handle(IdentityState("i1"), MfaPassed("s1"), 10.0)
    state = mark_timed_out(state, ["s1", "unknown"])
    assert state.sessions["s1"].mfa.timed_out
    state, _ = handle(state, MfaPassed("s1"), 20.0)
    assert not state.sessions["s1"].mfa.timed_out


def test_deadlines_decisions_and_reads_are_effects() -> None:
    state = IdentityState("i1")
    assert handle(state, DeadlineReached(5.0), 5.0) == (IdentityState("i1", last_change_at=5.0),
                                                        [Persist(), Revaluate()])
    assert handle(state, Reevaluate(), 5.0) == (state, [Revaluate()])
    reply: OneShot[Any] = OneShot()
    request = CreateSession("s1", "svc", "Dial", {}, reply)
    assert handle(state, request, 5.0) == (state, [Decide(request)])
    assert handle(state, ReadState(reply), 5.0) == (state, [Reply(reply, state)])
    with pytest.raises(TypeError):
        handle(state, object(), 5.0)


def test_failures_keep_the_last_fifty() -> None:
    state = IdentityState("i1")
    for n in range(MAX_FAILURES + 7):
        state = record_failure(state, {"n": n})
    assert len(state.failures) == 50
    assert state.failures[0] == {"n": 7}
    assert state.failures[-1] == {"n": 56}


def test_codec_round_trip() -> None:
    state, _ = handle(IdentityState("i1"), PostureReported("s1", (
        {"id": "c1", "typeId": "OS", "type": "Linux", "version": "6.1.0"},
        {"id": "c2", "typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]},
        {"id": "c4", "typeId": "PROCESS", "path": "/bin/a", "isRunning": True, "signerFingerprints": ["ab"]},
    )), 100.0)
    state, _ = handle(state, MfaPassed("s1"), 110.0)
    state, _ = handle(state, PostureReported("s1", (), woken=True, unlocked=True), 120.0)
    state = record_failure(state, {"when": "x"})
    state = mark_timed_out(state, ["s1"])
    assert decode_state("i1", encode_state(state)) == state
    assert decode_state("i9", None) == IdentityState("i9")
