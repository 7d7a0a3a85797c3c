"""Compiled verdicts (``controller/posture/verdict.py``) answer exactly what ``evaluate_check`` answers.

Generated cases of every check type, with the values that sit on each rule's edges (MFA boundaries to the second,
wake and unlock events before and after the MFA, case and separator variants of MACs, domains and hashes, missing
and timed-out records), each compared with the full evaluation.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from controller.posture.evaluate import (
    MFA_GRACE_SECONDS,
    DomainRecord,
    MacRecord,
    MfaState,
    OsRecord,
    PostureData,
    ProcessRecord,
    evaluate_check,
)
from controller.posture.plan import AccessPlan
from controller.posture.verdict import FAIL, PASS, TIMED_OUT, Verdict, compile_check

T0 = 1_700_000_000.0
HASHES = ["aa" * 32, "AA" * 32, "bb" * 32, "aa:" * 31 + "aa"]
PRINTS = ["11" * 20, "22" * 20, "11-" * 19 + "11"]
MACS = ["aa:bb:cc:dd:ee:ff", "AA-BB-CC-DD-EE-FF", "aabbccddeeff", "11:22:33:44:55:66", "not-a-mac"]
PATHS = ["C:\\a.exe", "/usr/bin/b", ""]


def _expected(check: dict[str, Any], data: PostureData, mfa: MfaState | None, now: float) -> int:
    result = evaluate_check(check, data, mfa, now)
    if result.passing:
        assert not result.timed_out
        return PASS
    return TIMED_OUT if result.timed_out else FAIL


def _some(rng: random.Random, values: list[Any], most: int = 3) -> list[Any]:
    return rng.sample(values, rng.randint(0, min(most, len(values))))


def _check(rng: random.Random, type_id: str) -> dict[str, Any]:
    check: dict[str, Any] = {"id": f"c-{rng.randrange(3)}", "name": "c", "typeId": type_id}
    match type_id:
        case "MFA":
            check.update(timeoutSeconds=rng.choice([-1, 0, 60, 600, True]), promptOnWake=rng.random() < 0.5,
                         promptOnUnlock=rng.random() < 0.5)
        case "OS":
            check["operatingSystems"] = [
                {"type": rng.choice(["Windows", "windows", "Linux", "macOS"]),
                 "versions": _some(rng, [">=10.0.0", "<10.5.0", ">=10.0.0 <=10.5.19041", ">=11.0.0"], 2)}
                for _ in range(rng.randint(0, 3))]
        case "MAC":
            check["macAddresses"] = _some(rng, MACS)
        case "DOMAIN":
            check["domains"] = _some(rng, ["corp.example", "CORP.example", "other.example", "straße.example"])
        case "PROCESS":
            check["process"] = {"osType": "Windows", "path": rng.choice(PATHS), "hashes": _some(rng, HASHES),
                                "signerFingerprint": rng.choice(["", *PRINTS])}
        case "PROCESS_MULTI":
            check["semantic"] = rng.choice(["AllOf", "AnyOf", "OneOf", None])
            check["processes"] = [{"osType": "Linux", "path": rng.choice(PATHS), "hashes": _some(rng, HASHES),
                                   "signerFingerprints": _some(rng, PRINTS)} for _ in range(rng.randint(0, 3))]
    return check


def _process(rng: random.Random, check_id: str) -> ProcessRecord:
    return ProcessRecord(rng.choice(PATHS), rng.random() < 0.7, rng.choice(["", *HASHES]), tuple(_some(rng, PRINTS)),
                         T0, check_id, rng.random() < 0.2)


def _data(rng: random.Random) -> PostureData:
    timed_out = rng.random() < 0.2
    os = OsRecord(rng.choice(["windows", "Windows", "linux"]), rng.choice(["10.5.19041", "10.0.0", "", "x"]),
                  rng.choice([None, "19041", "1"]), T0, "", timed_out) if rng.random() < 0.8 else None
    mac = MacRecord(tuple(_some(rng, MACS)), T0, "", timed_out) if rng.random() < 0.8 else None
    domain = (DomainRecord(rng.choice(["corp.example", "CORP.EXAMPLE", "STRASSE.example", "x"]), T0, "", timed_out)
              if rng.random() < 0.8 else None)
    processes = {f"c-{i}": _process(rng, f"c-{i}") for i in range(3) if rng.random() < 0.7}
    paths = {p.path: p for p in (_process(rng, "") for _ in range(rng.randint(0, 3))) if p.path}
    return PostureData(os, mac, domain, processes, paths)


def _mfa(rng: random.Random) -> MfaState | None:
    if rng.random() < 0.1:
        return None
    passed = rng.choice([None, T0, T0])
    event = [None, T0 - 1, T0, T0 + 30]
    return MfaState(passed, rng.choice(event), rng.choice(event), rng.random() < 0.15)


def _instants(rng: random.Random) -> Iterator[float]:
    # On and around every boundary: the 60 s and 600 s timeouts, and the grace after events at T0 and T0 + 30.
    for edge in (0, 60, 600, MFA_GRACE_SECONDS, 30 + MFA_GRACE_SECONDS):
        yield T0 + edge + rng.choice([-0.001, 0, 0.001])


@pytest.mark.parametrize("type_id", ["MFA", "OS", "MAC", "DOMAIN", "PROCESS", "PROCESS_MULTI", "BOGUS"])
def test_verdict_matches_full_evaluation(type_id: str) -> None:
    rng = random.Random(type_id)
    outcomes = set()
    for _ in range(400):
        check = _check(rng, type_id)
        verdict = compile_check(check)
        data, mfa = _data(rng), _mfa(rng)
        for now in _instants(rng):
            expected = _expected(check, data, mfa, now)
            assert verdict(data, mfa, now) == expected, (check, data, mfa, now)
            outcomes.add(expected)
    # The cases reach every outcome the type can have, so the comparison is not vacuous.
    assert outcomes == ({PASS, FAIL, TIMED_OUT} if type_id == "MFA" else {FAIL} if type_id == "BOGUS"
                        else {PASS, FAIL})


def _counting(result: int, calls: list[str], name: str) -> Verdict:
    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        calls.append(name)
        return result
    return verdict


def test_plan_evaluates_shared_checks_once_and_reports_timeouts_of_every_policy() -> None:
    calls: list[str] = []
    mfa_expired, os_ok = _counting(TIMED_OUT, calls, "mfa"), _counting(PASS, calls, "os")
    plan = AccessPlan(("p1", "p2", "p3"), ((("os", os_ok),), (("os", os_ok), ("mfa", mfa_expired)), ()))
    # p1 passes (its one check passes), p2 fails on the timed-out MFA, p3 has no checks and passes.
    assert plan.passing(PostureData(), None, T0) == (["p1", "p3"], True)
    assert calls == ["os", "mfa"]
    assert plan.passing(PostureData(), None, T0, evaluate_posture=False) == (["p1", "p2", "p3"], False)
    assert AccessPlan((), ()).passing(PostureData(), None, T0) == ([], False)
