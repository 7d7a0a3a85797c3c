"""The events and revocation causes an identity actor's step produces, built from what the step decided (pure).

* ``posture`` ``denied``: a session request refused because no policy's enforced checks pass;
* a granted request is the session's creation (``edge.sessions`` ``created``, naming the policies that pass,
  written by the event log from the session's row);
* ``posture`` ``wouldDeny``: a request granted, or a session kept, only because some checks are report-only;
* revocation causes (``access`` ``revoked``, written by the event log from the session's deletion): ``noPolicy``,
  ``postureCheckFailed``, ``mfaTimeout`` (with the timeout's instant), ``mfaGraceEnded`` (with the grace's end),
  ``mfaRemoved``.

Failing checks are named with their rule in words (``controller/posture/causes.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.clock import format_time
from controller.model.events import POSTURE, Event
from controller.posture.causes import failing_check, mfa_failure_instant
from controller.posture.plan import AccessPlan
from controller.posture.records import MfaState, PostureData
from controller.posture.rules import MfaRule, Rule

__all__ = ["denied", "revocation_cause", "would_deny"]

Failing = Sequence[tuple[Rule, Sequence[str]]]


def _subject(identity_id: str, api_session_id: str, service_id: str, session_type: str) -> dict[str, Any]:
    return {"identity_id": identity_id, "api_session_id": api_session_id, "service_id": service_id,
            "session_type": session_type}


def _checks(failing: Failing, data: PostureData, mfa: MfaState | None, now: float) -> list[dict[str, Any]]:
    return [failing_check(rule, policy_ids, data, mfa, now) for rule, policy_ids in failing]


def denied(identity_id: str, api_session_id: str, service_id: str, session_type: str, failing: Failing,
           data: PostureData, mfa: MfaState | None, now: float) -> Event:
    """A request refused for posture, with every failing enforced check of the linking policies."""
    return Event(POSTURE, "denied", {
        **_subject(identity_id, api_session_id, service_id, session_type),
        "cause": {"code": "postureCheckFailed", "checks": _checks(failing, data, mfa, now)}})


def would_deny(identity_id: str, api_session_id: str, service_id: str, session_type: str, session_id: str | None,
               decision: str, plan: AccessPlan, verdicts: list[int] | None, data: PostureData,
               mfa: MfaState | None, now: float) -> Event:
    """Report-only checks would have refused a request (``decision`` "request", ``session_id`` the session it got)
    or revoked a session (``decision`` "recheck"): each failing report-only check."""
    failing = plan.failing_rules(verdicts, report_only=True)
    return Event(POSTURE, "wouldDeny", {**_subject(identity_id, api_session_id, service_id, session_type),
                                        "session_id": session_id, "decision": decision,
                                        "checks": _checks(failing, data, mfa, now)})


def revocation_cause(plan: AccessPlan | None, verdicts: list[int] | None, data: PostureData, mfa: MfaState | None,
                     now: float, *, expired: bool, mfa_removed: bool, reason: str) -> dict[str, Any]:
    """Why a re-check revokes a session: no policy of its type links it any more (``noPolicy``, after a change of
    ``reason``: ``policyChange`` or ``roleChange``), or its policies' enforced checks fail (by ``verdicts``, from
    ``AccessPlan.evaluate``). An elapsed MFA timeout comes first (``mfaTimeout``, ``at`` its instant: the MFA pass
    plus ``timeoutSeconds``); then any other failing check (``postureCheckFailed``); then MFA alone: a wake/unlock
    grace that ran out (``mfaGraceEnded``, ``at`` its end), or MFA taken away (``mfaRemoved``). Every failing
    enforced check is listed under ``checks``."""
    if plan is None:
        return {"code": "noPolicy", "reason": reason}
    checks = []
    mfa_rules: list[MfaRule] = []
    for rule, policy_ids in plan.failing_rules(verdicts):
        checks.append(failing_check(rule, policy_ids, data, mfa, now))
        if isinstance(rule, MfaRule):
            mfa_rules.append(rule)
    cause: dict[str, Any] = {"code": "postureCheckFailed"}
    if mfa_rules:
        instants = [(mfa_failure_instant(rule, mfa, now), rule) for rule in mfa_rules]
        timed_out = [(at, rule) for (why, at), rule in instants if why == "timedOut" and at is not None]
        if expired and timed_out:
            deadline, rule = min(timed_out, key=lambda item: item[0])
            cause = {"code": "mfaTimeout", "at": format_time(deadline), "postureCheckId": rule.check.get("id"),
                     "timeoutSeconds": rule.timeout}
        elif len(mfa_rules) == len(checks):
            (why, since), rule = min(instants, key=lambda item: item[0][1] if item[0][1] is not None else now)
            if why in ("wake", "unlock") and since is not None:
                cause = {"code": "mfaGraceEnded", "event": why, "at": format_time(since),
                         "postureCheckId": rule.check.get("id")}
            elif mfa_removed:
                cause = {"code": "mfaRemoved"}
    cause["checks"] = checks
    return cause
