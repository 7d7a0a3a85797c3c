"""Evaluation of MFA posture checks: passing, timeouts, the grace period after wake and unlock, deadlines and the
numbers clients see. (The other check types are in ``tests/controller/test_posture_evaluate.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from controller.posture.records import (
    MFA_GRACE_SECONDS,
    DomainRecord,
    MfaState,
    PostureData,
    mfa_timeout,
    mfa_timeout_remaining,
)
from controller.posture.rules import CheckResult, MfaRule, compile_rule, evaluate_check, failure_entry

T0 = 1_700_000_000.0
EMPTY = PostureData()


def _mfa_check(timeout: int = -1, wake: bool = False, unlock: bool = False, legacy: bool = False) -> dict[str, Any]:
    return {"id": "m1", "name": "mfa", "typeId": "MFA", "timeoutSeconds": timeout, "promptOnWake": wake,
            "promptOnUnlock": unlock, "ignoreLegacyEndpoints": legacy}


def _with_event(mfa: MfaState, event: str, at: float) -> MfaState:
    return replace(mfa, woken_at=at) if event == "woken_at" else replace(mfa, unlocked_at=at)


def _mfa_passing(check: dict[str, Any], mfa: MfaState | None, now: float) -> bool:
    return evaluate_check(check, EMPTY, mfa, now).passing


def mfa_deadline(check: dict[str, Any], mfa: MfaState) -> float | None:
    """The instant the MFA check starts failing for ``mfa``, as its compiled rule tells it."""
    rule = compile_rule(check)
    assert isinstance(rule, MfaRule)
    return rule.deadline(mfa)


def test_mfa_requires_passed_mfa() -> None:
    check = _mfa_check()
    assert _mfa_passing(check, None, T0) is False
    assert _mfa_passing(check, MfaState(), T0) is False
    assert _mfa_passing(check, MfaState(passed_mfa_at=T0), T0) is True
    assert _mfa_passing(check, MfaState(passed_mfa_at=T0), T0 + 10**9) is True


@pytest.mark.parametrize("timeout", [0, -1])
def test_mfa_no_timeout_never_expires(timeout: int) -> None:
    mfa = MfaState(passed_mfa_at=T0)
    assert _mfa_passing(_mfa_check(timeout), mfa, T0 + 10**9) is True
    assert mfa_deadline(_mfa_check(timeout), mfa) is None


@pytest.mark.parametrize(("offset", "passing"), [(0, True), (599, True), (599.999, True), (600, False), (601, False)])
def test_mfa_timeout_boundary(offset: float, passing: bool) -> None:
    check = _mfa_check(600)
    mfa = MfaState(passed_mfa_at=T0)
    result = evaluate_check(check, EMPTY, mfa, T0 + offset)
    assert (result.passing, result.timed_out) == (passing, not passing)
    assert mfa_deadline(check, mfa) == T0 + 600


def test_mfa_sticky_timed_out_fails_until_next_mfa() -> None:
    check = _mfa_check(600)
    result = evaluate_check(check, EMPTY, MfaState(passed_mfa_at=T0, timed_out=True), T0 + 1)
    assert (result.passing, result.timed_out) == (False, True)
    # A check without a timeout still honours the sticky flag (set while it had one).
    assert _mfa_passing(_mfa_check(-1), MfaState(passed_mfa_at=T0, timed_out=True), T0 + 1) is False


@pytest.mark.parametrize("event", ["woken_at", "unlocked_at"])
@pytest.mark.parametrize(
    ("event_offset", "now_offset", "passing"),
    [
        (100, 100, True),
        (100, 399.5, True),
        (100, 400, False),
        (0, 300, False),  # an event at the very instant of the MFA counts
        (-1, 10_000, True),  # an event before the last MFA is ignored
    ],
)
def test_mfa_grace_period(event: str, event_offset: float, now_offset: float, passing: bool) -> None:
    prompt = {"wake": event == "woken_at", "unlock": event == "unlocked_at"}
    check = _mfa_check(-1, **prompt)
    mfa = _with_event(MfaState(passed_mfa_at=T0), event, T0 + event_offset)
    assert _mfa_passing(check, mfa, T0 + now_offset) is passing


@pytest.mark.parametrize("event", ["woken_at", "unlocked_at"])
def test_mfa_event_without_prompt_is_ignored(event: str) -> None:
    mfa = _with_event(MfaState(passed_mfa_at=T0), event, T0 + 1)
    assert _mfa_passing(_mfa_check(-1), mfa, T0 + 10_000) is True
    assert mfa_deadline(_mfa_check(-1), mfa) is None


@pytest.mark.parametrize(
    ("check", "mfa", "deadline"),
    [
        (_mfa_check(600), MfaState(passed_mfa_at=T0), T0 + 600),
        (_mfa_check(600, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 100), T0 + 400),
        (_mfa_check(600, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 500), T0 + 600),
        (_mfa_check(-1, wake=True, unlock=True), MfaState(T0, woken_at=T0 + 50, unlocked_at=T0 + 20), T0 + 320),
        (_mfa_check(-1, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 - 1), None),
        (_mfa_check(-1, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0), T0 + 300),
        (_mfa_check(-1, unlock=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 5), None),
        (_mfa_check(600), MfaState(), None),
    ],
)
def test_mfa_deadline(check: dict[str, Any], mfa: MfaState, deadline: float | None) -> None:
    assert mfa_deadline(check, mfa) == deadline
    if deadline is not None:
        # Passing just before the deadline, failing at it.
        assert _mfa_passing(check, mfa, deadline - 0.001) is True
        assert _mfa_passing(check, mfa, deadline) is False


@pytest.mark.parametrize(("timeout", "reported"), [(600, 600), (1, 1), (0, -1), (-1, -1), (-5, -1)])
def test_mfa_timeout(timeout: int, reported: int) -> None:
    assert mfa_timeout(_mfa_check(timeout)) == reported


@pytest.mark.parametrize(
    ("check", "mfa", "now", "remaining"),
    [
        (_mfa_check(600), MfaState(passed_mfa_at=T0), T0, 600),
        (_mfa_check(600), MfaState(passed_mfa_at=T0), T0 + 0.9, 600),
        (_mfa_check(600), MfaState(passed_mfa_at=T0), T0 + 100.5, 500),
        (_mfa_check(600), MfaState(passed_mfa_at=T0), T0 + 600, 0),
        (_mfa_check(600), MfaState(passed_mfa_at=T0), T0 + 5000, 0),
        (_mfa_check(-1), MfaState(passed_mfa_at=T0), T0, -1),
        (_mfa_check(0), None, T0, -1),
        (_mfa_check(600), None, T0, 0),
        (_mfa_check(600), MfaState(), T0, 0),
        # Grace helper anchors: event now -> 300, 3 minutes ago -> 120, 5 minutes or more ago -> 0.
        (_mfa_check(5000, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 1000), T0 + 1000, 300),
        (_mfa_check(5000, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 1000), T0 + 1180, 120),
        (_mfa_check(5000, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 1000), T0 + 1300, 0),
        (_mfa_check(5000, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 1000), T0 + 2000, 0),
        (_mfa_check(5000, unlock=True), MfaState(passed_mfa_at=T0, unlocked_at=T0 + 1000), T0 + 1180, 120),
        # The timeout still wins when it is nearer than the end of the grace period.
        (_mfa_check(600, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 + 500), T0 + 550, 50),
        # Events without the prompt, or before the MFA, do not shorten it.
        (_mfa_check(5000), MfaState(passed_mfa_at=T0, woken_at=T0 + 1000), T0 + 1180, 3820),
        (_mfa_check(5000, wake=True), MfaState(passed_mfa_at=T0, woken_at=T0 - 10), T0 + 180, 4820),
    ],
)
def test_mfa_timeout_remaining(check: dict[str, Any], mfa: MfaState | None, now: float, remaining: int) -> None:
    assert mfa_timeout_remaining(check, mfa, now) == remaining


def test_mfa_timeout_remaining_legacy() -> None:
    mfa = MfaState(passed_mfa_at=T0)
    assert mfa_timeout_remaining(_mfa_check(600, legacy=True), mfa, T0 + 100, legacy=True) == -1
    assert mfa_timeout_remaining(_mfa_check(600, legacy=True), mfa, T0 + 100) == 500
    assert mfa_timeout_remaining(_mfa_check(600), mfa, T0 + 100, legacy=True) == 500
    # No MFA beats the legacy rule.
    assert mfa_timeout_remaining(_mfa_check(600, legacy=True), None, T0, legacy=True) == 0


def test_mfa_values_without_mfa() -> None:
    check = _mfa_check(600, wake=True)
    result = evaluate_check(check, EMPTY, None, T0)
    assert result == CheckResult(
        passing=False,
        actual_value={"passedMfa": False, "passedOnWake": False, "passedOnUnlock": True, "timedOut": True},
        expected_value={"passedMfa": True, "passedOnWake": True, "passedOnUnlock": False, "timedOut": False},
        timed_out=False,
        criteria={"passedMfaAt": None, "wokenAt": None, "unlockedAt": None, "timeoutSeconds": 600,
                  "timeoutRemainingSeconds": 0},
    )


def test_mfa_values_and_failure_entry_after_grace() -> None:
    check = _mfa_check(5000, unlock=True)
    mfa = MfaState(passed_mfa_at=T0, unlocked_at=T0 + 10)
    result = evaluate_check(check, EMPTY, mfa, T0 + 10 + MFA_GRACE_SECONDS)
    assert failure_entry(check, result) == {
        "postureCheckId": "m1",
        "postureCheckName": "mfa",
        "postureCheckType": "MFA",
        "actualValue": {"passedMfa": True, "passedOnWake": True, "passedOnUnlock": False, "timedOut": False},
        "expectedValue": {"passedMfa": True, "passedOnWake": False, "passedOnUnlock": True, "timedOut": False},
        "criteria": {"passedMfaAt": T0, "wokenAt": None, "unlockedAt": T0 + 10, "timeoutSeconds": 5000,
                     "timeoutRemainingSeconds": 0},
    }


def test_mfa_values_timed_out() -> None:
    result = evaluate_check(_mfa_check(60), EMPTY, MfaState(passed_mfa_at=T0), T0 + 61)
    assert result.actual_value == {"passedMfa": True, "passedOnWake": True, "passedOnUnlock": True, "timedOut": True}
    assert result.timed_out is True


def test_mfa_state_is_ignored_by_other_types() -> None:
    check = {"id": "d1", "name": "d", "typeId": "DOMAIN", "domains": ["corp"]}
    data = PostureData(domain=DomainRecord(domain="corp"))
    assert evaluate_check(check, data, None, T0).passing is True
    assert evaluate_check(check, data, MfaState(), T0).passing is True
