"""Pass/fail verdicts of posture checks, compiled once per stored check: the hot path of re-evaluation.

:func:`controller.posture.evaluate.evaluate_check` builds the whole report a refused session request returns (the
actual and expected values, the MFA criteria). Re-evaluating an identity's sessions after every posture report, wake
or MFA deadline needs only two bits of it: whether the check passes, and whether an MFA timeout has elapsed.
:func:`compile_check` parses a check row once into a function of (posture data, MFA state, ``now``) that answers
exactly those two bits, as :data:`PASS`, :data:`FAIL` or :data:`TIMED_OUT` (failing because the MFA timeout
elapsed), with none of the report's allocations.

The contract: for every check, data, MFA state and instant, the verdict says ``passing`` and ``timed_out`` as
``evaluate_check`` does (``tests/controller/test_posture_verdict.py`` compares the two over generated cases). The
rules themselves are documented once, on ``evaluate_check``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from controller.posture.evaluate import MfaState, PostureData, mfa_timeout, process_meets, prompt_expired
from controller.posture.normalize import canonical_mac
from controller.posture.versions import version_matches

__all__ = ["FAIL", "PASS", "TIMED_OUT", "Verdict", "compile_check"]

PASS: Final = 0
FAIL: Final = 1
TIMED_OUT: Final = 2
"""Failing because the MFA timeout elapsed (or had: the API session's flag is sticky)."""

Verdict = Callable[[PostureData, MfaState | None, float], int]


def compile_check(check: Mapping[str, Any]) -> Verdict:
    """The verdict function of the stored check row ``check`` (which must not change afterwards). An unknown type
    always fails, as in ``evaluate_check``."""
    compiler = _COMPILERS.get(check.get("typeId"))
    return compiler(check) if compiler is not None else _never


def _never(data: PostureData, mfa: MfaState | None, now: float) -> int:
    return FAIL


def _mfa(check: Mapping[str, Any]) -> Verdict:
    timeout = mfa_timeout(check)  # -1 when the check has none
    wake, unlock = bool(check.get("promptOnWake")), bool(check.get("promptOnUnlock"))

    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        if mfa is None or (passed := mfa.passed_mfa_at) is None:
            return FAIL  # never passed: failing, but not "timed out" (see evaluate_check)
        if mfa.timed_out or (timeout > 0 and now >= passed + timeout):
            return TIMED_OUT
        if prompt_expired(wake, mfa.woken_at, passed, now) or prompt_expired(unlock, mfa.unlocked_at, passed, now):
            return FAIL
        return PASS

    return verdict


def _os(check: Mapping[str, Any]) -> Verdict:
    # Keyed by lower-cased type, last entry wins, as evaluate_check reads the entries.
    by_type = {str(e.get("type")).lower(): list(e.get("versions") or []) for e in check.get("operatingSystems") or []}

    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        record = data.os
        if record is None or record.timed_out:
            return FAIL
        versions = by_type.get(record.type.lower())
        return PASS if versions is not None and version_matches(versions, record.version, record.build) else FAIL

    return verdict


def _mac(check: Mapping[str, Any]) -> Verdict:
    expected = frozenset(canonical_mac(a) or a for a in check.get("macAddresses") or [])

    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        record = data.mac
        if record is None or record.timed_out:
            return FAIL
        return FAIL if expected.isdisjoint({canonical_mac(a) for a in record.addresses} - {None}) else PASS

    return verdict


def _domain(check: Mapping[str, Any]) -> Verdict:
    expected = frozenset(d.casefold() for d in check.get("domains") or [])

    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        record = data.domain
        if record is None or record.timed_out:
            return FAIL
        return PASS if record.domain.casefold() in expected else FAIL

    return verdict


def _process(check: Mapping[str, Any]) -> Verdict:
    spec = check.get("process") or {}
    hashes = list(spec.get("hashes") or [])
    fingerprint = spec.get("signerFingerprint") or ""
    fingerprints = [fingerprint] if fingerprint else []
    check_id = str(check.get("id", ""))

    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        return PASS if process_meets(data.processes.get(check_id), hashes, fingerprints) else FAIL

    return verdict


def _process_multi(check: Mapping[str, Any]) -> Verdict:
    specs = [(p.get("path", ""), list(p.get("hashes") or []), list(p.get("signerFingerprints") or []))
             for p in check.get("processes") or []]
    combine = any if check.get("semantic") in ("AnyOf", "OneOf") else all

    def verdict(data: PostureData, mfa: MfaState | None, now: float) -> int:
        paths = data.process_paths
        passing = combine(bool(path) and process_meets(paths.get(path), hashes, fingerprints)
                          for path, hashes, fingerprints in specs)
        return PASS if passing else FAIL

    return verdict


_COMPILERS: dict[Any, Callable[[Mapping[str, Any]], Verdict]] = {
    "MFA": _mfa, "OS": _os, "MAC": _mac, "DOMAIN": _domain, "PROCESS": _process, "PROCESS_MULTI": _process_multi,
}
