"""What policies give an identity: the service policies linking it to a service, their posture checks, the
services it may use and the edge routers it shares with one. Pure functions of a read snapshot.

Access for a session type is granted when at least one service policy of that type linking the identity and the
service passes; a policy passes when all its checks pass, so a policy with no checks always passes
(``controller/posture/plan.py`` evaluates them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from controller.access.policy_links import reachable, rows, selected_ids, selecting_policy_ids
from controller.model.spec import ReadContext

__all__ = [
    "access_digest",
    "common_edge_routers",
    "linking_policies",
    "mfa_checks_for",
    "policies_by_service",
    "policy_checks",
    "service_permissions_map",
]


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


def common_edge_routers(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any]) -> list[str]:
    """Edge routers reachable by the identity (edge router policies) and serving the service (service edge router
    policies), sorted by id."""
    return sorted(reachable(ctx, "edge-router-policies", "identities", identity, "edge-routers")
                  & reachable(ctx, "service-edge-router-policies", "services", service, "edge-routers"))
