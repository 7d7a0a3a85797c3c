"""Each compiled rule (``controller/posture/rules.py``) gives one answer: its ``verdict`` (the hot path) agrees with
its ``report`` (passing and timed out), and both agree with a reference written here from the rules as the module
states them. Then the access plans built on the rules.

Generated cases of every check type, with the values that sit on each rule's edges (MFA boundaries to the second,
wake and unlock events before and after the MFA, case and separator variants of MACs, domains and hashes, missing
and timed-out records). The posture data is what the identity actor keeps: the generated responses folded in with
:func:`controller.posture.machine.apply_response`; the reference reads the responses as reported.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from msgspec.structs import replace

from controller.check_types.bodies import canonical_mac, clean_hex
from controller.check_types.os_versions import version_matches
from controller.posture.plan import AccessPlan
from controller.posture.records import MFA_GRACE_SECONDS, MfaState, PostureData, apply_response
from controller.posture.rules import FAIL, PASS, TIMED_OUT, Rule, compile_rule, failure_entry

T0 = 1_700_000_000.0
HASHES = ["aa" * 32, "AA" * 32, "bb" * 32, "aa:" * 31 + "aa"]
PRINTS = ["11" * 20, "22" * 20, "11-" * 19 + "11"]
MACS = ["aa:bb:cc:dd:ee:ff", "AA-BB-CC-DD-EE-FF", "aabbccddeeff", "11:22:33:44:55:66", "not-a-mac"]
PATHS = ["C:\\a.exe", "/usr/bin/b", ""]
TYPES = ["MFA", "OS", "MAC", "DOMAIN", "PROCESS", "PROCESS_MULTI", "BOGUS"]


def _outcome(rule: Rule, data: PostureData, mfa: MfaState | None, now: float) -> int:
    """What the rule's report says, as a verdict."""
    report = rule.report(data, mfa, now)
    if report.passing:
        assert not report.timed_out
        return PASS
    return TIMED_OUT if report.timed_out else FAIL


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


class Reported:
    """What an endpoint reported, in wire names (the last response of each kind, the last PROCESS response per
    check id and per path), and which records have since timed out."""

    def __init__(self, responses: Sequence[Mapping[str, Any]], timed_out: frozenset[str]) -> None:
        self.timed_out = timed_out
        self.last: dict[str, Mapping[str, Any]] = {}
        self.process_by_id: dict[str, Mapping[str, Any]] = {}
        self.process_by_path: dict[str, Mapping[str, Any]] = {}
        for response in responses:
            if response["typeId"] == "PROCESS":
                self.process_by_id[response["id"]] = response
                if response["path"]:
                    self.process_by_path[response["path"]] = response
            else:
                self.last[response["typeId"]] = response

    def data(self, responses: Sequence[Mapping[str, Any]]) -> PostureData:
        """The posture data the identity actor keeps for ``responses``, with the timed-out marks applied."""
        data = PostureData()
        for response in responses:
            data, _ = apply_response(data, response, T0)
        if data.os is not None and "OS" in self.timed_out:
            data = replace(data, os=replace(data.os, timed_out=True))
        if data.mac is not None and "MAC" in self.timed_out:
            data = replace(data, mac=replace(data.mac, timed_out=True))
        if data.domain is not None and "DOMAIN" in self.timed_out:
            data = replace(data, domain=replace(data.domain, timed_out=True))
        if "PROCESS" in self.timed_out:
            data = replace(data, processes={k: replace(v, timed_out=True) for k, v in data.processes.items()},
                           process_paths={k: replace(v, timed_out=True) for k, v in data.process_paths.items()})
        return data

    def fresh(self, type_id: str) -> Mapping[str, Any] | None:
        return None if type_id in self.timed_out else self.last.get(type_id)


def _process_response(rng: random.Random, check_id: str) -> dict[str, Any]:
    return {"id": check_id, "typeId": "PROCESS", "path": rng.choice(PATHS), "isRunning": rng.random() < 0.7,
            "hash": rng.choice(["", *HASHES]), "signerFingerprints": _some(rng, PRINTS)}


