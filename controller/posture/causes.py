"""Why a posture check fails, in words an operator reads: the check, the rule that failed, what was reported (and
when, by which API session), what the check requires, and what the identity can do about it.

These are for operators only (events, the access explanation): the Client API's answers to an endpoint stay as
the reference words them. Built from a rule's report (``controller/posture/rules.py``), only for checks that
fail, so the engine's verdicts never pay for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.clock import format_time
from controller.posture.records import MFA_GRACE_SECONDS, MfaState, PostureData
from controller.posture.rules import CheckResult, MfaRule, Rule

__all__ = ["CHECK_FIELDS", "expand_check", "failing_check", "is_mfa", "mfa_facts", "mfa_failure_instant",
           "mfa_instant", "remedy", "reported_by", "rule_words"]

# What events say of a failing check are facts, cheap to take on the engine's path (attribute reads, the check's
# own compiled values); the access explanation, which is not on that path, words them (rule_words, remedy).


def _time(value: float | None) -> str | None:
    return format_time(value) if value is not None else None


def _listed(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values) or "none"


def reported_by(rule: Rule, data: PostureData, mfa: MfaState | None) -> tuple[str | None, str | None]:
    """When the data the rule reads was last reported, and by which API session (None, None: never)."""
    check = rule.check
    match check.get("typeId"):
        case "OS":
            record: Any = data.os
        case "MAC":
            record = data.mac
        case "DOMAIN":
            record = data.domain
        case "PROCESS":
            record = data.processes.get(str(check.get("id", "")))
        case "PROCESS_MULTI":
            paths = [str(p.get("path", "")) for p in check.get("processes") or []]
            found = [data.process_paths[p] for p in paths if p in data.process_paths]
            record = max(found, key=lambda r: r.last_updated_at or 0.0) if found else None
        case "MFA":
            return (_time(mfa.passed_mfa_at) if mfa is not None else None), None
        case _:
            record = None
    if record is None:
        return None, None
    return _time(record.last_updated_at), (record.reported_by or None)


def mfa_failure_instant(rule: MfaRule, mfa: MfaState | None, now: float) -> tuple[str, float | None]:
    """Why an MFA check fails for ``mfa`` and since when: ``("notPassed", None)``, ``("timedOut", T)`` with
    ``T = passedMfaAt + timeoutSeconds``, or ``("wake" | "unlock", T)`` with ``T`` the end of that grace period."""
    return mfa_instant(rule.timeout, rule.wake, rule.unlock, mfa, now)


def mfa_instant(timeout: int, wake: bool, unlock: bool, mfa: MfaState | None,
                now: float) -> tuple[str, float | None]:
    """As :func:`mfa_failure_instant`, for an MFA check of ``timeout`` (-1: none) prompting on ``wake`` and
    ``unlock``."""
    if mfa is None or mfa.passed_mfa_at is None:
        return "notPassed", None
    passed = mfa.passed_mfa_at
    if timeout > 0 and (mfa.timed_out or now >= passed + timeout):
        return "timedOut", passed + timeout
    graces = [(event_at + MFA_GRACE_SECONDS, name) for prompt, event_at, name in
              ((wake, mfa.woken_at, "wake"), (unlock, mfa.unlocked_at, "unlock"))
              if prompt and event_at is not None and event_at >= passed and now >= event_at + MFA_GRACE_SECONDS]
    if graces:
        at, name = min(graces)
        return name, at
    return "timedOut", passed + timeout if timeout > 0 else None  # sticky: timed out before


def rule_words(rule: Rule, report: CheckResult, data: PostureData, mfa: MfaState | None, now: float) -> str:
    """The rule a failing check broke, in one sentence."""
    check = rule.check
    match check.get("typeId"):
        case "OS":
            record = data.os
            allowed = "; ".join(f"{e['type']} {' || '.join(e['versions']) or 'any version'}"
                                for e in report.expected_value or [])
            if record is None:
                return f"no operating system was reported; allowed: {allowed}"
            build = f" (build {record.build})" if record.build else ""
            listed = {str(e["type"]).lower(): e["versions"] for e in report.expected_value or []}
            if record.type.lower() not in listed:
                return f"reported {record.type} is not an allowed operating system; allowed: {allowed}"
            return (f"reported {record.type} {record.version}{build} is not within "
                    f"{' || '.join(listed[record.type.lower()])}")
        case "MAC":
            reported = list(data.mac.addresses) if data.mac is not None else []
            if not reported:
                return f"no MAC address was reported; allowed: {_listed(report.expected_value)}"
            return f"none of the reported MAC addresses ({_listed(reported)}) is allowed " \
                   f"({_listed(report.expected_value)})"
        case "DOMAIN":
            if data.domain is None:
                return f"no Windows domain was reported; allowed: {_listed(report.expected_value)}"
            return f"reported domain {data.domain.domain!r} is not one of {_listed(report.expected_value)}"
        case "PROCESS" | "PROCESS_MULTI":
            return _process_words(check, report)
        case "MFA":
            assert isinstance(rule, MfaRule)
            why, at = mfa_failure_instant(rule, mfa, now)
            if why == "notPassed":
                return "no MFA code was given on this API session"
            if why == "timedOut":
                return f"MFA timed out at {_time(at)} ({rule.timeout} seconds after the last MFA code)"
            return f"the endpoint reported a {why} and no MFA code came within {MFA_GRACE_SECONDS} seconds: " \
                   f"the grace ended at {_time(at)}"
    return f"posture check type {check.get('typeId')!r} is not known: it always fails"


def _process_words(check: Mapping[str, Any], report: CheckResult) -> str:
    expected = report.expected_value
    if check.get("typeId") == "PROCESS":
        actual = report.actual_value or {}
        path = expected.get("path", "") if isinstance(expected, dict) else ""
        if not actual.get("isRunning"):
            return f"process {path} is not reported running"
        return f"process {path} runs with hash {actual.get('hash') or 'unknown'}, which is not allowed" \
            if expected.get("hashes") else f"process {path} is not signed by the required signer"
    paths = [str(p.get("path", "")) for p in expected or []]
    semantic = "all of" if check.get("semantic") not in ("AnyOf", "OneOf") else "one of"
    return f"{semantic} the processes {_listed(paths)} must run with an allowed hash and signer"


def remedy(rule: Rule, report: CheckResult) -> str:
    """What the identity can do to pass the check."""
    check = rule.check
    match check.get("typeId"):
        case "OS":
            allowed = "; ".join(f"{e['type']} {' || '.join(e['versions']) or ''}".strip()
                                for e in report.expected_value or [])
            return f"report an operating system within: {allowed}"
        case "MAC":
            return f"report a network interface with one of: {_listed(report.expected_value)}"
        case "DOMAIN":
            return f"join one of the Windows domains: {_listed(report.expected_value)}"
        case "PROCESS":
            path = (report.expected_value or {}).get("path", "")
            return f"run {path} (an allowed build) and report it"
        case "PROCESS_MULTI":
            return f"run and report {_listed([p.get('path', '') for p in report.expected_value or []])}"
        case "MFA":
            return "submit a TOTP code (POST /authenticate/mfa)"
    return "nothing can pass this check"


def _os(rule: Rule, data: PostureData) -> tuple[str, Any]:
    record = data.os
    if record is None or record.timed_out:
        return "osNotReported", None
    facts = {"type": record.type, "version": record.version, "build": record.build}
    listed = getattr(rule, "by_type", {})
    return ("osVersion" if record.type.lower() in listed else "osType"), facts


def _mac(rule: Rule, data: PostureData) -> tuple[str, Any]:
    record = data.mac
    return ("macNotReported", None) if record is None or record.timed_out else ("macAddress", record.addresses)


def _domain(rule: Rule, data: PostureData) -> tuple[str, Any]:
    record = data.domain
    return ("domainNotReported", None) if record is None or record.timed_out else ("domain", record.domain)


def _process(rule: Rule, data: PostureData) -> tuple[str, Any]:
    record = data.processes.get(str(rule.check.get("id", "")))
    if record is None or record.timed_out:
        return "processNotReported", None
    facts = {"path": record.path, "isRunning": record.is_running, "hash": record.hash}
    if not record.is_running:
        return "processNotRunning", facts
    return ("processHash" if record.hash not in getattr(rule, "hashes", ()) else "processSigner"), facts


def _processes(rule: Rule, data: PostureData) -> tuple[str, Any]:
    paths = data.process_paths
    return "processes", [{"path": p.path, "isRunning": p.is_running, "hash": p.hash}
                         for spec in getattr(rule, "specs", ()) if (p := paths.get(spec[0])) is not None]


_FACTS = {"OS": _os, "MAC": _mac, "DOMAIN": _domain, "PROCESS": _process, "PROCESS_MULTI": _processes}
_MFA_RULES = {"notPassed": "mfaNotPassed", "timedOut": "mfaTimedOut", "wake": "mfaWake", "unlock": "mfaUnlock"}


CHECK_FIELDS = ("postureCheckId", "postureCheckName", "postureCheckType", "required", "policyIds", "rule",
                "reported", "at")
"""A failing check's fields as events name them, in the order of its compact form (:func:`failing_check`)."""


