"""The posture rules, each written once: a check row compiled into a :class:`Rule` that answers both the pass/fail
verdict (the hot path: every re-check of an identity's sessions) and the full report (a refused session request,
the client's posture queries).

Rules per type (a check is the stored row in wire names, as ``controller/check_types/bodies.py`` stores it):

* OS: the reported type (case-insensitive) must be listed; its ``versions`` empty, or the reported version within
  one range (:func:`controller.check_types.os_versions.version_matches`, build rule included);
* MAC: a reported address equals a check address after :func:`~controller.check_types.bodies.canonical_mac`;
* DOMAIN: the reported domain equals a listed one case-insensitively (no trimming, no suffix matching);
* PROCESS: the record submitted for this check id is running and matches the hashes / signer fingerprint
  (case-insensitive; empty means any);
* PROCESS_MULTI: per listed process the latest record for its exact path is running and matches its hashes /
  fingerprints; ``AllOf`` needs every process (an empty path fails), ``AnyOf`` one;
* MFA: MFA passed on this API session, not timed out (fails from ``passedMfaAt + timeoutSeconds`` inclusive,
  timeouts ≤ 0 never expire, a sticky ``timed_out`` fails), and no wake/unlock at or after the MFA whose 300-second
  grace has run out (when the check prompts on it).

Missing or timed-out data fails. An unknown ``typeId`` fails with no values. A check marked ``reportOnly`` is
evaluated like any other; the plans (``controller/posture/plan.py``) count its failures as passes when they decide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.check_types.bodies import canonical_mac, clean_hex
from controller.check_types.os_versions import version_matches
from controller.posture.records import (
    MFA_GRACE_SECONDS,
    MfaState,
    PostureData,
    ProcessRecord,
    mfa_timeout,
    mfa_timeout_remaining,
    prompt_expired,
)

__all__ = ["FAIL", "PASS", "TIMED_OUT", "CheckResult", "MfaRule", "Rule", "compile_rule", "evaluate_check",
           "failure_entry", "process_meets"]

PASS: Final = 0
FAIL: Final = 1
TIMED_OUT: Final = 2
"""Failing because the MFA timeout elapsed (or had: the API session's flag is sticky)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The report of one check.

    ``actual_value``/``expected_value`` have the shapes of a failed service request's check entry (see
    :func:`failure_entry`). For MFA, ``timed_out`` says the MFA timeout has elapsed (or had, sticky) and
    ``criteria`` holds ``passedMfaAt``, ``wokenAt``, ``unlockedAt`` (epoch seconds or None; format them for the
    wire), ``timeoutSeconds`` and ``timeoutRemainingSeconds``; for other types they are False and None.
    """

    passing: bool
    actual_value: Any
    expected_value: Any
    timed_out: bool = False
    criteria: dict[str, Any] | None = None


class Rule:
    """A compiled check (its row must not change afterwards). ``report_only``: the check's failures are reported,
    never enforced (its ``reportOnly`` field)."""

    __slots__ = ("check", "header", "report_only")

    def __init__(self, check: Mapping[str, Any]) -> None:
        self.check = check
        self.report_only = bool(check.get("reportOnly"))
        # What events say of this check when it fails, made on first need (controller/posture/causes.py).
        self.header: tuple[Any, ...] | None = None

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        """:data:`PASS`, :data:`FAIL` or :data:`TIMED_OUT`, as :meth:`report` would say it."""
        return FAIL

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        """Whether the check passes, with the values compared."""
        return CheckResult(False, None, None)


class MfaRule(Rule):
    __slots__ = ("timeout", "unlock", "wake")

    def __init__(self, check: Mapping[str, Any]) -> None:
        super().__init__(check)
        self.timeout = mfa_timeout(check)  # -1 when the check has none
        self.wake, self.unlock = bool(check.get("promptOnWake")), bool(check.get("promptOnUnlock"))

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        if mfa is None or (passed := mfa.passed_mfa_at) is None:
            return FAIL  # never passed: failing, but not "timed out"
        timeout = self.timeout
        if mfa.timed_out or (timeout > 0 and now >= passed + timeout):
            return TIMED_OUT
        if prompt_expired(self.wake, mfa.woken_at, passed, now) or prompt_expired(self.unlock, mfa.unlocked_at,
                                                                                  passed, now):
            return FAIL
        return PASS

    def deadline(self, mfa: MfaState) -> float | None:
        """The first instant at which this check fails for ``mfa`` (at which :meth:`verdict` already fails), or
        None when nothing will make it fail (or MFA never passed: it fails already).

        The earliest of ``passedMfaAt + timeoutSeconds`` (timeout > 0), ``wokenAt + 300`` (``promptOnWake`` and the
        wake at or after the last MFA) and ``unlockedAt + 300`` (likewise). Only meaningful while the check passes.
        """
        passed = mfa.passed_mfa_at
        if passed is None:
            return None
        found: float | None = passed + self.timeout if self.timeout > 0 else None
        for prompt, event_at in ((self.wake, mfa.woken_at), (self.unlock, mfa.unlocked_at)):
            if prompt and event_at is not None and event_at >= passed:
                at = event_at + MFA_GRACE_SECONDS
                found = at if found is None or at < found else found
        return found

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        check, wake, unlock = self.check, self.wake, self.unlock
        expected = {"passedMfa": True, "passedOnWake": wake, "passedOnUnlock": unlock, "timedOut": False}
        criteria: dict[str, Any] = {
            "passedMfaAt": None if mfa is None else mfa.passed_mfa_at,
            "wokenAt": None if mfa is None else mfa.woken_at,
            "unlockedAt": None if mfa is None else mfa.unlocked_at,
            "timeoutSeconds": check.get("timeoutSeconds", -1),
            "timeoutRemainingSeconds": mfa_timeout_remaining(check, mfa, now),
        }
        verdict = self.verdict(data, mfa, now)
        if mfa is None or mfa.passed_mfa_at is None:
            # The reference reports timedOut=true when there is no MFA at all; prompts that are off count as passed.
            actual = {"passedMfa": False, "passedOnWake": not wake, "passedOnUnlock": not unlock, "timedOut": True}
            return CheckResult(False, actual, expected, timed_out=False, criteria=criteria)
        passed = mfa.passed_mfa_at
        actual = {"passedMfa": True, "passedOnWake": not prompt_expired(wake, mfa.woken_at, passed, now),
                  "passedOnUnlock": not prompt_expired(unlock, mfa.unlocked_at, passed, now),
                  "timedOut": verdict == TIMED_OUT}
        return CheckResult(verdict == PASS, actual, expected, timed_out=verdict == TIMED_OUT, criteria=criteria)


_REMEMBERED = 1024
"""Reported OS versions whose verdict an OS rule remembers: a fleet reports few distinct ones."""


class _OsRule(Rule):
    __slots__ = ("by_type", "expected", "known")

    def __init__(self, check: Mapping[str, Any]) -> None:
        super().__init__(check)
        self.expected = [{"type": e.get("type"), "versions": list(e.get("versions") or [])}
                         for e in check.get("operatingSystems") or []]
        # Keyed by lower-cased type, last entry wins: clients report "windows", checks store "Windows".
        self.by_type = {str(e["type"]).lower(): e["versions"] for e in self.expected}
        self.known: dict[tuple[str, str, str | None], int] = {}

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        record = data.os
        if record is None or record.timed_out:
            return FAIL
        key = (record.type, record.version, record.build)
        found = self.known.get(key)
        if found is None:
            versions = self.by_type.get(record.type.lower())
            found = PASS if versions is not None and version_matches(versions, record.version,
                                                                      record.build) else FAIL
            if len(self.known) >= _REMEMBERED:
                self.known.clear()
            self.known[key] = found
        return found

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        record = data.os
        actual = {"type": "" if record is None else record.type, "version": "" if record is None else record.version}
        return CheckResult(self.verdict(data, mfa, now) == PASS, actual, self.expected)


class _MacRule(Rule):
    __slots__ = ("expected", "wanted")

    def __init__(self, check: Mapping[str, Any]) -> None:
        super().__init__(check)
        self.expected = [canonical_mac(a) or a for a in check.get("macAddresses") or []]
        self.wanted = frozenset(mac for a in check.get("macAddresses") or [] if (mac := canonical_mac(a)))

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        record = data.mac
        if record is None or record.timed_out:
            return FAIL
        # Both sides in the one canonical form (a record holds reported addresses canonical, and anything that is
        # not a MAC address as something no canonical form equals): such a value matches nothing.
        return FAIL if self.wanted.isdisjoint(record.addresses) else PASS

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        record = data.mac
        actual = [] if record is None else list(record.addresses)
        return CheckResult(self.verdict(data, mfa, now) == PASS, actual, self.expected)


class _DomainRule(Rule):
    __slots__ = ("expected", "wanted")

    def __init__(self, check: Mapping[str, Any]) -> None:
        super().__init__(check)
        self.expected = list(check.get("domains") or [])
        self.wanted = frozenset(d.casefold() for d in self.expected)

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        record = data.domain
        if record is None or record.timed_out:
            return FAIL
        return PASS if record.domain.casefold() in self.wanted else FAIL

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        record = data.domain
        return CheckResult(self.verdict(data, mfa, now) == PASS, "" if record is None else record.domain,
                           self.expected)


def process_meets(record: ProcessRecord | None, hashes: frozenset[str], fingerprints: frozenset[str]) -> bool:
    """A running, fresh record whose hash is one of ``hashes`` and some signer one of ``fingerprints`` (empty means
    any). Both sides are :func:`~controller.check_types.bodies.clean_hex` ed: the rule's when it is compiled, the
    record's when it is received (``controller.posture.machine.apply_response``)."""
    if record is None or record.timed_out or not record.is_running:
        return False
    if hashes and record.hash not in hashes:
        return False
    return not fingerprints or not fingerprints.isdisjoint(record.signer_fingerprints)


