"""The posture engine at scale and across a restart, on Trio's virtual clock."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import trio

from controller.clock import Clock, format_time
from controller.data.write_path import create_row, delete_row
from controller.errors import ApiError
from controller.insight import kept_events, latest_id
from controller.model.spec import WriteContext
from controller.posture import machine
from controller.posture.messages import MfaPassed, PostureReported, Reevaluate, WriteFailed
from controller.posture.persistence import StepWrite
from controller.runtime.composition import Controller
from tests.support import make_settings, start_controller

GOOD_MAC = "aa-bb-cc-dd-ee-ff"


async def build_network(controller: Controller, identities: int) -> dict[str, Any]:
    """One write that creates routers, policies, two services, checks and ``identities`` identities with an API
    session each."""
    registry = controller.registry
    now = format_time(controller.clock.now())

    def write(ctx: WriteContext) -> dict[str, Any]:
        def make(kind: str, body: dict[str, Any]) -> str:
            variants = registry[kind].variants
            variant = variants.get(body.get(variants.discriminator)) if variants is not None else None
            return str(create_row(ctx, registry[kind], body, variant)["id"])

        make("edge-routers", {"name": "er"})
        make("edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                      "edgeRouterRoles": ["#all"]})
        make("service-edge-router-policies", {"name": "serp", "semantic": "AnyOf", "serviceRoles": ["#all"],
                                              "edgeRouterRoles": ["#all"]})
        mac_service = make("services", {"name": "mac-svc", "encryptionRequired": True, "roleAttributes": ["mac"]})
        mfa_service = make("services", {"name": "mfa-svc", "encryptionRequired": True, "roleAttributes": ["mfa"]})
        make("posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                "macAddresses": [GOOD_MAC]})
        make("posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"], "timeoutSeconds": 600,
                                "promptOnWake": False, "promptOnUnlock": False})
        for name in ("mac", "mfa"):
            make("service-policies", {"name": f"p-{name}", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#u"], "serviceRoles": [f"#{name}"],
                                      "postureCheckRoles": [f"#{name}"]})
        people = []
        for n in range(identities):
            identity = make("identities", {"name": f"u{n}", "type": "User", "isAdmin": False,
                                           "roleAttributes": ["u"]})
            api_session = make("api-sessions", {"token": f"t{n}", "identityId": identity, "authenticatorId": "",
                                                "ipAddress": "", "lastActivityAt": now})
            people.append((identity, api_session))
        return {"mac": mac_service, "mfa": mfa_service, "people": people}

    result: dict[str, Any] = await controller.domain.write(write)
    return result


async def ask_session(controller: Controller, identity: str, api_session: str, service: str) -> Any:
    try:
        return await controller.engine.request_session(identity, api_session, service, "Dial", {})
    except ApiError as error:
        return error


def report_good_mac(controller: Controller, identity: str, api_session: str) -> None:
    """Queue the API session's report of the MAC the network's check wants."""
    controller.engine.post(identity, PostureReported(api_session, (
        {"id": "c", "typeId": "MAC", "macAddresses": [GOOD_MAC]},)))


async def delete_mac_policy(controller: Controller) -> None:
    """Delete the service policy that grants the MAC-checked service."""
    with controller.store.read() as txn:
        [policy] = [row["id"] for row in txn.scan("service-policies") if row["name"] == "p-mac"]
    await controller.domain.write(lambda ctx: delete_row(ctx, controller.registry["service-policies"], policy))


async def test_thousands_of_identities_decide_right_and_passivate(controller: Controller,
                                                                  autojump_clock: trio.testing.MockClock) -> None:
    net = await build_network(controller, 2000)
    engine = controller.engine
    rng = random.Random(7)
    good = {identity for identity, _ in net["people"] if rng.random() < 0.5}
    mfa = {identity for identity, _ in net["people"] if rng.random() < 0.5}
    outcomes: dict[tuple[str, str], Any] = {}

    async def drive(identity: str, api_session: str) -> None:
        mac = GOOD_MAC if identity in good else "11-22-33-44-55-66"
        engine.post(identity, PostureReported(api_session, ({"id": "c", "typeId": "MAC", "macAddresses": [mac]},)))
        if identity in mfa:
            engine.post(identity, MfaPassed(api_session))
        await trio.sleep(rng.random())
        for service in ("mac", "mfa"):
            outcomes[identity, service] = await ask_session(controller, identity, api_session, net[service])

    start = controller.clock.now()
    async with trio.open_nursery() as nursery:
        for identity, api_session in net["people"]:
            nursery.start_soon(drive, identity, api_session)
    for identity, _ in net["people"]:
        for service, passes in (("mac", identity in good), ("mfa", identity in mfa)):
            outcome = outcomes[identity, service]
            if passes:
                assert isinstance(outcome, dict) and outcome["identityId"] == identity, outcome
            else:
                assert isinstance(outcome, ApiError) and outcome.code == "INVALID_POSTURE"
    with controller.store.read() as txn:
        assert txn.count("sessions") == len(good) + len(mfa)
    # Identities without an MFA timer passivated; those with one stay parked until it fires.
    await trio.testing.wait_all_tasks_blocked()
    stats = engine.actors.statistics()
    assert stats["scheduler_pending"] == len(mfa)
    assert stats["live"] == len(mfa)
    await trio.sleep_until(controller.clock.to_trio(start + 601))
    await trio.testing.wait_all_tasks_blocked()
    with controller.store.read() as txn:
        sessions = list(txn.scan("sessions"))
    assert {s["identityId"] for s in sessions} == good
    stats = engine.actors.statistics()
    assert stats["live"] == 0 and stats["scheduler_pending"] == 0 and stats["crashed"] == 0


async def test_restart_keeps_the_deadline(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    settings = make_settings(tmp_path)
    async with trio.open_nursery() as first_run:
        controller = await start_controller(settings, first_run)
        net = await build_network(controller, 1)
        identity, api_session = net["people"][0]
        controller.engine.post(identity, MfaPassed(api_session))
        granted_at = controller.clock.now()
        session = await ask_session(controller, identity, api_session, net["mfa"])
        assert isinstance(session, dict)
        await trio.sleep(300)
        first_run.cancel_scope.cancel()
    wall = controller.clock.now()
    controller.close()
    await trio.sleep(100)  # the controller is down for 100 s of virtual (and wall) time
    async with trio.open_nursery() as second_run:
        restarted = await start_controller(settings, second_run, clock=Clock(wall_base=wall + 100))
        with restarted.store.read() as txn:
            assert txn.exists("sessions", session["id"])
        await trio.sleep_until(restarted.clock.to_trio(granted_at + 600) - 0.001)
        with restarted.store.read() as txn:
            assert txn.exists("sessions", session["id"])
        await trio.sleep_until(restarted.clock.to_trio(granted_at + 600))
        await trio.testing.wait_all_tasks_blocked()
        with restarted.store.read() as txn:
            assert not txn.exists("sessions", session["id"])
        second_run.cancel_scope.cancel()
    restarted.close()


@pytest.mark.parametrize("crashing", [False, True])
async def test_a_restart_revokes_what_a_change_took_away_before_its_re_checks_were_made(
        tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
        crashing: bool) -> None:
    """A policy deleted, and the process stopped before any actor re-checked (the engine's re-checks of the change
    are silenced): at the next start each identity's actor re-checks its sessions as it is adopted and revokes the
    one no policy grants any more, naming why; an actor that crashes on its re-check stops neither the engine nor
    the others' re-checks."""
    settings = make_settings(tmp_path)
    async with trio.open_nursery() as first_run:
        controller = await start_controller(settings, first_run)
        net = await build_network(controller, 2)
        granted = []
        for identity, api_session in net["people"]:
            report_good_mac(controller, identity, api_session)
            granted.append(await ask_session(controller, identity, api_session, net["mac"]))
        assert all(isinstance(row, dict) for row in granted)
        broken = granted[0]["identityId"] if crashing else None
        expected = [row["id"] for row in granted if row["identityId"] != broken]
        monkeypatch.setattr(controller.engine, "reevaluate", lambda identity_ids, reason="": None)
        await delete_mac_policy(controller)
        await trio.testing.wait_all_tasks_blocked()
        with controller.store.read() as txn:
            assert all(txn.exists("sessions", row["id"]) for row in granted)  # nothing re-checked: a crash now
            before = latest_id(txn)
        first_run.cancel_scope.cancel()
    controller.close()
    real_step = machine.step

    def step(state: Any, *args: Any, **kwargs: Any) -> Any:
        if state.identity_id == broken:
            raise RuntimeError("a defect in one identity's step (test)")
        return real_step(state, *args, **kwargs)

    monkeypatch.setattr(machine, "step", step)
    async with trio.open_nursery() as second_run:
        restarted = await start_controller(settings, second_run)
        await trio.testing.wait_all_tasks_blocked()
        with restarted.store.read() as txn:
            assert [row["id"] for row in granted if txn.exists("sessions", row["id"])] == (
                [granted[0]["id"]] if crashing else [])
            revoked = [dict(event.fields) for event in kept_events(txn, before + 1)
                       if event.fields["event_type"] == "revoked"]
        assert sorted((event["session_id"], event["cause"]["code"], event["cause"]["reason"]) for event in revoked) \
            == sorted((session_id, "noPolicy", "adopted") for session_id in expected)
        assert (restarted.engine.actors.statistics()["crashed"] > 0) == crashing
        second_run.cancel_scope.cancel()
    restarted.close()


