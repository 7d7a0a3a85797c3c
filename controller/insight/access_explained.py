"""Why an identity can or cannot use a service right now (``GET /identities/{id}/access/{serviceId}``,
``tollgate access IDENTITY SERVICE``).

For Dial and Bind the answer is the decision a session request of the identity would get at this instant
(:func:`controller.posture.decision.decide`, the function the identity actor decides requests with, on the same plan,
posture data and MFA state), explained: every service policy of the type linking them and through which of its role
entries, each posture check those policies require with its verdict against the identity's latest posture data (when
and by which API session it was reported; the failing rule in words; what would pass it), the next instant that will
change the answer (an MFA timeout, the end of a wake/unlock grace) and what the identity must do. The edge routers the
identity and the service have in common, whether online, and one line of verdict complete it.

MFA state belongs to an API session: the answer is for the one asked for, else the identity's most recently created
one (none: as a new login would find it, without MFA).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.access.grants import common_edge_routers
from controller.access.policy_links import reachable, role_field_name, rows
from controller.access.roles import ALL
from controller.clock import format_time
from controller.data.domain import Domain
from controller.errors import not_found
from controller.model.spec import ReadContext
from controller.posture.causes import mfa_failure_instant, remedy, reported_by, rule_words
from controller.posture.decision import GRANTED, Decision, decide
from controller.posture.plan import AccessPlan, ServiceAccess, identity_plan
from controller.posture.records import MfaState, PostureData
from controller.posture.rules import PASS, MfaRule
from controller.posture.service import PostureService
from controller.posture.state import IdentityState
from controller.resources.sessions import API_SESSIONS
from storage.store import Store

__all__ = ["SESSION_TYPES", "explain_access", "explain_identity_access"]

SESSION_TYPES = ("Dial", "Bind")
_REFUSALS = {
    "NOT_FOUND": "no service policy links the identity and the service",
    "COULD_NOT_VALIDATE": "no service policy of this type links the identity and the service",
    "INVALID_POSTURE": "every linking policy fails a posture check",
    "NO_EDGE_ROUTERS_AVAILABLE": "no edge router serves both the identity and the service",
}


def _selecting(row: Mapping[str, Any], roles: Sequence[str], semantic: str) -> list[str]:
    """The entries of a role list through which it selects ``row`` (``#all``, ``@id``, or its attributes)."""
    if ALL in roles:
        return [ALL]
    named = [r for r in roles if r == f"@{row['id']}"]
    attributes = [r for r in roles if r.startswith("#")]
    have = set(row.get("roleAttributes") or ())
    held = [r for r in attributes if r[1:] in have]
    matched = bool(attributes) and (len(held) == len(attributes) if semantic == "AllOf" else bool(held))
    return named + (held if matched else [])


def _api_session(api_sessions: Sequence[Mapping[str, Any]], wanted: str | None) -> Mapping[str, Any] | None:
    if wanted is not None:
        return next((row for row in api_sessions if row["id"] == wanted), None)
    return max(api_sessions, key=lambda row: (str(row.get("createdAt", "")), str(row["id"])), default=None)


def _policy(ctx: ReadContext, policy: Mapping[str, Any], plan_rules: Sequence[Any], identity: Mapping[str, Any],
            service: Mapping[str, Any], decision: Decision, data: PostureData, mfa: MfaState | None,
            now: float) -> dict[str, Any]:
    semantic = str(policy.get("semantic") or "AllOf")
    checks = []
    check_roles = policy.get(role_field_name(ctx, "service-policies", "posture-checks")) or []
    for rule in plan_rules:
        report = rule.report(data, mfa, now)
        reported_at, reporter = reported_by(rule, data, mfa)
        entry: dict[str, Any] = {
            "id": rule.check.get("id"), "name": rule.check.get("name"), "typeId": rule.check.get("typeId"),
            "reportOnly": rule.report_only, "passing": report.passing,
            "selectedBy": _selecting(rule.check, check_roles, semantic), "reportedAt": reported_at,
            "reportedBy": reporter, "rule": None, "reported": report.actual_value,
            "required": report.expected_value, "remedy": None, "at": None}
        if not report.passing:
            entry.update(rule=rule_words(rule, report, data, mfa, now), remedy=remedy(rule, report))
            if isinstance(rule, MfaRule):
                at = mfa_failure_instant(rule, mfa, now)[1]
                entry["at"] = format_time(at) if at is not None else None
        checks.append(entry)
    passing = str(policy["id"]) in decision.policy_ids if decision.code != "INVALID_POSTURE" else False
    return {"id": policy["id"], "name": policy.get("name"), "semantic": semantic, "passing": passing,
            "linkedBy": {"identityRoles": _selecting(identity, policy.get("identityRoles") or [], semantic),
                         "serviceRoles": _selecting(service, policy.get("serviceRoles") or [], semantic)},
            "checks": checks}


def _next_change(access: ServiceAccess, access_plan: AccessPlan, session_type: str, decision: Decision,
                 data: PostureData, mfa: MfaState | None, now: float, evaluate_posture: bool) -> dict[str, Any] | None:
    """The first MFA deadline at which the decision changes (decided again at that instant), or None."""
    if mfa is None or not evaluate_posture:
        return None
    instants = sorted({at for rule in access_plan.rules if isinstance(rule, MfaRule) and not rule.report_only
                       and rule.verdict(data, mfa, now) == PASS
                       and (at := rule.deadline(mfa)) is not None and at > now})
    for at in instants:
        later = decide(access, session_type, data, mfa, at, evaluate_posture=evaluate_posture)
        if later.code != decision.code:
            return {"at": format_time(at), "code": later.code,
                    "reason": "an MFA check of the passing policies starts failing (its timeout, or the end of a "
                              "wake/unlock grace)",
                    "action": f"submit a TOTP code (POST /authenticate/mfa) before {format_time(at)}"}
    return None


def _for_type(ctx: ReadContext, access: ServiceAccess | None, session_type: str, identity: Mapping[str, Any],
              service: Mapping[str, Any], data: PostureData, mfa: MfaState | None, now: float,
              evaluate_posture: bool) -> dict[str, Any]:
    decision = decide(access, session_type, data, mfa, now, evaluate_posture=evaluate_posture)
    access_plan = access.plans.get(session_type) if access is not None else None
    policies: list[dict[str, Any]] = []
    actions: list[str] = []
    next_change = None
    if access is not None and access_plan is not None:
        for policy, rules in zip(access_plan.policies, access_plan.checks, strict=True):
            policies.append(_policy(ctx, policy, rules, identity, service, decision, data, mfa, now))
        if decision.code == "INVALID_POSTURE":
            for policy, rules in zip(access_plan.policies, access_plan.checks, strict=True):
                failing = [remedy(rule, rule.report(data, mfa, now)) for rule in rules
                           if not rule.report_only and rule.verdict(data, mfa, now) != PASS]
                actions.append(f"to pass policy {policy.get('name')}: " + "; ".join(dict.fromkeys(failing)))
        next_change = _next_change(access, access_plan, session_type, decision, data, mfa, now, evaluate_posture)
        if next_change is not None:
            actions.append(next_change["action"])
    if decision.code == GRANTED:
        summary = f"{session_type} allowed through " + ", ".join(
            str(p["name"]) for p in policies if p["passing"])
    else:
        summary = f"{session_type} refused ({decision.code}): {_REFUSALS.get(decision.code, decision.code)}"
    return {"type": session_type, "allowed": decision.granted, "code": decision.code, "summary": summary,
            "policyIds": list(decision.policy_ids), "policies": policies, "nextChange": next_change,
            "actions": actions}


def explain_access(ctx: ReadContext, store: Store, identity: Mapping[str, Any], service: Mapping[str, Any],
                   state: IdentityState, api_sessions: Sequence[Mapping[str, Any]], api_session_id: str | None,
                   now: float, *, evaluate_posture: bool) -> dict[str, Any]:
    """The explanation (see the module docstring) as the API answers it: ``identity``, ``service``,
    ``evaluatedAt``, ``postureEvaluation``, ``apiSession`` (the one evaluated, or None) and ``otherApiSessionIds``,
    ``sessionTypes`` (Dial then Bind: ``allowed``, ``code``, ``summary``, ``policyIds``, ``policies``,
    ``nextChange``, ``actions``), ``edgeRouters`` and ``verdict``.

    Raises:
        LookupError: ``api_session_id`` names no API session of the identity.
    """
    chosen = _api_session(api_sessions, api_session_id)
    if api_session_id is not None and chosen is None:
        raise LookupError(api_session_id)
    session = state.sessions.get(str(chosen["id"])) if chosen is not None else None
    mfa = session.mfa if session is not None else None
    plan = identity_plan(ctx, identity, store)
    access = plan.service(ctx, str(service["id"]))
    types = [_for_type(ctx, access, session_type, identity, service, state.posture, mfa, now, evaluate_posture)
             for session_type in SESSION_TYPES]
    common = rows(ctx, "edge-routers", common_edge_routers(ctx, identity, service))
    routers: dict[str, Any] = {
        "identityRouterCount": len(reachable(ctx, "edge-router-policies", "identities", identity, "edge-routers")),
        "serviceRouterCount": len(reachable(ctx, "service-edge-router-policies", "services", service,
                                            "edge-routers")),
        # No router connects to this controller yet: each is offline, as the edge router detail shows it.
        "common": [{"id": r["id"], "name": r.get("name"), "isOnline": False, "disabled": bool(r.get("disabled"))}
                   for r in common]}
    verdict = "; ".join(t["summary"] for t in types)
    if common and not any(r["isOnline"] for r in routers["common"]):
        verdict += f"; none of the {len(common)} common edge router(s) is online"
    return {
        "identity": {"id": identity["id"], "name": identity.get("name")},
        "service": {"id": service["id"], "name": service.get("name")},
        "evaluatedAt": format_time(now), "postureEvaluation": evaluate_posture,
        "apiSession": None if chosen is None else {"id": chosen["id"], "createdAt": chosen.get("createdAt"),
                                                    "lastActivityAt": chosen.get("lastActivityAt")},
        "otherApiSessionIds": sorted(str(row["id"]) for row in api_sessions if chosen is None
                                     or row["id"] != chosen["id"]),
        "sessionTypes": types, "edgeRouters": routers, "verdict": verdict,
    }


async def explain_identity_access(domain: Domain, posture: PostureService, identity_id: str, service_id: str,
                                  api_session_id: str | None, *, evaluate_posture: bool) -> dict[str, Any]:
    """:func:`explain_access` for the identity and service of these ids, now: the identity's state from its actor
    (every earlier message handled, on whichever node hosts it), its API sessions and the model from one snapshot. What
    ``GET /identities/{id}/access/{serviceId}`` and the console's access page answer.

    Raises:
        ApiError: 404 for an identity, a service or an API session of the identity that does not exist.
    """
    with domain.read() as ctx:
        identity = ctx.txn.get("identities", identity_id)
        service = ctx.txn.get("services", service_id)
    if identity is None:
        raise not_found("identity", identity_id)
    if service is None:
        raise not_found("service", service_id)
    state = await posture.state(identity_id)
    with domain.read() as ctx:
        api_sessions = ctx.txn.get_many(API_SESSIONS.kind,
                                        ctx.txn.ids_by_ref(API_SESSIONS.kind, "identityId", identity_id))
        try:
            return explain_access(ctx, domain.store, identity, service, state, api_sessions, api_session_id, ctx.now,
                                  evaluate_posture=evaluate_posture)
        except LookupError:
            raise not_found("apiSession", str(api_session_id)) from None