def _process_actual(record: ProcessRecord | None, *, with_path: bool) -> dict[str, Any]:
    actual: dict[str, Any] = {
        "hash": "" if record is None else record.hash,
        "isRunning": False if record is None else record.is_running,
        "signerFingerprints": [] if record is None else list(record.signer_fingerprints),
    }
    if with_path:
        actual["path"] = "" if record is None else record.path
    return actual


def _cleaned(values: list[str]) -> frozenset[str]:
    return frozenset(clean_hex(v) for v in values)


class _ProcessRule(Rule):
    __slots__ = ("check_id", "expected", "fingerprints", "hashes")

    def __init__(self, check: Mapping[str, Any]) -> None:
        super().__init__(check)
        spec = check.get("process") or {}
        self.expected = {"osType": spec.get("osType", ""), "path": spec.get("path", ""),
                         "hashes": list(spec.get("hashes") or []),
                         "signerFingerprint": spec.get("signerFingerprint") or ""}
        self.hashes = _cleaned(self.expected["hashes"])
        fingerprint = self.expected["signerFingerprint"]
        self.fingerprints = _cleaned([fingerprint] if fingerprint else [])
        self.check_id = str(check.get("id", ""))

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        # Only the record the client submitted for this very check counts; osType and path are not compared.
        return PASS if process_meets(data.processes.get(self.check_id), self.hashes, self.fingerprints) else FAIL

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        record = data.processes.get(self.check_id)
        return CheckResult(self.verdict(data, mfa, now) == PASS, _process_actual(record, with_path=False),
                           self.expected)