def _responses(rng: random.Random) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    if rng.random() < 0.8:
        responses.append({"id": "os", "typeId": "OS", "type": rng.choice(["windows", "Windows", "linux"]),
                          "version": rng.choice(["10.5.19041", "10.0.0", "", "x"]),
                          "build": rng.choice([None, "19041", "1"])})
    if rng.random() < 0.8:
        responses.append({"id": "mac", "typeId": "MAC", "macAddresses": _some(rng, MACS)})
    if rng.random() < 0.8:
        responses.append({"id": "domain", "typeId": "DOMAIN",
                          "domain": rng.choice(["corp.example", "CORP.EXAMPLE", "STRASSE.example", "x"])})
    responses += [_process_response(rng, f"c-{i}") for i in range(3) if rng.random() < 0.7]
    responses += [_process_response(rng, "") for _ in range(rng.randint(0, 3))]
    rng.shuffle(responses)
    return responses


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


# The reference: each rule as the rules module states it, on the values as reported. ---------------------------


def _process_meets(response: Mapping[str, Any] | None, hashes: Sequence[str], prints: Sequence[str],
                   timed_out: bool) -> bool:
    if response is None or timed_out or not response["isRunning"]:
        return False
    if hashes and clean_hex(response["hash"]) not in {clean_hex(h) for h in hashes}:
        return False
    reported = {clean_hex(p) for p in response["signerFingerprints"]}
    return not prints or any(clean_hex(p) in reported for p in prints)


def _mfa_reference(check: Mapping[str, Any], mfa: MfaState | None, now: float) -> int:
    if mfa is None or mfa.passed_mfa_at is None:
        return FAIL
    timeout = check.get("timeoutSeconds")
    if mfa.timed_out or (isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0
                         and now >= mfa.passed_mfa_at + timeout):
        return TIMED_OUT
    for prompt, event_at in ((check.get("promptOnWake"), mfa.woken_at),
                             (check.get("promptOnUnlock"), mfa.unlocked_at)):
        if prompt and event_at is not None and event_at >= mfa.passed_mfa_at and now >= event_at + MFA_GRACE_SECONDS:
            return FAIL
    return PASS


def _reference(check: Mapping[str, Any], reported: Reported, mfa: MfaState | None, now: float) -> int:
    match check["typeId"]:
        case "MFA":
            return _mfa_reference(check, mfa, now)
        case "OS":
            os = reported.fresh("OS")
            by_type = {e["type"].lower(): e["versions"] for e in check["operatingSystems"]}  # the last one wins
            versions = None if os is None else by_type.get(os["type"].lower())
            ok = os is not None and versions is not None and version_matches(versions, os["version"], os["build"])
        case "MAC":
            mac = reported.fresh("MAC")
            wanted = {canonical_mac(a) for a in check["macAddresses"]} - {None}
            ok = mac is not None and any(canonical_mac(a) in wanted for a in mac["macAddresses"])
        case "DOMAIN":
            domain = reported.fresh("DOMAIN")
            ok = domain is not None and domain["domain"].casefold() in {d.casefold() for d in check["domains"]}
        case "PROCESS":
            spec = check["process"]
            ok = _process_meets(reported.process_by_id.get(check["id"]), spec["hashes"],
                                [spec["signerFingerprint"]] if spec["signerFingerprint"] else [],
                                "PROCESS" in reported.timed_out)
        case "PROCESS_MULTI":
            met = [bool(spec["path"]) and _process_meets(reported.process_by_path.get(spec["path"]), spec["hashes"],
                                                         spec["signerFingerprints"], "PROCESS" in reported.timed_out)
                   for spec in check["processes"]]
            ok = any(met) if check["semantic"] in ("AnyOf", "OneOf") else all(met)
        case _:
            ok = False
    return PASS if ok else FAIL


@pytest.mark.parametrize("type_id", TYPES)
def test_verdict_agrees_with_report_and_the_rules(type_id: str) -> None:
    rng = random.Random(type_id)
    outcomes = set()
    for _ in range(150):
        check = _check(rng, type_id)
        rule = compile_rule(check)  # one rule for many cases, as an actor keeps it (the OS rule remembers)
        for _ in range(3):
            responses = _responses(rng)
            reported = Reported(responses, frozenset(t for t in ("OS", "MAC", "DOMAIN", "PROCESS")
                                                     if rng.random() < 0.2))
            data, mfa = reported.data(responses), _mfa(rng)
            for now in _instants(rng):
                expected = _reference(check, reported, mfa, now)
                case = (check, responses, reported.timed_out, mfa, now)
                assert rule.verdict(data, mfa, now) == expected, case
                assert _outcome(rule, data, mfa, now) == expected, case
                outcomes.add(expected)
    # The cases reach every outcome the type can have, so the comparison is not vacuous.
    assert outcomes == ({PASS, FAIL, TIMED_OUT} if type_id == "MFA" else {FAIL} if type_id == "BOGUS"
                        else {PASS, FAIL})


