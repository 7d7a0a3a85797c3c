"""Session decisions, re-evaluation and timer reports: pure functions of a snapshot, a state and ``now``.

The engine's shell calls these with the snapshot it holds; they return what to write and what to answer, never
writing themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.messages import CreateSession
from controller.clock import format_time
from controller.errors import ApiError, field_cause, not_found
from controller.policies import reachable, row, selecting_policy_ids
from controller.posture.access import evaluate_access, linking_policies, policy_checks, service_permissions_map
from controller.posture.evaluate import MFA_GRACE_SECONDS, MfaState, mfa_timeout
from controller.posture.machine import IdentityState
from controller.posture.plan import access_plan
from controller.resources.context import ReadContext
from controller.resources.edge_sessions import SAME_REQUEST

__all__ = ["Outcome", "common_edge_routers", "decide_session", "revaluate", "shares_edge_router", "timer_changes"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A session decision: the row to create, or the reply (an existing session or an ApiError), and a failure
    record to keep when posture refused it."""

    create: dict[str, Any] | None = None
    reply: Any = None
    failure: dict[str, Any] | None = None


def _mfa(state: IdentityState, api_session_id: str) -> MfaState | None:
    session = state.sessions.get(api_session_id)
    return session.mfa if session is not None else None


def common_edge_routers(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any]) -> list[str]:
    """Edge routers reachable by the identity (edge router policies) and serving the service (service edge router
    policies), sorted by id."""
    return sorted(reachable(ctx, "edge-router-policies", "identities", identity, "edge-routers")
                  & reachable(ctx, "service-edge-router-policies", "services", service, "edge-routers"))