def failing_check(rule: Rule, policy_ids: Sequence[str], data: PostureData, mfa: MfaState | None,
                  now: float) -> tuple[Any, ...]:
    """A failing check as events name it, from facts only (no words: they are the readers' to render, see
    :func:`rule_words` and the CLI), in compact form, which :func:`expand_check` turns into the event's object:
    the check, the policies requiring it, the rule it broke (``rule``: osType, osVersion, macAddress, domain,
    processNotRunning, processHash, processSigner, processes, mfaNotPassed, mfaTimedOut, mfaWake, mfaUnlock, or
    ...NotReported), what was reported (``reported``) and what the check requires (``required``); only an MFA
    check has ``at``, since when it fails (a timeout's or a grace's end).

    The compact form is the values of :data:`CHECK_FIELDS` in order, except for an MFA check: its rule is None,
    followed by the API session's MFA state and the instant of the step, from which :func:`expand_check` works out
    the rule and ``at`` (what the step need not)."""
    header = rule.header or _header(rule)
    facts = _FACTS.get(header[2])
    if facts is not None:
        name, reported = facts(rule, data)
        return (*header, policy_ids, name, reported)
    if isinstance(rule, MfaRule):
        return (*header, policy_ids, None, mfa, now)
    return (*header, policy_ids, "unknownType", None)


