"""Access decisions: which service policies link an identity to a service, and whether their posture checks pass.

Pure functions of a read snapshot, the identity's posture data and ``now``. Access for a session type is granted
when at least one service policy of that type linking the identity and the service passes; a policy passes when
all its checks pass, so a policy with no checks always passes. When no posture check exists at all, nothing is
evaluated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.policies import rows, selected_ids, selecting_policy_ids
from controller.posture.evaluate import CheckResult, MfaState, PostureData, evaluate_check, failure_entry
from controller.resources.context import ReadContext

__all__ = [
    "AccessDecision",
    "PolicyResult",
    "access_digest",
    "evaluate_access",
    "linking_policies",
    "mfa_checks_for",
    "policies_by_service",
    "policy_checks",
    "service_permissions_map",
]


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's verdict and the result of each of its checks (by check id)."""

    policy: Mapping[str, Any]
    passing: bool
    checks: tuple[tuple[Mapping[str, Any], CheckResult], ...]


@dataclass(frozen=True, slots=True)
class AccessDecision:
    """The verdict on (identity, service, session type).

    Attributes:
        linked: at least one policy of the type links identity and service (otherwise the service is not
            permitted for that type at all).
        granted: at least one of those policies passes.
        policies: every policy of the type that links them, with its check results.
        timed_out: the MFA checks whose timeout elapsed (the caller marks the API session's MFA timed out).
    """

    linked: bool
    granted: bool
    policies: tuple[PolicyResult, ...] = ()
    timed_out: bool = False
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passing_policy_ids(self) -> list[str]:
        return [str(p.policy["id"]) for p in self.policies if p.passing]


def linking_policies(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any],
                     session_type: str | None = None) -> list[dict[str, Any]]:
    """Service policies (of ``session_type`` when given) selecting both the identity and the service.

    Both sides come from the role index, so the cost does not grow with the number of policies. Do not mutate
    the result (it is shared).
    """
    identity_policies = selecting_policy_ids(ctx, "service-policies", "identities", identity)

    def compute() -> list[dict[str, Any]]:
        ids = identity_policies & selecting_policy_ids(ctx, "service-policies", "services", service)
        return [p for p in rows(ctx, "service-policies", sorted(ids))
                if session_type is None or p.get("type") == session_type]

    # Identities selected by the same policies are linked to a service by the same ones.
    return ctx.shared_cached(("linking", identity_policies, service["id"], session_type), compute)


def policies_by_service(ctx: ReadContext, identity: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every service the identity's service policies select, with those policies in id order (as
    :func:`linking_policies` gives them). One pass over the identity's policies instead of a policy lookup per
    service, shared by every identity those same policies select. Do not mutate the result."""
    policy_ids = selecting_policy_ids(ctx, "service-policies", "identities", identity)

    def compute() -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for policy in rows(ctx, "service-policies", sorted(policy_ids)):
            for service_id in selected_ids(ctx, "service-policies", policy, "services"):
                found.setdefault(service_id, []).append(policy)
        return found

    return ctx.shared_cached(("policies-by-service", policy_ids), compute)


def policy_checks(ctx: ReadContext, policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The posture checks a service policy selects through its ``postureCheckRoles``."""
    if not policy.get("postureCheckRoles"):
        return []
    return rows(ctx, "posture-checks", sorted(selected_ids(ctx, "service-policies", policy,
                                                                  "posture-checks")))


def mfa_checks_for(ctx: ReadContext, identity: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every MFA check of every service policy that selects the identity (the checks that can time it out).
    Do not mutate the result (it is shared by every identity those same policies select)."""
    policy_ids = selecting_policy_ids(ctx, "service-policies", "identities", identity)

    def compute() -> list[dict[str, Any]]:
        checks: dict[str, dict[str, Any]] = {}
        for policy in rows(ctx, "service-policies", sorted(policy_ids)):
            for check in policy_checks(ctx, policy):
                if check.get("typeId") == "MFA":
                    checks[str(check["id"])] = check
        return list(checks.values())

    return ctx.shared_cached(("mfa-checks", policy_ids), compute)


def evaluate_access(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any], session_type: str,
                    posture: PostureData, mfa: MfaState | None, now: float, *,
                    evaluate_posture: bool = True) -> AccessDecision:
    """Decide access for one session type; checks shared by several policies are evaluated once.

    With ``evaluate_posture`` False (the controller's global off switch) every linking policy passes whatever its
    posture checks say. With no posture check defined at all the answer is the same and costs one count.
    """
    txn = ctx.txn
    policies = linking_policies(ctx, identity, service, session_type)
    if not policies:
        return AccessDecision(False, False)
    if not evaluate_posture or ctx.shared_cached(("count", "posture-checks"),
                                                 lambda: txn.count("posture-checks")) == 0:
        results = tuple(PolicyResult(p, True, ()) for p in policies)
        return AccessDecision(True, True, results)
    cache: dict[str, CheckResult] = {}
    results_list: list[PolicyResult] = []
    timed_out = False
    for policy in policies:
        checked = []
        for check in policy_checks(ctx, policy):
            check_id = str(check["id"])
            result = cache.get(check_id)
            if result is None:
                result = cache[check_id] = evaluate_check(check, posture, mfa, now)
            timed_out = timed_out or result.timed_out
            checked.append((check, result))
        results_list.append(PolicyResult(policy, all(r.passing for _, r in checked), tuple(checked)))
    granted = any(r.passing for r in results_list)
    failures = [] if granted else [
        {"policyId": r.policy["id"], "policyName": r.policy.get("name", ""),
         "checks": [failure_entry(c, res) for c, res in r.checks if not res.passing]}
        for r in results_list
    ]
    return AccessDecision(True, granted, tuple(results_list), timed_out, failures)


def access_digest(ctx: ReadContext, identity: Mapping[str, Any]) -> str:
    """A fingerprint of what the identity may use: services with their session types, and the posture checks of
    the policies that grant them. When it changes, clients must refresh their service list."""
    policy_ids = selecting_policy_ids(ctx, "service-policies", "identities", identity)

    def compute() -> str:
        parts = []
        for policy in rows(ctx, "service-policies", sorted(policy_ids)):
            services = sorted(selected_ids(ctx, "service-policies", policy, "services"))
            checks = sorted(selected_ids(ctx, "service-policies", policy, "posture-checks"))
            parts.append(f"{policy.get('type')}:{','.join(services)}:{','.join(checks)}")
        return hashlib.sha256("|".join(sorted(parts)).encode()).hexdigest()

    return ctx.shared_cached(("access-digest", policy_ids), compute)


def service_permissions_map(ctx: ReadContext, identity: Mapping[str, Any]) -> dict[str, set[str]]:
    """Every service the identity may use, with its session types, from the policies that select it."""
    return {service_id: {str(p.get("type")) for p in policies}
            for service_id, policies in policies_by_service(ctx, identity).items()}
