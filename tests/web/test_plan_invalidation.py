"""Every kind of change that can alter an identity's access reaches a live identity whose plan is built.

An identity actor keeps its compiled plan (``controller/posture/plan.py``) between steps. Each case here warms
one (a passing posture report and a granted Dial session), makes one change through the management API, and then
requires that the session is revoked once the identity has settled, and that a new request is refused with the
reason the change gives: a stale plan would keep granting. Edge routers are checked when a session is created, not
afterwards (as in the reference): for their changes the session is deleted first and only the new request is
refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from controller.errors import ApiError
from controller.runtime.composition import Controller
from tests.controller.test_posture_engine import GOOD_MAC, build_network
from tests.support import Api

Change = Callable[[Api, dict[str, str]], Awaitable[Any]]


async def _ok(reply_awaitable: Awaitable[Any]) -> None:
    reply = await reply_awaitable
    assert reply.status in (200, 201), reply.body


def _patch(path: str, body: dict[str, Any]) -> Change:
    return lambda admin, ids: _ok(admin.patch(path.format(**ids), body))


def _delete(path: str) -> Change:
    return lambda admin, ids: _ok(admin.delete(path.format(**ids)))


def _create(path: str, body: dict[str, Any]) -> Change:
    return lambda admin, ids: _ok(admin.post(path, body))


ROUTER_CASES = frozenset({"edge router policy deleted", "service edge router policy deleted", "edge router deleted"})
CASES: dict[str, tuple[Change, str]] = {
    "service policy deleted": (_delete("/service-policies/{p-mac}"), "NOT_FOUND"),
    "service policy selects other identities": (
        _patch("/service-policies/{p-mac}", {"identityRoles": ["#nobody"]}), "NOT_FOUND"),
    "service policy selects other services": (
        _patch("/service-policies/{p-mac}", {"serviceRoles": ["#nobody"]}), "NOT_FOUND"),
    "service policy requires other checks": (
        _patch("/service-policies/{p-mac}", {"postureCheckRoles": ["#dom"]}), "INVALID_POSTURE"),
    "posture check criteria changed": (
        _patch("/posture-checks/{mac}", {"typeId": "MAC", "macAddresses": ["11-22-33-44-55-66"]}),
        "INVALID_POSTURE"),
    "posture check now applies to the policy": (
        _patch("/posture-checks/{dom}", {"typeId": "DOMAIN", "roleAttributes": ["dom", "mac"]}), "INVALID_POSTURE"),
    "posture check created": (
        _create("/posture-checks", {"name": "domain", "typeId": "DOMAIN", "domains": ["corp.example"],
                                    "roleAttributes": ["mac"]}), "INVALID_POSTURE"),
    "service role attributes changed": (_patch("/services/{mac-svc}", {"roleAttributes": ["other"]}), "NOT_FOUND"),
    "service deleted": (_delete("/services/{mac-svc}"), "NOT_FOUND"),
    "identity role attributes changed": (
        _patch("/identities/{identity}", {"roleAttributes": ["other"]}), "NOT_FOUND"),
    "edge router policy deleted": (_delete("/edge-router-policies/{erp}"), "NO_EDGE_ROUTERS_AVAILABLE"),
    "service edge router policy deleted": (
        _delete("/service-edge-router-policies/{serp}"), "NO_EDGE_ROUTERS_AVAILABLE"),
    "edge router deleted": (_delete("/edge-routers/{er}"), "NO_EDGE_ROUTERS_AVAILABLE"),
}


async def _ids(admin: Api, identity: str) -> dict[str, str]:
    ids = {"identity": identity}
    for kind in ("service-policies", "posture-checks", "services", "edge-router-policies",
                 "service-edge-router-policies", "edge-routers"):
        reply = await admin.get(f"/{kind}", query={"limit": "100"})
        ids.update({row["name"]: row["id"] for row in reply.data})
    return ids


async def _network(controller: Controller) -> dict[str, Any]:
    """``build_network`` with one identity; its API session, written directly, joins the live API sessions as
    restored ones do at start (the identities with live API sessions are those a policy change re-checks)."""
    net = await build_network(controller, 1)
    controller.sessions.restore()
    return net


async def _spare_check(admin: Api) -> None:
    """A check the identity fails (it reports no domain) that no policy requires yet."""
    await _ok(admin.post("/posture-checks", {"name": "dom", "typeId": "DOMAIN", "domains": ["corp.example"],
                                             "roleAttributes": ["dom"]}))


async def _granted(controller: Controller, admin: Api, net: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The spare check made, the first identity's actor warmed and a Dial session granted to it: (identity, API
    session, session)."""
    await _spare_check(admin)
    identity, api_session = net["people"][0]
    await _warm(controller, identity, api_session)
    session = await _ask(controller, identity, api_session, net["mac"])
    assert isinstance(session, dict), session
    return identity, api_session, session


