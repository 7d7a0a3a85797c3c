"""Evaluation of one posture check against an identity's posture data: pure functions, time passed in.

All instants are **epoch seconds as floats** (``controller.clock.Clock.now()``), both in the data records and in
the ``now`` arguments, so results never depend on the wall clock of the process evaluating them.

A check is the stored row in wire names (``id``, ``name``, ``typeId`` and the type's fields as produced by
:func:`controller.posture.normalize.normalize_check`). Identity-wide data (OS, MAC, domain, processes) is in
:class:`PostureData`; MFA and wake/unlock state is per API session, in :class:`MfaState`.

MFA boundaries (Tollgate's choice, so that the identity actor can revoke at an exact instant): a check whose MFA
passed at ``t`` with ``timeoutSeconds`` T fails from ``t + T`` inclusive, and a wake/unlock at ``e`` fails it from
``e + 300`` inclusive. :func:`mfa_deadline` returns the first such instant, at which :func:`evaluate_check` already
answers failing.

The data records are frozen ``msgspec.Struct`` s rather than dataclasses: every actor step builds new ones, and a
Struct is built and copied (``msgspec.structs.replace``) about ten times faster. They are untracked by the cyclic
collector (``gc=False``): they hold only scalars, tuples and mappings of reported data, never anything that could
lead back to them, and a million parked actors hold several each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from controller.posture.normalize import canonical_mac, clean_hex
from controller.posture.versions import version_matches

__all__ = [
    "MFA_GRACE_SECONDS",
    "CheckResult",
    "DomainRecord",
    "MacRecord",
    "MfaState",
    "OsRecord",
    "PostureData",
    "ProcessRecord",
    "evaluate_check",
    "failure_entry",
    "mfa_deadline",
    "mfa_timeout",
    "mfa_timeout_remaining",
    "process_meets",
    "prompt_expired",
]

MFA_GRACE_SECONDS = 300
"""After a wake or unlock event (when the check prompts on it) MFA keeps passing this long."""


class OsRecord(msgspec.Struct, frozen=True, gc=False):
    """The identity's last OS posture response. ``type`` as reported; it is compared case-insensitively."""

    type: str
    version: str
    build: str | None = None
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False


class MacRecord(msgspec.Struct, frozen=True, gc=False):
    """The identity's last MAC posture response: the reported addresses (normalised on receipt by the caller)."""

    addresses: tuple[str, ...]
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False


class DomainRecord(msgspec.Struct, frozen=True, gc=False):
    """The identity's last DOMAIN posture response."""

    domain: str
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False


class ProcessRecord(msgspec.Struct, frozen=True, gc=False):
    """One PROCESS posture response (the client answers per check id, naming the binary's ``path``)."""

    path: str
    is_running: bool
    hash: str = ""
    signer_fingerprints: tuple[str, ...] = ()
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False


class PostureData(msgspec.Struct, frozen=True, gc=False):
    """An identity's posture data, shared by all its API sessions.

    ``processes`` holds the last record submitted per posture-check id (PROCESS checks and the failure report of
    PROCESS_MULTI use it); ``process_paths`` the last record per exact, case-sensitive binary path, accumulated over
    all submissions (PROCESS_MULTI evaluation uses it). Treat the mappings as read-only.
    """

    os: OsRecord | None = None
    mac: MacRecord | None = None
    domain: DomainRecord | None = None
    processes: Mapping[str, ProcessRecord] = msgspec.field(default_factory=dict)
    process_paths: Mapping[str, ProcessRecord] = msgspec.field(default_factory=dict)


class MfaState(msgspec.Struct, frozen=True, gc=False):
    """MFA state of one API session.

    ``passed_mfa_at`` is the last successful MFA of this API session (None: never, or MFA removed since);
    ``woken_at``/``unlocked_at`` the last wake/unlock the client reported; ``timed_out`` is sticky until the next
    successful MFA (the caller sets it when :attr:`CheckResult.timed_out` comes back True).
    """

    passed_mfa_at: float | None = None
    woken_at: float | None = None
    unlocked_at: float | None = None
    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Outcome of one check.

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