class _ProcessMultiRule(Rule):
    __slots__ = ("any", "check_id", "expected", "specs")

    def __init__(self, check: Mapping[str, Any]) -> None:
        super().__init__(check)
        self.expected = [{"osType": p.get("osType", ""), "path": p.get("path", ""),
                          "hashes": list(p.get("hashes") or []),
                          "signerFingerprints": list(p.get("signerFingerprints") or [])}
                         for p in check.get("processes") or []]
        self.specs = [(e["path"], _cleaned(e["hashes"]), _cleaned(e["signerFingerprints"])) for e in self.expected]
        # "OneOf" is the guide's spelling of AnyOf (rows written before aliasing); anything else is the stricter
        # AllOf.
        self.any = check.get("semantic") in ("AnyOf", "OneOf")
        self.check_id = str(check.get("id", ""))

    def verdict(self, data: PostureData, mfa: MfaState | None, now: float) -> int:
        paths = data.process_paths
        met = (bool(path) and process_meets(paths.get(path), hashes, prints) for path, hashes, prints in self.specs)
        return PASS if (any(met) if self.any else all(met)) else FAIL

    def report(self, data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
        last = data.processes.get(self.check_id)
        actual = [] if last is None else [_process_actual(last, with_path=True)]
        return CheckResult(self.verdict(data, mfa, now) == PASS, actual, self.expected)


_RULES: dict[Any, Callable[[Mapping[str, Any]], Rule]] = {
    "MFA": MfaRule, "OS": _OsRule, "MAC": _MacRule, "DOMAIN": _DomainRule, "PROCESS": _ProcessRule,
    "PROCESS_MULTI": _ProcessMultiRule,
}


def compile_rule(check: Mapping[str, Any]) -> Rule:
    """The rule of the stored check row ``check`` (an unknown type always fails, with no values)."""
    return _RULES.get(check.get("typeId"), Rule)(check)


def evaluate_check(check: Mapping[str, Any], data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
    """The report of ``check`` for an (identity, API session) pair at ``now``: ``data`` is the identity's posture
    data, ``mfa`` the API session's MFA state (None: none; only MFA checks look at it). Compiles the check each
    time: where a check is evaluated again and again, keep its :func:`compile_rule`."""
    return compile_rule(check).report(data, mfa, now)


def failure_entry(check: Mapping[str, Any], result: CheckResult) -> dict[str, Any]:
    """The ``policyFailures[].checks[]`` entry of a failed service request for ``check`` and its result.

    ``postureCheckId``, ``postureCheckName``, ``postureCheckType``, ``actualValue``, ``expectedValue``, plus
    ``semantic`` for PROCESS_MULTI and ``criteria`` for MFA (whose timestamps stay epoch seconds or None).
    """
    entry: dict[str, Any] = {
        "postureCheckId": check.get("id", ""),
        "postureCheckName": check.get("name", ""),
        "postureCheckType": check.get("typeId", ""),
        "actualValue": result.actual_value,
        "expectedValue": result.expected_value,
    }
    if check.get("typeId") == "PROCESS_MULTI":
        entry["semantic"] = check.get("semantic", "")
    if result.criteria is not None:
        entry["criteria"] = dict(result.criteria)
    return entry
