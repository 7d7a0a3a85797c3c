"""The events and revocation causes an identity actor's step produces, built from what the step decided (pure).

* ``posture`` ``denied``: a session request refused because no policy's enforced checks pass;
* a granted request is the session's creation (``edge.sessions`` ``created``, naming the policies that pass,
  written by the event log from the session's row);
* ``posture`` ``wouldDeny``: a request granted, or a session kept, only because some checks are report-only;
* revocation causes (``access`` ``revoked``, written by the event log from the session's deletion): ``noPolicy``,
  ``postureCheckFailed``, ``mfaTimeout`` (with the timeout's instant), ``mfaGraceEnded`` (with the grace's end),
  ``mfaRemoved``.

Failing checks and causes are facts in compact form: arrays of values, which the event log stores as they are and
its readers expand (:func:`expand_cause`, ``controller/posture/causes.py``'s ``expand_check``), so that a step
builds no JSON object for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.clock import format_time
from controller.model.events import POSTURE, Event
from controller.posture.causes import expand_check, failing_check, is_mfa, mfa_facts
from controller.posture.plan import AccessPlan
from controller.posture.records import MfaState, PostureData
from controller.posture.rules import Rule

__all__ = ["CAUSE_FIELDS", "MFA_DECIDED", "denied", "expand_cause", "revocation_cause", "would_deny"]

Failing = Sequence[tuple[Rule, Sequence[str]]]
CAUSE_FIELDS: dict[str, tuple[str, ...]] = {
    "noPolicy": ("reason",),
    "postureCheckFailed": ("checks",),
    "mfaTimeout": ("at", "postureCheckId", "timeoutSeconds", "checks"),
    "mfaGraceEnded": ("event", "at", "postureCheckId", "checks"),
    "mfaRemoved": ("checks",),
}
"""By a cause's code, the fields after ``code`` in the order of its compact form (an array: the code, then their
values; ``at`` in epoch seconds, each check compact)."""
MFA_DECIDED = "~mfa"
"""The code of a compact cause whose code its MFA checks' failures decide when it is expanded."""


def _subject(identity_id: str, api_session_id: str, service_id: str, session_type: str) -> dict[str, Any]:
    return {"identity_id": identity_id, "api_session_id": api_session_id, "service_id": service_id,
            "session_type": session_type}


def _checks(failing: Failing, data: PostureData, mfa: MfaState | None, now: float) -> list[tuple[Any, ...]]:
    return [failing_check(rule, policy_ids, data, mfa, now) for rule, policy_ids in failing]


def denied(identity_id: str, api_session_id: str, service_id: str, session_type: str, failing: Failing,
           data: PostureData, mfa: MfaState | None, now: float) -> Event:
    """A request refused for posture, with every failing enforced check of the linking policies."""
    return Event(POSTURE, "denied", {
        **_subject(identity_id, api_session_id, service_id, session_type),
        "cause": ("postureCheckFailed", _checks(failing, data, mfa, now))})


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
                     now: float, *, expired: bool, mfa_removed: bool, reason: str) -> tuple[Any, ...]:
    """Why a re-check revokes a session, in compact form (:func:`expand_cause` words it): no policy of its type
    links it any more (``noPolicy``, after a change of ``reason``: ``policyChange`` or ``roleChange``, or found by
    the host that ``adopted`` the identity), or its
    policies' enforced checks fail (by ``verdicts``, from ``AccessPlan.evaluate``). An elapsed MFA timeout comes
    first (``mfaTimeout``, ``at`` its instant: the MFA pass plus ``timeoutSeconds``); then any other failing check
    (``postureCheckFailed``); then MFA alone: a wake/unlock grace that ran out (``mfaGraceEnded``, ``at`` its end),
    or MFA taken away (``mfaRemoved``). Every failing enforced check is listed under ``checks``.

    When the plan has MFA checks, which of these it is depends on their failures: the compact form is then
    ``(MFA_DECIDED, expired, mfa_removed, checks)``, decided when it is expanded (not on the engine's path)."""
    if plan is None:
        return ("noPolicy", reason)
    checks = [failing_check(rule, policy_ids, data, mfa, now) for rule, policy_ids in plan.failing_rules(verdicts)]
    if plan.mfa:
        return (MFA_DECIDED, expired, mfa_removed, checks)
    return ("postureCheckFailed", checks)


def _decided(expired: bool, mfa_removed: bool, checks: list[Any]) -> tuple[Any, ...]:
    """The cause a re-check of a plan with MFA checks gives, from its failing checks (see
    :func:`revocation_cause`)."""
    mfa_checks = [check for check in checks if is_mfa(check)]
    if mfa_checks:
        instants = [(mfa_facts(check), check) for check in mfa_checks]
        timed_out = [(at, check) for (why, at), check in instants if why == "timedOut" and at is not None]
        if expired and timed_out:
            deadline, check = min(timed_out, key=lambda item: item[0])
            return ("mfaTimeout", deadline, check[0], check[3]["timeoutSeconds"], checks)
        if len(mfa_checks) == len(checks):
            now = mfa_checks[0][7]
            (why, since), check = min(instants, key=lambda item: item[0][1] if item[0][1] is not None else now)
            if why in ("wake", "unlock") and since is not None:
                return ("mfaGraceEnded", why, since, check[0], checks)
            if mfa_removed:
                return ("mfaRemoved", checks)
    return ("postureCheckFailed", checks)


def expand_cause(values: Sequence[Any]) -> dict[str, Any]:
    """The event's ``cause`` object for a cause in compact form (as stored: arrays may come back as lists)."""
    if values[0] == MFA_DECIDED:
        values = _decided(*values[1:])
    code = values[0]
    cause: dict[str, Any] = {"code": code, **dict(zip(CAUSE_FIELDS[code], values[1:], strict=True))}
    if "at" in cause:
        cause["at"] = format_time(cause["at"])
    if "checks" in cause:
        cause["checks"] = [expand_check(check) for check in cause["checks"]]
    return cause
