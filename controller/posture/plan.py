"""Identity plans: everything an identity's access depends on, worked out once and kept in memory, so that an
actor step evaluates posture against it and reads nothing else.

An identity's access follows from the policies that select it (by its role attributes, or by naming it) and from
the policies, checks, services and routers they lead to. An :class:`IdentityPlan` holds what the posture engine
needs of that: the service policies and edge router policies selecting the identity, its access digest, the MFA
checks that can time it out, the wake/unlock prompts per service, and, filled in as sessions are checked or
requested, per service the linking policies with their checks compiled to rules (``controller/posture/rules.py``).

Plans are kept in the store's shared memo, keyed by what they depend on, so every identity with the same roles
shares one; they are valid until a write to a kind that shapes access (policies, checks, services, routers)
replaces the memo (:meth:`IdentityPlan.valid`), and an identity whose own roles change asks for a new one
(``Reevaluate``). Building one reads a snapshot; using one reads nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import mul
from typing import Any

from controller.access.grants import access_digest, linking_policies, policy_checks, service_permissions_map
from controller.access.policy_links import reachable, row, rows, selected_ids, selecting_policy_ids
from controller.model.spec import ReadContext
from controller.posture.records import MfaState, PostureData, mfa_timeout
from controller.posture.rules import PASS, TIMED_OUT, CheckResult, MfaRule, Rule, compile_rule, failure_entry
from storage.store import Store

__all__ = ["AccessPlan", "IdentityPlan", "Prompt", "ServiceAccess", "identity_plan", "rule_of"]


def rule_of(ctx: ReadContext, check: Mapping[str, Any]) -> Rule:
    """The compiled rule of a stored check, shared until checks change."""
    return ctx.shared_cached(("rule", check["id"]), lambda: compile_rule(check))


class AccessPlan:
    """The service policies of one type linking an identity and a service (id order), each with its checks.

    Policies usually share their checks (a network requires the same few checks everywhere), so the plan keeps the
    distinct rules once, and per distinct set of checks the positions of its rules: answering evaluates each
    distinct rule once and each distinct set once. A report-only rule (``Rule.report_only``) is evaluated with the
    others and counts as passing when the plan decides; :meth:`would_deny` says whether it would have decided
    otherwise.
    """

    __slots__ = ("checks", "enforced", "groups", "mfa", "pairs", "policies", "policy_group", "policy_ids",
                 "report_only", "reporting", "rule_policies", "rules")

    def __init__(self, policies: tuple[Mapping[str, Any], ...], checks: tuple[tuple[Rule, ...], ...]) -> None:
        self.policies = policies
        self.checks = checks
        self.policy_ids = [str(p["id"]) for p in policies]
        positions_of: dict[int, int] = {}  # id(rule) -> its position in self.rules
        distinct: list[Rule] = []
        groups: dict[tuple[int, ...], int] = {}
        policy_group: list[int] = []
        for policy_rules in checks:
            positions = []
            for rule in policy_rules:
                if id(rule) not in positions_of:
                    positions_of[id(rule)] = len(distinct)
                    distinct.append(rule)
                positions.append(positions_of[id(rule)])
            policy_group.append(groups.setdefault(tuple(positions), len(groups)))
        self.rules = tuple(distinct)
        self.groups = tuple(groups)
        self.policy_group = tuple(policy_group)
        self.report_only = tuple(i for i, rule in enumerate(distinct) if rule.report_only)
        self.mfa = any(isinstance(rule, MfaRule) for rule in distinct)
        # Per distinct rule, the policies requiring it (what a failing check's report names).
        self.rule_policies = tuple(tuple(policy_id for policy_id, rules in zip(self.policy_ids, checks, strict=True)
                                         if any(r is rule for r in rules)) for rule in distinct)
        # Each rule with its policies, and which are enforced (1) or report-only: failing_rules picks from them by
        # the verdicts (PASS is 0) without a loop of its own.
        self.pairs = tuple(zip(self.rules, self.rule_policies, strict=True))
        self.enforced = tuple(0 if rule.report_only else 1 for rule in distinct)
        self.reporting = tuple(1 - flag for flag in self.enforced)

    def passing(self, data: PostureData, mfa: MfaState | None, now: float, *,
                evaluate_posture: bool = True) -> tuple[list[str], bool]:
        """The ids of the policies that pass (access is granted when there is one), and whether an MFA timeout
        elapsed. Every check is evaluated, so that a timed-out MFA check is reported even when another policy
        grants access. With ``evaluate_posture`` False every policy passes. Report-only checks count as passing
        (and their MFA timeouts as not elapsed)."""
        passing, expired, _ = self.evaluate(data, mfa, now, evaluate_posture=evaluate_posture)
        return passing, expired

    def evaluate(self, data: PostureData, mfa: MfaState | None, now: float, *,
                 evaluate_posture: bool = True) -> tuple[list[str], bool, list[int] | None]:
        """As :meth:`passing`, with each distinct rule's own verdict (report-only ones as they are; None when
        posture is not evaluated): what :meth:`failing` and :meth:`would_deny` read, so that nothing is evaluated
        twice."""
        if not evaluate_posture:
            return list(self.policy_ids), False, None
        verdicts = [rule.verdict(data, mfa, now) for rule in self.rules]
        results = verdicts
        if self.report_only:
            results = list(verdicts)
            for position in self.report_only:
                results[position] = PASS
        if not any(results):  # every check passes (PASS is 0), so every policy does (inline: the hot path)
            return list(self.policy_ids), False, verdicts
        passing, expired = self._decided(results)
        return passing, expired, verdicts

    def _decided(self, results: list[int]) -> tuple[list[str], bool]:
        if not any(results):  # every check passes (PASS is 0), so every policy does
            return list(self.policy_ids), False
        ok = [all(results[i] == PASS for i in group) for group in self.groups]
        return ([policy_id for policy_id, group in zip(self.policy_ids, self.policy_group, strict=True) if ok[group]],
                TIMED_OUT in results)

    def would_deny(self, verdicts: list[int] | None) -> bool:
        """Whether no policy would pass if the report-only checks were enforced, from :meth:`evaluate`'s verdicts
        (only meaningful while some policy passes without them)."""
        if not self.report_only or verdicts is None:
            return False
        return not self._decided(verdicts)[0]

    def failing(self, verdicts: list[int] | None, data: PostureData, mfa: MfaState | None, now: float, *,
                report_only: bool = False) -> list[tuple[Rule, CheckResult, tuple[str, ...]]]:
        """Each distinct check that fails by :meth:`evaluate`'s ``verdicts`` (the enforced ones, or with
        ``report_only`` the report-only ones), with its report and the policies requiring it."""
        if verdicts is None:
            return []
        return [(rule, rule.report(data, mfa, now), self.rule_policies[position])
                for position, rule in enumerate(self.rules)
                if verdicts[position] != PASS and rule.report_only == report_only]

    def failing_rules(self, verdicts: list[int] | None, *, report_only: bool = False) -> list[tuple[Rule,
                                                                                                  tuple[str, ...]]]:
        """As :meth:`failing`, without the reports: each distinct failing rule and the policies requiring it."""
        if verdicts is None:
            return []
        if not self.report_only:
            return [] if report_only else list(compress(self.pairs, verdicts))
        return list(compress(self.pairs, map(mul, verdicts, self.reporting if report_only else self.enforced)))

    def refusal(self, failed: list[tuple[Rule, CheckResult, tuple[str, ...]]]) -> tuple[dict[str, Any],
                                                                                           list[dict[str, Any]]]:
        """Why no policy passes, from what :meth:`failing` found: the INVALID_POSTURE cause (failing checks by
        policy) and the ``policyFailures`` of the failed service request (every failing enforced check with its
        values)."""
        reports = {id(rule): report for rule, report, _ in failed}
        by_policy = [(policy, [(rule, reports[id(rule)]) for rule in rules if id(rule) in reports])
                     for policy, rules in zip(self.policies, self.checks, strict=True)]
        cause = {
            "message": "Failed to pass posture checks for service policies: ["
                       + " ".join(str(p["id"]) for p, _ in by_policy) + "]",
            "data": {str(p["id"]): [{"id": r.check["id"], "typeId": r.check.get("typeId"), "isPassing": False}
                                    for r, _ in bad] for p, bad in by_policy},
        }
        failures = [{"policyId": p["id"], "policyName": p.get("name", ""),
                     "checks": [failure_entry(r.check, report) for r, report in bad]} for p, bad in by_policy]
        return cause, failures


@dataclass(frozen=True, slots=True)
class ServiceAccess:
    """What one service is to an identity: its name, the session types the identity may have (by linking
    policies), each type's access plan, and whether they share an edge router."""

    service_id: str
    name: str
    plans: Mapping[str, AccessPlan]
    routed: bool


