"""``tollgate policy-advice IDENTITY SERVICE`` and ``tollgate posture IDENTITY``: why an identity can or cannot use
a service, and what the controller knows of its posture, written for people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from controller.admin.invocation import State, controller_option, emit, output_options, pass_state
from controller.admin.output import cell

__all__ = ["advice_report", "policy_advice", "posture", "posture_report"]


def _named(ref: Any, fallback: str) -> str:
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return f"{name} ({fallback})" if name else fallback


def advice_report(advice: Mapping[str, Any]) -> str:
    """Policy advice (``GET /identities/{id}/policy-advice/{serviceId}``) as a verdict and the facts behind it."""
    identity = _named(advice.get("identity"), str(advice.get("identityId")))
    service = _named(advice.get("service"), str(advice.get("serviceId")))
    allowed = [verb for verb, key in (("dial", "isDialAllowed"), ("bind", "isBindAllowed")) if advice.get(key)]
    routers = list(advice.get("commonRouters") or [])
    lines = [f"identity:        {identity}", f"service:         {service}",
             f"dial:            {'allowed' if advice.get('isDialAllowed') else 'not allowed'}",
             f"bind:            {'allowed' if advice.get('isBindAllowed') else 'not allowed'}",
             f"edge routers:    {advice.get('identityRouterCount', 0)} for the identity, "
             f"{advice.get('serviceRouterCount', 0)} for the service, {len(routers)} in common"]
    lines.extend(f"  {router.get('name') or router.get('id')}  {'online' if router.get('isOnline') else 'offline'}"
                 for router in routers)
    if not allowed:
        lines.append("verdict:         no service policy lets the identity dial or bind the service")
    elif not routers:
        lines.append(f"verdict:         {' and '.join(allowed)} allowed, but no edge router serves both: check the "
                     "edge router policies and the service edge router policies")
    elif not any(router.get("isOnline") for router in routers):
        lines.append(f"verdict:         {' and '.join(allowed)} allowed, but none of the common edge routers is online")
    else:
        lines.append(f"verdict:         {' and '.join(allowed)} allowed")
    return "\n".join(lines)


def _check_failure(check: Mapping[str, Any]) -> str:
    head = f"{check.get('postureCheckName') or check.get('postureCheckId')} ({check.get('postureCheckType')})"
    if "actualValue" in check or "expectedValue" in check:
        return f"{head}: has {cell(check.get('actualValue'))}, needs {cell(check.get('expectedValue'))}"
    return head


def _posture_lines(data: Mapping[str, Any]) -> list[str]:
    os = data.get("os") or {}
    mac = data.get("mac") or {}
    domain = data.get("domain") or {}
    lines = [
        f"os:       {cell(os.get('type'))} {cell(os.get('version'))} build {cell(os.get('build'))}"
        f" (updated {cell(os.get('lastUpdatedAt'))})" if os.get("lastUpdatedAt") else "os:       not reported",
        f"mac:      {cell(mac.get('addresses'))} (updated {cell(mac.get('lastUpdatedAt'))})"
        if mac.get("lastUpdatedAt") else "mac:      not reported",
        f"domain:   {cell(domain.get('domain'))} (updated {cell(domain.get('lastUpdatedAt'))})"
        if domain.get("lastUpdatedAt") else "domain:   not reported",
    ]
    processes = list(data.get("processes") or [])
    lines.append(f"processes: {len(processes) or 'none reported'}")
    lines.extend(f"  check {p.get('postureCheckId')}: {'running' if p.get('isRunning') else 'not running'}, "
                 f"hash {cell(p.get('binaryHash'))}, signers {cell(p.get('signerFingerprints'))}"
                 f"{', timed out' if p.get('timedOut') else ''}" for p in processes)
    sessions = dict(data.get("apiSessionPostureData") or {})
    lines.append(f"api sessions: {len(sessions) or 'none'}")
    for session_id, entry in sorted(sessions.items()):
        mfa = entry.get("mfa") or {}
        state = entry.get("endpointState") or {}
        passed = f"passed at {cell(mfa.get('passedAt'))}" if mfa.get("passedMfa") else "not passed"
        lines.append(f"  {session_id}: mfa {passed}, woken {cell(state.get('wokenAt'))}, "
                     f"unlocked {cell(state.get('unlockedAt'))}")
    return lines


def posture_report(data: Mapping[str, Any], failures: list[Mapping[str, Any]]) -> str:
    """Posture data and failed service requests of one identity as people read them."""
    lines = _posture_lines(data)
    lines.append(f"failed service requests: {len(failures) or 'none'}")
    for failure in failures:
        lines.append(f"  {failure.get('when')}  {failure.get('sessionType')} "
                     f"{failure.get('serviceName') or failure.get('serviceId')}  "
                     f"(api session {failure.get('apiSessionId')})")
        for policy in failure.get("policyFailures") or []:
            checks = "; ".join(_check_failure(check) for check in policy.get("checks") or [])
            lines.append(f"    policy {policy.get('policyName') or policy.get('policyId')}: {checks or '-'}")
    return "\n".join(lines)


@click.command("policy-advice")
@controller_option
@click.argument("identity")
@click.argument("service")
@output_options
@pass_state
def policy_advice(state: State, identity: str, service: str, output: str) -> None:
    """Whether IDENTITY may dial or bind SERVICE, and through which edge routers (ids or names)."""
    client = state.client()
    identity_id = client.resolve("identities", identity)
    service_id = client.resolve("services", service)
    emit(client.request("GET", f"identities/{identity_id}/policy-advice/{service_id}") or {}, output, advice_report)


@click.command()
@controller_option
@click.argument("identity")
@output_options
@pass_state
def posture(state: State, identity: str, output: str) -> None:
    """The posture data the controller holds for IDENTITY (id or name) and its recent failed service requests."""
    client = state.client()
    identity_id = client.resolve("identities", identity)
    data = client.request("GET", f"identities/{identity_id}/posture-data") or {}
    failures = list(client.request("GET", f"identities/{identity_id}/failed-service-requests") or [])
    emit({"postureData": data, "failedServiceRequests": failures}, output,
         lambda both: posture_report(both["postureData"], both["failedServiceRequests"]))