def _timeout_seconds(check: Mapping[str, Any]) -> int:
    value = check.get("timeoutSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else -1


def prompt_expired(prompt: bool, event_at: float | None, passed_at: float, now: float) -> bool:
    """Whether a wake/unlock event has used up its grace period. An event before the last MFA is ignored."""
    return prompt and event_at is not None and event_at >= passed_at and now >= event_at + MFA_GRACE_SECONDS


def _elapsed(now: float, since: float) -> int:
    # Whole seconds, never negative (an event stamped a little ahead of `now` counts as just now).
    return max(0, math.floor(now - since))


def mfa_timeout(check: Mapping[str, Any]) -> int:
    """The ``timeout`` reported in a client's MFA posture query: ``timeoutSeconds`` if > 0, else -1."""
    return _timeout_seconds(check)


def mfa_timeout_remaining(check: Mapping[str, Any], mfa: MfaState | None, now: float, *, legacy: bool = False) -> int:
    """The ``timeoutRemaining`` (whole seconds) reported in a client's MFA posture query, in this order:

    * -1 when the check has no timeout (``timeoutSeconds`` ≤ 0);
    * 0 when the API session has not passed MFA;
    * -1 when ``legacy`` (the caller decided the client SDK is a legacy one) and the check has
      ``ignoreLegacyEndpoints``;
    * otherwise ``max(0, T - floor(seconds since MFA))``, lowered to ``max(0, 300 - floor(seconds since event))``
      for a wake (when ``promptOnWake``) or unlock (when ``promptOnUnlock``) at or after the last MFA.
    """
    timeout = _timeout_seconds(check)
    if timeout < 0:
        return -1
    if mfa is None or mfa.passed_mfa_at is None:
        return 0
    if legacy and check.get("ignoreLegacyEndpoints"):
        return -1
    passed = mfa.passed_mfa_at
    remaining = max(0, timeout - _elapsed(now, passed))
    for prompt, event_at in ((check.get("promptOnWake"), mfa.woken_at), (check.get("promptOnUnlock"), mfa.unlocked_at)):
        if prompt and event_at is not None and event_at >= passed:
            remaining = min(remaining, max(0, MFA_GRACE_SECONDS - _elapsed(now, event_at)))
    return remaining


def mfa_deadline(check: Mapping[str, Any], mfa: MfaState) -> float | None:
    """The first instant at which this MFA check fails for ``mfa``, or None if nothing will make it fail.

    The earliest of ``passedMfaAt + timeoutSeconds`` (timeout > 0), ``wokenAt + 300`` (``promptOnWake`` and the
    wake at or after the last MFA) and ``unlockedAt + 300`` (likewise). At that instant :func:`evaluate_check`
    answers failing. None also when MFA was never passed: the check fails already and no time changes that. Only
    meaningful while the check passes; for a failing check the result may be at or before ``now``.
    """
    passed = mfa.passed_mfa_at
    if passed is None:
        return None
    candidates: list[float] = []
    timeout = _timeout_seconds(check)
    if timeout > 0:
        candidates.append(passed + timeout)
    for prompt, event_at in ((check.get("promptOnWake"), mfa.woken_at), (check.get("promptOnUnlock"), mfa.unlocked_at)):
        if prompt and event_at is not None and event_at >= passed:
            candidates.append(event_at + MFA_GRACE_SECONDS)
    return min(candidates) if candidates else None


def _evaluate_mfa(check: Mapping[str, Any], mfa: MfaState | None, now: float) -> CheckResult:
    wake, unlock = bool(check.get("promptOnWake")), bool(check.get("promptOnUnlock"))
    expected = {"passedMfa": True, "passedOnWake": wake, "passedOnUnlock": unlock, "timedOut": False}
    criteria: dict[str, Any] = {
        "passedMfaAt": None if mfa is None else mfa.passed_mfa_at,
        "wokenAt": None if mfa is None else mfa.woken_at,
        "unlockedAt": None if mfa is None else mfa.unlocked_at,
        "timeoutSeconds": check.get("timeoutSeconds", -1),
        "timeoutRemainingSeconds": mfa_timeout_remaining(check, mfa, now),
    }
    if mfa is None or mfa.passed_mfa_at is None:
        # The reference reports timedOut=true when there is no MFA at all; prompts that are off count as passed.
        actual = {"passedMfa": False, "passedOnWake": not wake, "passedOnUnlock": not unlock, "timedOut": True}
        return CheckResult(False, actual, expected, timed_out=False, criteria=criteria)
    passed = mfa.passed_mfa_at
    timeout = _timeout_seconds(check)
    timed_out = mfa.timed_out or (timeout > 0 and now >= passed + timeout)
    on_wake = not prompt_expired(wake, mfa.woken_at, passed, now)
    on_unlock = not prompt_expired(unlock, mfa.unlocked_at, passed, now)
    actual = {"passedMfa": True, "passedOnWake": on_wake, "passedOnUnlock": on_unlock, "timedOut": timed_out}
    passing = not timed_out and on_wake and on_unlock
    return CheckResult(passing, actual, expected, timed_out=timed_out, criteria=criteria)


def _evaluate_os(check: Mapping[str, Any], data: PostureData) -> CheckResult:
    entries = check.get("operatingSystems") or []
    expected = [{"type": e.get("type"), "versions": list(e.get("versions") or [])} for e in entries]
    record = data.os
    actual = {"type": "" if record is None else record.type, "version": "" if record is None else record.version}
    if record is None or record.timed_out:
        return CheckResult(False, actual, expected)
    # Keyed by lower-cased type, last entry wins: clients report "windows", checks store "Windows".
    by_type = {str(e["type"]).lower(): e["versions"] for e in expected}
    versions = by_type.get(record.type.lower())
    passing = versions is not None and version_matches(versions, record.version, record.build)
    return CheckResult(passing, actual, expected)


def _evaluate_mac(check: Mapping[str, Any], data: PostureData) -> CheckResult:
    expected = [canonical_mac(a) or a for a in check.get("macAddresses") or []]
    record = data.mac
    actual = [] if record is None else list(record.addresses)
    if record is None or record.timed_out:
        return CheckResult(False, actual, expected)
    # Both sides in the one canonical form; a reported value that is not a MAC address matches nothing.
    reported = {canonical_mac(a) for a in record.addresses} - {None}
    return CheckResult(any(a in reported for a in expected), actual, expected)


def _evaluate_domain(check: Mapping[str, Any], data: PostureData) -> CheckResult:
    expected = list(check.get("domains") or [])
    record = data.domain
    actual = "" if record is None else record.domain
    if record is None or record.timed_out:
        return CheckResult(False, actual, expected)
    reported = record.domain.casefold()
    return CheckResult(any(d.casefold() == reported for d in expected), actual, expected)


def _process_actual(record: ProcessRecord | None, *, with_path: bool) -> dict[str, Any]:
    actual: dict[str, Any] = {
        "hash": "" if record is None else record.hash,
        "isRunning": False if record is None else record.is_running,
        "signerFingerprints": [] if record is None else list(record.signer_fingerprints),
    }
    if with_path:
        actual["path"] = "" if record is None else record.path
    return actual


def process_meets(record: ProcessRecord | None, hashes: list[str], fingerprints: list[str]) -> bool:
    """A running, fresh record whose hash is one of ``hashes`` and some signer one of ``fingerprints``.

    An empty list means "any"; comparison ignores case and separators (see ``clean_hex``).
    """
    if record is None or record.timed_out or not record.is_running:
        return False
    if hashes and clean_hex(record.hash) not in {clean_hex(h) for h in hashes}:
        return False
    if fingerprints:
        wanted = {clean_hex(f) for f in fingerprints}
        if not any(clean_hex(f) in wanted for f in record.signer_fingerprints):
            return False
    return True


def _evaluate_process(check: Mapping[str, Any], data: PostureData) -> CheckResult:
    spec = check.get("process") or {}
    expected = {
        "osType": spec.get("osType", ""),
        "path": spec.get("path", ""),
        "hashes": list(spec.get("hashes") or []),
        "signerFingerprint": spec.get("signerFingerprint") or "",
    }
    # Only the record the client submitted for this very check counts; osType and path are not compared.
    record = data.processes.get(str(check.get("id", "")))
    fingerprints = [expected["signerFingerprint"]] if expected["signerFingerprint"] else []
    passing = process_meets(record, expected["hashes"], fingerprints)
    return CheckResult(passing, _process_actual(record, with_path=False), expected)


def _evaluate_process_multi(check: Mapping[str, Any], data: PostureData) -> CheckResult:
    expected = [
        {
            "osType": p.get("osType", ""),
            "path": p.get("path", ""),
            "hashes": list(p.get("hashes") or []),
            "signerFingerprints": list(p.get("signerFingerprints") or []),
        }
        for p in check.get("processes") or []
    ]
    last = data.processes.get(str(check.get("id", "")))
    actual = [] if last is None else [_process_actual(last, with_path=True)]

    def meets(spec: dict[str, Any]) -> bool:
        path = spec["path"]
        return bool(path) and process_meets(data.process_paths.get(path), spec["hashes"], spec["signerFingerprints"])

    # "OneOf" is the guide's spelling of AnyOf (rows written before aliasing); anything else is the stricter AllOf.
    if check.get("semantic") in ("AnyOf", "OneOf"):
        passing = any(meets(spec) for spec in expected)
    else:
        passing = all(meets(spec) for spec in expected)
    return CheckResult(passing, actual, expected)


def evaluate_check(check: Mapping[str, Any], data: PostureData, mfa: MfaState | None, now: float) -> CheckResult:
    """Evaluate the stored posture check ``check`` for an (identity, API session) pair at ``now`` (epoch seconds).

    ``data`` is the identity's posture data, ``mfa`` the API session's MFA state (None: no MFA record; only MFA
    checks look at it). Rules per type:

    * OS: the reported type (case-insensitive) must be listed; its ``versions`` empty, or the reported version
      within one range (:func:`controller.posture.versions.version_matches`, build rule included);
    * MAC: a reported address equals a check address after :func:`~controller.posture.normalize.canonical_mac`;
    * DOMAIN: the reported domain equals a listed one case-insensitively (no trimming, no suffix matching);
    * PROCESS: the record submitted for this check id is running and matches the hashes / signer fingerprint
      (case-insensitive; empty means any);
    * PROCESS_MULTI: per listed process the latest record for its exact path is running and matches its hashes /
      fingerprints; ``AllOf`` needs every process (an empty path fails), ``AnyOf`` one;
    * MFA: MFA passed on this API session, not timed out (fails from ``passedMfaAt + timeoutSeconds`` inclusive,
      timeouts ≤ 0 never expire, a sticky ``timed_out`` fails), and no wake/unlock at or after the MFA whose
      300-second grace has run out (when the check prompts on it).

    Missing or timed-out data fails. An unknown ``typeId`` fails with no values.
    """
    type_id = check.get("typeId")
    if type_id == "OS":
        return _evaluate_os(check, data)
    if type_id == "MAC":
        return _evaluate_mac(check, data)
    if type_id == "DOMAIN":
        return _evaluate_domain(check, data)
    if type_id == "PROCESS":
        return _evaluate_process(check, data)
    if type_id == "PROCESS_MULTI":
        return _evaluate_process_multi(check, data)
    if type_id == "MFA":
        return _evaluate_mfa(check, mfa, now)
    return CheckResult(False, None, None)


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