@dataclass(frozen=True, slots=True)
class Prompt:
    """An MFA check that may restart its timer on a wake or unlock, as a service's timer report needs it."""

    on_wake: bool
    on_unlock: bool
    timeout: int  # mfa_timeout: timeoutSeconds, -1 when the check has none


@dataclass(slots=True)
class IdentityPlan:
    """See the module docstring. Shared by every identity with the same roles: do not change it."""

    token: object  # the shared memo it was built in; None when built outside one (valid for one step only)
    policy_ids: frozenset[str]  # service policies selecting the identity
    router_ids: frozenset[str]  # edge routers the identity reaches (edge router policies)
    is_admin: bool
    digest: str
    mfa_rules: tuple[MfaRule, ...]
    prompts: tuple[tuple[str, str, tuple[Prompt, ...]], ...]  # per service (id order): id, name, its prompts
    services: dict[str, ServiceAccess | None] = field(default_factory=dict)

    def valid(self, store: Store) -> bool:
        """Whether nothing that shapes access has been written since the plan was built."""
        return self.token is not None and self.token is store.memo_token()

    def service(self, ctx: ReadContext, service_id: str) -> ServiceAccess | None:
        """What ``service_id`` is to the identity (None: no such service, or no policy links them), worked out
        on first use."""
        try:
            return self.services[service_id]
        except KeyError:
            found = self.services[service_id] = _service_access(ctx, self, service_id)
            return found