def shares_edge_router(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    """Whether :func:`common_edge_routers` is non-empty, without building it: the decision needs only that, and at
    the large model both sides reach hundreds of routers (stops at the first common one)."""
    return not reachable(ctx, "edge-router-policies", "identities", identity, "edge-routers").isdisjoint(
        reachable(ctx, "service-edge-router-policies", "services", service, "edge-routers"))


def _criteria_times(entry: dict[str, Any]) -> dict[str, Any]:
    criteria = entry.get("criteria")
    if isinstance(criteria, dict):
        for key in ("passedMfaAt", "wokenAt", "unlockedAt"):
            value = criteria.get(key)
            criteria[key] = format_time(value) if isinstance(value, int | float) else value
    return entry


def decide_session(ctx: ReadContext, identity: Mapping[str, Any], state: IdentityState, request: CreateSession,
                   now: float, *, evaluate_posture: bool = True) -> Outcome:
    """The order of checks of the reference controller: idempotency, visibility, permission, posture, routers.

    ``evaluate_posture`` False skips the posture step (the controller's global off switch)."""
    txn = ctx.txn
    # The composite index finds the one session of this request, however many the API session holds.
    for session_id in txn.ids_by_fields("sessions", SAME_REQUEST,
                                        (request.api_session_id, request.service_id, request.session_type)):
        existing = txn.get("sessions", session_id)
        if existing is not None:
            return Outcome(reply=existing)
    service = txn.get("services", request.service_id)
    policies = linking_policies(ctx, identity, service) if service else []
    # Admins see every service (with no permission where no policy grants one); others only what policies grant.
    if service is None or not (policies or identity.get("isAdmin")):
        return Outcome(reply=not_found("service", request.service_id))
    if request.session_type not in {p.get("type") for p in policies}:
        return Outcome(reply=ApiError("COULD_NOT_VALIDATE",
                                      field_cause("ServiceId", "service not found", request.service_id)))
    mfa = _mfa(state, request.api_session_id)
    passing, _ = access_plan(ctx, identity, service, request.session_type).passing(
        state.posture, mfa, now, evaluate_posture=evaluate_posture)
    if not passing:
        # Refused: only now build the full report of every check (what the reply and the failure record show).
        decision = evaluate_access(ctx, identity, service, request.session_type, state.posture, mfa, now,
                                   evaluate_posture=evaluate_posture)
        failed = [p for p in decision.policies if not p.passing]
        cause = {
            "message": "Failed to pass posture checks for service policies: ["
                       + " ".join(str(p.policy["id"]) for p in failed) + "]",
            "data": {str(p.policy["id"]): [{"id": c["id"], "typeId": c.get("typeId"), "isPassing": r.passing}
                                           for c, r in p.checks if not r.passing] for p in failed},
        }
        failure = {"when": format_time(now), "serviceId": service["id"], "serviceName": service.get("name", ""),
                   "apiSessionId": request.api_session_id, "sessionType": request.session_type,
                   "policyFailures": [{**f, "checks": [_criteria_times(c) for c in f["checks"]]}
                                      for f in decision.failures]}
        return Outcome(reply=ApiError("INVALID_POSTURE", cause), failure=failure)
    if not shares_edge_router(ctx, identity, service):
        return Outcome(reply=ApiError("NO_EDGE_ROUTERS_AVAILABLE"))
    created = {"apiSessionId": request.api_session_id, "identityId": identity["id"], "serviceId": service["id"],
               "type": request.session_type, "token": str(uuid.uuid4()), "servicePolicies": passing,
               "tags": dict(request.tags)}
    return Outcome(create=created)


def revaluate(ctx: ReadContext, identity: Mapping[str, Any], state: IdentityState,
              now: float, *, evaluate_posture: bool = True) -> tuple[list[str], list[str]]:
    """Sessions of the identity that no longer pass (to delete) and API sessions whose MFA timed out.

    With ``evaluate_posture`` False only lost policies revoke a session; posture never does."""
    revoked: list[str] = []
    timed_out: set[str] = set()
    txn = ctx.txn
    for session_id in txn.ids_by_ref("sessions", "identityId", identity["id"]):
        session = txn.get("sessions", session_id)
        if session is None:
            continue
        service = row(ctx, "services", str(session["serviceId"]))
        if service is None:
            continue
        api_session_id = str(session["apiSessionId"])
        passing, expired = access_plan(ctx, identity, service, str(session["type"])).passing(
            state.posture, _mfa(state, api_session_id), now, evaluate_posture=evaluate_posture)
        if expired:
            timed_out.add(api_session_id)
        if not passing:
            revoked.append(session_id)
    return revoked, sorted(timed_out)


@dataclass(frozen=True, slots=True)
class _Prompt:
    """An MFA check that may restart its timer on a wake or unlock, as a service's timer report needs it."""

    on_wake: bool
    on_unlock: bool
    timeout: int  # mfa_timeout: timeoutSeconds, -1 when the check has none


def _prompts_by_service(ctx: ReadContext, identity: Mapping[str, Any]) -> tuple[tuple[str, str, tuple[_Prompt, ...]],
                                                                                  ...]:
    """Per service the identity may use (id order): its id, name and the MFA checks of its linking policies (policy
    order, then check order) that prompt on a wake or an unlock. Services without such a check are left out.

    Derived from policies, checks and services alone, so kept in the shared memo per set of policies selecting the
    identity: a wake or unlock report then walks only this list."""
    policy_ids = selecting_policy_ids(ctx, "service-policies", "identities", identity)

    def compute() -> tuple[tuple[str, str, tuple[_Prompt, ...]], ...]:
        found = []
        for service in ctx.txn.get_many("services", sorted(service_permissions_map(ctx, identity))):
            prompts = tuple(
                _Prompt(bool(check.get("promptOnWake")), bool(check.get("promptOnUnlock")), mfa_timeout(check))
                for policy in linking_policies(ctx, identity, service) for check in policy_checks(ctx, policy)
                if check.get("typeId") == "MFA" and (check.get("promptOnWake") or check.get("promptOnUnlock")))
            if prompts:
                found.append((str(service["id"]), str(service.get("name", "")), prompts))
        return tuple(found)

    return ctx.shared_cached(("mfa-prompts", policy_ids), compute)


def timer_changes(ctx: ReadContext, identity: Mapping[str, Any], state: IdentityState, api_session_id: str,
                  woken: bool, unlocked: bool, now: float) -> list[dict[str, Any]]:
    """Services of this identity whose MFA timer a wake/unlock just started (only after this session passed MFA):
    the first check of each service that prompts on the event and whose own timeout is not due within the grace."""
    mfa = _mfa(state, api_session_id)
    if mfa is None or mfa.passed_mfa_at is None or not (woken or unlocked):
        return []
    since = now - mfa.passed_mfa_at
    found: list[dict[str, Any]] = []
    for service_id, name, prompts in _prompts_by_service(ctx, identity):
        for prompt in prompts:
            prompted = (woken and prompt.on_wake) or (unlocked and prompt.on_unlock)
            if prompted and (prompt.timeout <= 0 or prompt.timeout - since > MFA_GRACE_SECONDS):
                found.append({"id": service_id, "name": name, "postureQueryType": "MFA",
                              "timeout": prompt.timeout, "timeoutRemaining": MFA_GRACE_SECONDS})
                break
    return found