async def test_a_failed_write_reloads_the_actor_without_crashing_it(controller: Controller,
                                                                     autojump_clock: trio.testing.MockClock) -> None:
    """What an identity's failed write sends its actor (the stored state is reloaded) is handled like any message,
    not as a crash of the actor."""
    net = await build_network(controller, 1)
    identity, api_session = net["people"][0]
    report_good_mac(controller, identity, api_session)
    await controller.engine.settle(identity)
    controller.engine.post(identity, WriteFailed())
    await controller.engine.settle(identity)
    assert controller.engine.actors.statistics()["crashed"] == 0
    state = await controller.engine.state(identity)
    assert state.posture.mac is not None  # the stored report, reloaded


async def test_an_mfa_pass_whose_write_fails_is_not_acknowledged(controller: Controller,
                                                                 autojump_clock: trio.testing.MockClock,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The write that records an MFA pass fails: the caller hears the write's error, not that it is durable, and
    the actor goes on from the stored state (no pass)."""
    net = await build_network(controller, 1)
    identity, api_session = net["people"][0]

    def failing(write: StepWrite, ctx: WriteContext) -> None:
        raise ApiError("CLUSTER_UNAVAILABLE")

    monkeypatch.setattr(StepWrite, "apply", failing)
    with pytest.raises(ApiError) as refused:
        await controller.engine.mfa_passed(identity, api_session)
    assert refused.value.code == "CLUSTER_UNAVAILABLE"
    monkeypatch.undo()
    state = await controller.engine.state(identity)
    assert all(session.mfa.passed_mfa_at is None for session in state.sessions.values())
    assert controller.engine.actors.statistics()["crashed"] == 0


async def test_a_revocation_whose_write_failed_is_decided_again(controller: Controller,
                                                                autojump_clock: trio.testing.MockClock,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy deleted; the write revoking the session it granted fails once. The actor reloads its stored state
    and checks its sessions again: the session is revoked by the next write."""
    net = await build_network(controller, 1)
    identity, api_session = net["people"][0]
    report_good_mac(controller, identity, api_session)
    session = await ask_session(controller, identity, api_session, net["mac"])
    assert isinstance(session, dict)
    real_apply = StepWrite.apply
    failures: list[str] = []

    def fail_once(write: StepWrite, ctx: WriteContext) -> None:
        if write.revoke and not failures:
            failures.append(write.key)
            raise ApiError("CLUSTER_UNAVAILABLE")
        real_apply(write, ctx)

    monkeypatch.setattr(StepWrite, "apply", fail_once)
    await delete_mac_policy(controller)
    controller.engine.post(identity, Reevaluate())  # the live set is not told of sessions build_network wrote
    await trio.testing.wait_all_tasks_blocked()
    assert failures == [identity]
    with controller.store.read() as txn:
        assert not txn.exists("sessions", session["id"])
    assert controller.engine.actors.statistics()["crashed"] == 0
