"""What the Client API shows an endpoint about a service: its permissions and posture queries.

Pure functions of a snapshot, the identity's posture state, the calling API session and ``now``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from controller.access.grants import policies_by_service, policy_checks
from controller.clock import format_time, parse_time
from controller.data.present import link
from controller.model.spec import ReadContext
from controller.posture.plan import rule_of
from controller.posture.records import MfaState, mfa_timeout, mfa_timeout_remaining
from controller.posture.state import IdentityState

__all__ = ["is_legacy_sdk", "posture_queries", "service_permissions"]

_DUMMY = "dummy {} policy: no posture checks defined"


def is_legacy_sdk(sdk_info: Mapping[str, Any]) -> bool:
    """An SDK that cannot prompt for MFA: anything but ziti-sdk-c 0.25.0 or later."""
    if sdk_info.get("type") != "ziti-sdk-c":
        return True
    try:
        parts = [int(p) for p in str(sdk_info.get("version", "")).lstrip("v").split("-")[0].split(".")[:3]]
    except ValueError:
        return True
    return parts < [0, 25, 0]


def service_permissions(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any]) -> list[str]:
    """``Dial``/``Bind`` through policies; an admin with neither sees the service as ``Invalid``."""
    types = {str(p.get("type")) for p in policies_by_service(ctx, identity).get(service["id"], ())}
    found: list[str] = [t for t in ("Dial", "Bind") if t in types]
    if not found and identity.get("isAdmin"):
        return ["Invalid"]
    return found


def _query(ctx: ReadContext, check: Mapping[str, Any], state: IdentityState, mfa: MfaState | None, legacy: bool,
           now: float) -> dict[str, Any]:
    result = rule_of(ctx, check).report(state.posture, mfa, now)
    query: dict[str, Any] = {
        "id": check["id"], "createdAt": check.get("createdAt"), "updatedAt": check.get("updatedAt"),
        "tags": check.get("tags") or {}, "_links": {"self": link(f"posture-checks/{check['id']}")},
        "queryType": check.get("typeId"), "isPassing": result.passing, "timeout": -1, "timeoutRemaining": -1,
    }
    if check.get("typeId") == "MFA":
        query["timeout"] = mfa_timeout(check)
        query["timeoutRemaining"] = mfa_timeout_remaining(check, mfa, now, legacy=legacy)
        if mfa is not None and mfa.passed_mfa_at is not None:
            events = [t for t, on in ((mfa.woken_at, check.get("promptOnWake")),
                                      (mfa.unlocked_at, check.get("promptOnUnlock"))) if on and t is not None]
            updated = parse_time(str(check.get("updatedAt"))) if check.get("updatedAt") else 0.0
            latest = max(events, default=None)
            if latest is not None and latest > updated:
                query["updatedAt"] = format_time(latest)
    elif check.get("typeId") == "PROCESS":
        process = check.get("process") or {}
        query["process"] = {"osType": process.get("osType"), "path": process.get("path")}
    elif check.get("typeId") == "PROCESS_MULTI":
        query["processes"] = [{"osType": p.get("osType"), "path": p.get("path")} for p in check.get("processes") or []]
    return query


def _legacy_session(ctx: ReadContext, api_session_id: str) -> bool:
    row = ctx.txn.get("api-sessions", api_session_id)
    return is_legacy_sdk((row or {}).get("sdkInfo") or {})


def posture_queries(ctx: ReadContext, identity: Mapping[str, Any], service: Mapping[str, Any], state: IdentityState,
                    api_session_id: str, now: float) -> list[dict[str, Any]]:
    """One entry per service policy (Dial and Bind) linking identity and service, with its checks as queries. The
    SDK the API session reported at login (on its row) decides whether the endpoint is a legacy one.

    Each check is evaluated once per snapshot (``ctx.memo``) however many services and policies share it, so pass
    the same ``state``, ``api_session_id`` and ``now`` for every service listed with one ``ctx``.
    """
    if ctx.txn.count("posture-checks") == 0:
        return [{"policyId": _DUMMY.format(p.lower()), "policyType": p, "isPassing": True, "postureQueries": []}
                for p in service_permissions(ctx, identity, service)]
    session = state.sessions.get(api_session_id)
    mfa = session.mfa if session is not None else None
    legacy = ctx.cached(("legacy-sdk", api_session_id), functools.partial(_legacy_session, ctx, api_session_id))
    entries = []
    for policy in policies_by_service(ctx, identity).get(service["id"], ()):
        queries = [ctx.cached(("posture-query", check["id"], api_session_id),
                              functools.partial(_query, ctx, check, state, mfa, legacy, now))
                   for check in policy_checks(ctx, policy)]
        entries.append({"policyId": policy["id"], "policyType": policy.get("type"),
                        "isPassing": all(q["isPassing"] for q in queries), "postureQueries": queries})
    return entries