async def _warm(controller: Controller, identity: str, api_session: str) -> None:
    """A passing report, and MFA passed: the MFA check's timeout keeps the actor live (parked on its deadline),
    with its plan, instead of passivating when idle."""
    engine = controller.engine
    await engine.report_posture(identity, api_session, ({"id": "c", "typeId": "MAC", "macAddresses": [GOOD_MAC]},))
    await engine.mfa_passed(identity, api_session)
    await trio.testing.wait_all_tasks_blocked()
    assert engine.actors.state_of(identity) is not None


async def _ask(controller: Controller, identity: str, api_session: str, service: str) -> Any:
    try:
        return await controller.engine.request_session(identity, api_session, service, "Dial", {})
    except ApiError as error:
        return error


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_change_that_alters_access_reaches_the_live_plan(
        case: str, controller: Controller, admin: Api, autojump_clock: trio.testing.MockClock) -> None:
    change, refusal = CASES[case]
    net = await _network(controller)
    identity, api_session, session = await _granted(controller, admin, net)
    engine = controller.engine

    if case in ROUTER_CASES:
        assert (await admin.delete(f"/sessions/{session['id']}")).status == 200
    await change(admin, await _ids(admin, identity))
    await engine.settle(identity)

    with controller.store.read() as txn:
        assert txn.get("sessions", session["id"]) is None, "the session outlived the change"
    refused = await _ask(controller, identity, api_session, net["mac"])
    assert isinstance(refused, ApiError) and refused.code == refusal, refused


async def test_undoing_a_change_grants_again(controller: Controller, admin: Api,
                                             autojump_clock: trio.testing.MockClock) -> None:
    net = await _network(controller)
    identity, api_session = net["people"][0]
    await controller.engine.report_posture(identity, api_session,
                                           ({"id": "c", "typeId": "MAC", "macAddresses": [GOOD_MAC]},))
    ids = await _ids(admin, identity)
    await _patch("/posture-checks/{mac}", {"typeId": "MAC", "macAddresses": ["11-22-33-44-55-66"]})(admin, ids)
    refused = await _ask(controller, identity, api_session, net["mac"])
    assert isinstance(refused, ApiError) and refused.code == "INVALID_POSTURE"
    await _patch("/posture-checks/{mac}", {"typeId": "MAC", "macAddresses": [GOOD_MAC]})(admin, ids)
    assert isinstance(await _ask(controller, identity, api_session, net["mac"]), dict)


@pytest.mark.parametrize("case", sorted(set(CASES) - {"identity role attributes changed"}))
async def test_a_plan_is_never_used_after_a_change_even_without_a_recheck(
        case: str, controller: Controller, admin: Api, autojump_clock: trio.testing.MockClock) -> None:
    """The re-check a change sends reaches identities with a live API session; any other live actor still holds
    its plan, which the change must make stale by itself: its next request decides on the changed model. (A change
    of the identity itself always sends its actor a re-check.)"""
    change, refusal = CASES[case]
    net = await build_network(controller, 1)  # its API session is not among the live ones: no re-check comes
    identity, api_session, session = await _granted(controller, admin, net)
    engine = controller.engine
    assert (await admin.delete(f"/sessions/{session['id']}")).status == 200

    live = engine.actors.state_of(identity)
    assert live is not None and live.plan is not None
    await change(admin, await _ids(admin, identity))
    assert engine.actors.state_of(identity) is live  # the same live actor, holding the plan built before
    refused = await _ask(controller, identity, api_session, net["mac"])
    assert isinstance(refused, ApiError) and refused.code == refusal, refused