# Access plans ----------------------------------------------------------------------------------------------------


class Counting(Rule):
    """A rule with a fixed verdict that counts how often it is asked."""

    __slots__ = ("calls", "result")

    def __init__(self, name: str, result: int, calls: list[str]) -> None:
        super().__init__({"id": name, "name": name, "typeId": "COUNTING"})
        self.result, self.calls = result, calls

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        self.calls.append(str(self.check["id"]))
        return self.result


def _policies(*ids: str) -> tuple[dict[str, Any], ...]:
    return tuple({"id": policy_id, "name": f"policy {policy_id}"} for policy_id in ids)


def test_plan_evaluates_shared_checks_once_and_reports_timeouts_of_every_policy() -> None:
    calls: list[str] = []
    mfa_expired, os_ok = Counting("mfa", TIMED_OUT, calls), Counting("os", PASS, calls)
    plan = AccessPlan(_policies("p1", "p2", "p3"), ((os_ok,), (os_ok, mfa_expired), ()))
    # p1 passes (its one check passes), p2 fails on the timed-out MFA, p3 has no checks and passes.
    assert plan.passing(PostureData(), None, T0) == (["p1", "p3"], True)
    assert calls == ["os", "mfa"]
    assert plan.passing(PostureData(), None, T0, evaluate_posture=False) == (["p1", "p2", "p3"], False)
    assert AccessPlan((), ()).passing(PostureData(), None, T0) == ([], False)


def test_plan_groups_policies_by_their_checks_and_answers_in_the_order_given() -> None:
    calls: list[str] = []
    ok, bad = Counting("ok", PASS, calls), Counting("bad", FAIL, calls)
    # Four policies, two distinct sets of checks ({ok} twice, {ok, bad} twice), not in id order.
    plan = AccessPlan(_policies("d", "a", "c", "b"), ((ok,), (ok, bad), (ok,), (ok, bad)))
    assert len(plan.groups) == 2
    assert plan.passing(PostureData(), None, T0) == (["d", "c"], False)
    assert calls == ["ok", "bad"]
    calls.clear()
    every = AccessPlan(_policies("z", "y"), ((ok,), (ok,)))
    assert every.passing(PostureData(), None, T0) == (["z", "y"], False)  # every check passes
    assert calls == ["ok"]


def test_plan_refusal_names_every_failing_check_of_every_policy() -> None:
    domain = compile_rule({"id": "dom", "name": "domain", "typeId": "DOMAIN", "domains": ["corp"]})
    mfa = compile_rule({"id": "mfa", "name": "mfa", "typeId": "MFA", "timeoutSeconds": 60})
    plan = AccessPlan(_policies("p2", "p1"), ((domain, mfa), (mfa,)))
    data, _ = apply_response(PostureData(), {"id": "d", "typeId": "DOMAIN", "domain": "CORP"}, T0)
    state = MfaState(passed_mfa_at=T0)
    assert plan.passing(data, state, T0 + 60) == ([], True)
    verdicts = plan.evaluate(data, state, T0 + 60)[2]
    cause, failures = plan.refusal(plan.failing(verdicts, data, state, T0 + 60))
    assert cause == {
        "message": "Failed to pass posture checks for service policies: [p2 p1]",
        "data": {"p2": [{"id": "mfa", "typeId": "MFA", "isPassing": False}],
                 "p1": [{"id": "mfa", "typeId": "MFA", "isPassing": False}]},
    }
    expected_check = failure_entry(mfa.check, mfa.report(data, state, T0 + 60))
    assert failures == [{"policyId": "p2", "policyName": "policy p2", "checks": [expected_check]},
                        {"policyId": "p1", "policyName": "policy p1", "checks": [expected_check]}]
    assert expected_check["actualValue"]["timedOut"] is True