def _service_access(ctx: ReadContext, plan: IdentityPlan, service_id: str) -> ServiceAccess | None:
    service = row(ctx, "services", service_id)
    if service is None:
        return None
    linking = plan.policy_ids & selecting_policy_ids(ctx, "service-policies", "services", service)
    plans: dict[str, AccessPlan] = {}
    for session_type in ("Dial", "Bind"):
        policies = tuple(p for p in rows(ctx, "service-policies", sorted(linking)) if p.get("type") == session_type)
        if policies:
            plans[session_type] = AccessPlan(policies, tuple(tuple(rule_of(ctx, c) for c in policy_checks(ctx, p))
                                                             for p in policies))
    if not plans and not plan.is_admin:
        return None
    routers = reachable(ctx, "service-edge-router-policies", "services", service, "edge-routers")
    return ServiceAccess(service_id, str(service.get("name", "")), plans, not plan.router_ids.isdisjoint(routers))


def identity_plan(ctx: ReadContext, identity: Mapping[str, Any], store: Store) -> IdentityPlan:
    """The plan of ``identity`` (its row) as of ``ctx``'s snapshot; shared with every identity of the same roles."""
    policy_ids = selecting_policy_ids(ctx, "service-policies", "identities", identity)
    router_policies = selecting_policy_ids(ctx, "edge-router-policies", "identities", identity)
    is_admin = bool(identity.get("isAdmin"))

    def build() -> IdentityPlan:
        routers: set[str] = set()
        for policy in rows(ctx, "edge-router-policies", sorted(router_policies)):
            routers |= selected_ids(ctx, "edge-router-policies", policy, "edge-routers")
        mfa: dict[str, MfaRule] = {}
        for policy in rows(ctx, "service-policies", sorted(policy_ids)):
            for check in policy_checks(ctx, policy):
                rule = rule_of(ctx, check)
                if isinstance(rule, MfaRule):
                    mfa[str(check["id"])] = rule
        return IdentityPlan(ctx.shared, policy_ids, frozenset(routers), is_admin,
                            access_digest(ctx, identity), tuple(mfa.values()), _prompts(ctx, identity))

    return ctx.shared_cached(("identity-plan", policy_ids, router_policies, is_admin), build)


def _prompts(ctx: ReadContext, identity: Mapping[str, Any]) -> tuple[tuple[str, str, tuple[Prompt, ...]], ...]:
    """Per service the identity may use (id order): its id, name and the MFA checks of its linking policies
    (policy order, then check order) that prompt on a wake or an unlock; services without one are left out."""
    found = []
    for service in ctx.txn.get_many("services", sorted(service_permissions_map(ctx, identity))):
        prompts = tuple(
            Prompt(bool(check.get("promptOnWake")), bool(check.get("promptOnUnlock")), mfa_timeout(check))
            for policy in linking_policies(ctx, identity, service) for check in policy_checks(ctx, policy)
            if check.get("typeId") == "MFA" and (check.get("promptOnWake") or check.get("promptOnUnlock")))
        if prompts:
            found.append((str(service["id"]), str(service.get("name", "")), prompts))
    return tuple(found)
