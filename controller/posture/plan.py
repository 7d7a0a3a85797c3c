"""Access plans: the service policies linking an identity to a service for one session type, with their posture
checks compiled to verdicts (``controller/posture/verdict.py``).

Re-evaluating a session (after every posture report, wake, unlock and MFA deadline) and granting one both ask the
same question of the same policies again and again; only the identity's posture data and MFA state differ. A plan
is worked out once per (policies selecting the identity, service, session type) and kept in the store's shared memo
(``ReadContext.shared_cached``) until a policy, check or service changes, so it is shared by every identity those
same policies select; answering it is a few verdict calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.policies import selecting_policy_ids
from controller.posture.access import linking_policies, policy_checks
from controller.posture.evaluate import MfaState, PostureData
from controller.posture.verdict import PASS, TIMED_OUT, Verdict, compile_check
from controller.resources.context import ReadContext

__all__ = ["AccessPlan", "access_plan"]


@dataclass(frozen=True, slots=True)
class AccessPlan:
    """The linking policies' ids in id order, and per policy its checks as (check id, verdict)."""

    policy_ids: tuple[str, ...]
    checks: tuple[tuple[tuple[str, Verdict], ...], ...]

    def passing(self, posture: PostureData, mfa: MfaState | None, now: float, *,
                evaluate_posture: bool = True) -> tuple[list[str], bool]:
        """The ids of the policies that pass (access is granted when there is one), and whether an MFA timeout
        elapsed: ``passing_policy_ids`` and ``timed_out`` of :func:`controller.posture.access.evaluate_access`.

        A check several policies share is evaluated once; every check is evaluated, so that a timed-out MFA check
        is reported even when another policy grants access. With ``evaluate_posture`` False every policy passes.
        """
        if not evaluate_posture:
            return list(self.policy_ids), False
        results: dict[str, int] = {}
        passing: list[str] = []
        timed_out = False
        for policy_id, checks in zip(self.policy_ids, self.checks, strict=True):
            ok = True
            for check_id, verdict in checks:
                result = results.get(check_id)
                if result is None:
                    result = results[check_id] = verdict(posture, mfa, now)
                    timed_out = timed_out or result == TIMED_OUT
                ok = ok and result == PASS
            if ok:
                passing.append(policy_id)
        return passing, timed_out


def access_plan(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any],
                session_type: str) -> AccessPlan:
    """The plan of (identity, service, session type); shared, do not mutate."""
    identity_policies = selecting_policy_ids(ctx, "service-policies", "identities", identity)

    def compute() -> AccessPlan:
        policies = linking_policies(ctx, identity, service, session_type)
        return AccessPlan(tuple(str(p["id"]) for p in policies),
                          tuple(tuple((str(c["id"]), _verdict(ctx, c)) for c in policy_checks(ctx, p))
                                for p in policies))

    return ctx.shared_cached(("plan", identity_policies, service["id"], session_type), compute)


def _verdict(ctx: ReadContext, check: Mapping[str, Any]) -> Verdict:
    return ctx.shared_cached(("verdict", check["id"]), lambda: compile_check(check))
