"""Writes behind the identity actors: nobody hears of a change before it is durable, and a crash loses at most what
nobody was answered for.

The actors queue their writes and go on (``controller/posture/engine.py``); these tests read the store at the very
moment each answer is given, and simulate a crash by letting the writer lose whatever is queued and not yet
committed, then restart on the same data directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.live_actors import OneShot
from controller.errors import ApiError
from controller.posture.engine import STATE_KIND
from controller.posture.messages import CreateSession, PostureReported
from controller.posture.state import IdentityState, decode_state
from controller.runtime.composition import Controller
from tests.controller.test_posture_engine import GOOD_MAC, build_network
from tests.support import make_settings, start_controller

BAD_MAC = "11-22-33-44-55-66"
LOST_DOMAIN = ({"id": "d", "typeId": "DOMAIN", "domain": "lost.example"},)  # a report no check looks at


def _mac(address: str) -> tuple[dict[str, Any], ...]:
    return ({"id": "c", "typeId": "MAC", "macAddresses": [address]},)


class _Witness(OneShot[Any]):
    """A reply slot that, when answered, reads what the store holds right then."""

    def __init__(self, controller: Controller, identity: str) -> None:
        super().__init__()
        self.controller, self.identity = controller, identity
        self.answer: Any = None
        self.stored: IdentityState | None = None
        self.sessions: list[dict[str, Any]] = []

    def _witness(self, answer: Any) -> None:
        self.answer = answer
        with self.controller.store.read() as txn:
            self.stored = decode_state(self.identity, txn.get_raw(STATE_KIND, self.identity))
            self.sessions = txn.get_many("sessions", txn.ids_by_ref("sessions", "identityId", self.identity))

    def send(self, value: Any) -> None:
        self._witness(value)
        super().send(value)

    def fail(self, error: BaseException) -> None:
        self._witness(error)
        super().fail(error)


async def test_every_answer_waits_for_the_write_it_tells_of(controller: Controller,
                                                           autojump_clock: trio.testing.MockClock) -> None:
    net = await build_network(controller, 1)
    identity, api_session = net["people"][0]
    engine = controller.engine

    reported = _Witness(controller, identity)
    engine.post(identity, PostureReported(api_session, _mac(GOOD_MAC), reported))
    assert await reported.receive() == []
    assert reported.stored is not None and reported.stored.posture.mac is not None
    assert reported.stored.posture.mac.addresses == (GOOD_MAC,)

    granted = _Witness(controller, identity)
    engine.post(identity, CreateSession(api_session, net["mac"], "Dial", {}, granted))
    session = await granted.receive()
    assert [row["id"] for row in granted.sessions] == [session["id"]]

    revoking = _Witness(controller, identity)
    engine.post(identity, PostureReported(api_session, _mac(BAD_MAC), revoking))
    await revoking.receive()
    assert revoking.sessions == []  # the revocation was durable before the answer
    assert revoking.stored is not None and revoking.stored.posture.mac is not None
    assert revoking.stored.posture.mac.addresses == (BAD_MAC,)

    refused = _Witness(controller, identity)
    engine.post(identity, CreateSession(api_session, net["mac"], "Dial", {}, refused))
    with pytest.raises(ApiError, match="INVALID_POSTURE"):
        await refused.receive()
    assert refused.stored is not None and refused.stored.failures[-1]["serviceId"] == net["mac"]


async def test_a_crash_loses_at_most_the_report_nobody_was_answered_for(
        tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings(tmp_path)
    async with trio.open_nursery() as first_run:
        controller = await start_controller(settings, first_run)
        net = await build_network(controller, 2)
        (identity, api_session), (other, other_api) = net["people"]
        engine = controller.engine
        # Acknowledged before the crash: a report, a session, and another identity's revocation.
        await engine.report_posture(identity, api_session, _mac(GOOD_MAC))
        session = await engine.request_session(identity, api_session, net["mac"], "Dial", {})
        await engine.report_posture(other, other_api, _mac(GOOD_MAC))
        await engine.request_session(other, other_api, net["mac"], "Dial", {})
        await engine.report_posture(other, other_api, _mac(BAD_MAC))

        # The crash: from now on the writer loses what the actors queue (the process dies before the commit).
        lost: list[Any] = []
        monkeypatch.setattr(controller.writer, "post", lambda mutation, on_done, **_: lost.append(mutation))
        unanswered = _Witness(controller, identity)
        engine.post(identity, PostureReported(api_session, LOST_DOMAIN, unanswered))
        await trio.testing.wait_all_tasks_blocked()
        assert lost and unanswered.answer is None  # queued, never committed, never answered
        first_run.cancel_scope.cancel()
    controller.close()
    monkeypatch.undo()

    async with trio.open_nursery() as second_run:
        controller = await start_controller(settings, second_run)
        state = await controller.engine.state(identity)
        # The state is the last one the endpoint was answered for: the unanswered report is the only loss.
        assert state.posture.mac is not None and state.posture.mac.addresses == (GOOD_MAC,)
        assert state.posture.domain is None
        with controller.store.read() as txn:
            assert txn.get("sessions", session["id"]) is not None
            assert txn.ids_by_ref("sessions", "identityId", other) == []
        second_run.cancel_scope.cancel()
    controller.close()