def is_mfa(check: Sequence[Any]) -> bool:
    """Whether a failing check in compact form is an MFA check's (whose rule the reader works out)."""
    return check[5] is None


def mfa_facts(check: Sequence[Any]) -> tuple[str, float | None]:
    """Why the MFA check of a compact failing check fails, and since when (:func:`mfa_failure_instant`)."""
    required, state, now = check[3], check[6], check[7]
    mfa = MfaState(*state) if isinstance(state, (list, tuple)) else state
    return mfa_instant(required["timeoutSeconds"], required["promptOnWake"], required["promptOnUnlock"], mfa, now)


def expand_check(values: Sequence[Any]) -> dict[str, Any]:
    """The event's object for a failing check in the compact form of :func:`failing_check` (as stored: arrays
    may come back as lists, the MFA state as its array)."""
    if is_mfa(values):
        why, at = mfa_facts(values)
        return {**dict(zip(CHECK_FIELDS[:5], values[:5], strict=True)), "rule": _MFA_RULES[why], "reported": None,
                "at": _time(at)}
    return dict(zip(CHECK_FIELDS, values, strict=False))  # no ``at``: only an MFA check has one


def _header(rule: Rule) -> tuple[Any, ...]:
    """What a failing check's entry says of the check itself (id, name, typeId, what it requires), made once per
    compiled rule (rules are shared and never change: a change of the check compiles a new one)."""
    header = rule.header
    if header is None:
        check = rule.check
        required = ({"timeoutSeconds": rule.timeout, "promptOnWake": rule.wake, "promptOnUnlock": rule.unlock}
                    if isinstance(rule, MfaRule) else getattr(rule, "expected", None))
        header = rule.header = (check.get("id"), check.get("name"), check.get("typeId"), required)
    return header
