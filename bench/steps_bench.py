"""Scenario ``steps``: instructions per posture-engine step, by kind, against a budget.

A warmed controller (in-process, no HTTP; commits on the Trio thread without fsync, so that one thread does all
the work and nothing waits on a disk) holds the medium model (``bench/model.py``: 5,000 identities, 100 services,
50 service policies, five selecting each identity, a posture check of each of the six types required by every
policy, the MFA one timing out after two hours so that every driven identity's actor stays parked on its
deadline). Each step kind runs on identities of its own, first ``warm`` times, then ``steps`` times measured:

* ``posture-unchanged``: a MAC posture response that changes no verdict (the identity keeps its Dial session): the
  same address again, as an endpoint re-reports it;
* ``posture-changed``: an OS posture response with another version that still passes (so every rule runs again,
  and still no verdict changes);
* ``posture-revokes``: a MAC posture response that fails the MAC check (the Dial session is revoked);
* ``wake-unlock``: an endpoint-state report, a wake or an unlock in turn;
* ``deadline-revokes``: an MFA deadline that revokes a Dial session (``bench/identity_seeding.py`` seeds them);
* ``session-granted``: a Dial session request that passes;
* ``session-refused``: a Dial session request refused for posture (the failure is recorded).

Steps come in bursts of :data:`BURST` at once, to as many identities, as load arrives: 25,000 events a second (the
actors scenario's T3) are 25 a millisecond. A measured burst runs from posting its messages (as the Client API does,
each with a reply slot) to the last answer, which comes once the writes are committed: the actors' transitions,
their reads and writes, the commit, the scheduling in between; deadlines come :data:`BURST` at one instant. Under
``valgrind --tool=callgrind`` (:mod:`bench.callgrind`) the scenario reports instructions per step, which repeat
exactly from run to run; the time per step, from a plain run, is for orientation only. ``--quick`` runs a few steps
on a twentieth of the model: it checks that every kind does what it says and that counting works.

Every kind's measured series starts from the same collector state: just before it (after the kind's warm-up; for
deadlines, at the first measured instant) the harness collects everything not frozen and freezes the survivors
(:func:`controller.runtime.memory.settle`), so every generation starts empty. A collection inside a series is then
one that the series' own allocations trigger, and it counts as the steps' cost; where a collection due to earlier
allocations (the load, another kind's steps) would fall is no part of any series.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.live_actors import OneShot
from bench.actors_harness import Outcomes
from bench.callgrind import Marks, available, run_counted
from bench.controller_run import running_controller
from bench.identity_seeding import seed_mfa_identities, wake_all
from bench.model import MAC, MEDIUM, load_model, posture_responses, scaled
from bench.report import ScenarioResult, Target
from controller.errors import ApiError
from controller.posture.messages import CreateSession, PostureReported
from controller.runtime import memory
from controller.runtime.composition import Controller

__all__ = ["BUDGET", "KINDS", "run"]

BUDGET = 40_000
"""Instructions per step, for every kind."""
BURST = 25
"""Steps posted at once (deadlines reached at one instant)."""
KINDS = ("posture-unchanged", "posture-changed", "posture-revokes", "wake-unlock", "deadline-revokes",
         "session-granted", "session-refused")
COLUMNS = ["step kind", "steps", "instructions/step", "budget", "µs/step (plain run)", "outcome"]
BAD_MAC = "11:22:33:44:55:66"
MFA_TIMEOUT = 7_200


@dataclass(frozen=True, slots=True)
class Plan:
    warm: int
    steps: int
    model_factor: float  # of the medium model


FULL = Plan(warm=2 * BURST, steps=8 * BURST, model_factor=1.0)
QUICK = Plan(warm=BURST, steps=BURST, model_factor=0.05)


@dataclass(slots=True)
class _Client:
    identity_id: str
    api_session_id: str
    service_id: str


def _mac(api_session_id: str, check_id: str, mac: str) -> Callable[[Any], PostureReported]:
    responses = ({"id": check_id, "typeId": "MAC", "macAddresses": [mac]},)
    return lambda reply: PostureReported(api_session_id, responses, reply)


def _dial(client: _Client) -> Callable[[Any], CreateSession]:
    return lambda reply: CreateSession(client.api_session_id, client.service_id, "Dial", {}, reply)


class _Tally(OneShot[Any]):
    """A reply slot that hands its answer to a burst instead of waking a task of its own (what a burst's driver
    does to collect answers is not the engine's cost)."""

    __slots__ = ("burst", "index")

    def __init__(self, burst: _Burst, index: int) -> None:
        super().__init__()
        self.burst = burst
        self.index = index

    def send(self, value: Any) -> None:
        self.burst.answered(self.index, value)

    def fail(self, error: BaseException) -> None:
        self.burst.answered(self.index, error)


class _Burst:
    """The answers of one burst; :meth:`wait` returns once every one is in."""

    def __init__(self, size: int) -> None:
        self.answers: list[Any] = [None] * size
        self.left = size
        self.done = trio.Event()

    def answered(self, index: int, value: Any) -> None:
        self.answers[index] = value
        self.left -= 1
        if self.left == 0:
            self.done.set()


class _Driver:
    """Sets up the identities of every kind and runs their steps."""

    def __init__(self, controller: Controller, plan: Plan, marks: Marks) -> None:
        self.controller = controller
        self.plan = plan
        self.marks = marks
        self.clients: dict[str, list[_Client]] = {}
        self.check_ids: dict[str, str] = {}
        self.outcomes: dict[str, list[str]] = {}

    async def load(self) -> None:
        per_kind = self.plan.warm + self.plan.steps
        model = scaled(MEDIUM, self.plan.model_factor) if self.plan.model_factor < 1 else MEDIUM
        count = per_kind * (len(KINDS) - 1)  # clients, each on an identity of its own
        size = replace(model, clients=count, identities=max(model.identities, count),
                       mfa_timeout_seconds=MFA_TIMEOUT)
        loaded = await load_model(self.controller, size)
        self.check_ids = loaded.posture_check_ids
        passing = tuple(posture_responses(self.check_ids))
        clients = [_Client(c["identityId"], c["apiSessionId"], c["services"][0])
                   for c in loaded.clients if c["services"]]
        kinds = [k for k in KINDS if k != "deadline-revokes"]
        for index, kind in enumerate(kinds):
            self.clients[kind] = clients[index * per_kind:(index + 1) * per_kind]
        engine = self.controller.engine
        bad_mac = ({"id": self.check_ids["MAC"], "typeId": "MAC", "macAddresses": [BAD_MAC]},)
        for kind, group in self.clients.items():
            for client in group:
                identity, api = client.identity_id, client.api_session_id
                await engine.report_posture(identity, api, passing)
                if kind == "session-refused":
                    await engine.report_posture(identity, api, bad_mac)
                elif kind != "session-granted":
                    await engine.request_session(identity, api, client.service_id, "Dial", {})

    async def run_kind(self, kind: str) -> tuple[float, list[str]]:
        """Warm, then measure ``steps`` steps of ``kind``: seconds per step and what each measured step did."""
        if kind == "deadline-revokes":
            return await self._deadlines()
        group = self.clients[kind]
        await self._burst(kind, group[:self.plan.warm])
        outcomes: list[str] = []
        elapsed = 0.0
        _start_series(self.marks)
        measured = group[self.plan.warm:]
        for start in range(0, len(measured), BURST):
            burst = measured[start:start + BURST]
            began = time.perf_counter()
            with self.marks.measuring():
                answers = await self._burst(kind, burst)
            elapsed += time.perf_counter() - began
            with self.controller.store.read() as txn:
                for client, answer in zip(burst, answers, strict=True):
                    left = len(txn.ids_by_ref("sessions", "identityId", client.identity_id))
                    outcomes.append(f"{_describe(answer)}, {left} session(s) left")
        self.marks.dump(kind)
        return elapsed / len(outcomes), outcomes

    async def _burst(self, kind: str, clients: list[_Client]) -> list[Any]:
        """Post one message of ``kind`` to each client's identity at once; their answers, once all are in."""
        mac_check = self.check_ids["MAC"]
        burst = _Burst(len(clients))
        for index, client in enumerate(clients):
            reply = _Tally(burst, index)
            api = client.api_session_id
            message: Any
            if kind in ("posture-unchanged", "posture-revokes"):
                mac = MAC if kind == "posture-unchanged" else BAD_MAC
                message = _mac(api, mac_check, mac)(reply)
            elif kind == "posture-changed":
                os_report = {"id": self.check_ids["OS"], "typeId": "OS", "type": "Windows",
                             "version": f"10.0.{19046 + index}", "build": str(19046 + index)}
                message = PostureReported(api, (os_report,), reply)
            elif kind == "wake-unlock":
                message = PostureReported(api, (), reply, woken=index % 2 == 0, unlocked=index % 2 == 1)
            else:
                message = _dial(client)(reply)
            self.controller.engine.post(client.identity_id, message)
        await burst.done.wait()
        return burst.answers

    async def _deadlines(self) -> tuple[float, list[str]]:
        """MFA deadlines, :data:`BURST` at each instant, each revoking its identity's Dial session; a measured
        burst runs from just before its instant until its last deadline is durably decided."""
        controller, plan = self.controller, self.plan
        count = plan.warm + plan.steps
        start_in, apart = 5.0, 0.01
        began = controller.clock.now()
        rate = 1e9  # a burst's deadlines a nanosecond apart: one instant, as far as the scheduler can tell
        # Observed before seeding: a deadline decided before the observer was added would never be seen.
        outcomes = Outcomes(controller)
        ids = await seed_mfa_identities(controller, count, deadlines_per_second=rate, start_in=start_in,
                                        timeout_seconds=MFA_TIMEOUT, role="steps-mfa", gap_every=BURST, gap=apart)
        await wake_all(controller, ids)
        first = began + start_in
        elapsed, got = 0.0, []
        for number in range(count // BURST):
            instant = first + number * (BURST / rate + apart)
            await trio.sleep_until(controller.clock.to_trio(instant) - apart / 10)
            measured = number >= plan.warm // BURST
            if measured and number == plan.warm // BURST:
                _start_series(self.marks)
            began_at = time.perf_counter()
            with self.marks.measuring() if measured else _nothing():
                decided = await outcomes.wait_for(instant, instant + apart, BURST, patience=60.0)
            if measured:
                elapsed += time.perf_counter() - began_at
                got.extend(decided)
        self.marks.dump("deadline-revokes")
        outcomes.close()
        return elapsed / plan.steps, [f"revoked {o.revoked}" for o in got]


def _start_series(marks: Marks) -> None:
    """Begin a measured series from the same collector state as every other (the module docstring)."""
    memory.settle()
    marks.zero()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _describe(result: Any) -> str:
    if isinstance(result, ApiError):
        return result.code
    if isinstance(result, dict):
        return "session"
    if isinstance(result, list):
        return "answered"
    return type(result).__name__


async def _measure(plan: Plan, marks: Marks, events: bool = True) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="tollgate-steps-"))
    try:
        async with running_controller(work / "data", worker_threads=False, durable=False, events=events) as running:
            driver = _Driver(running.controller, plan, marks)
            await driver.load()
            figures: dict[str, Any] = {}
            for kind in KINDS:
                seconds, outcomes = await driver.run_kind(kind)
                figures[kind] = {"seconds": seconds, "outcomes": sorted(set(outcomes)), "steps": len(outcomes)}
            return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _inner(argv: list[str]) -> None:
    """The counted program: measure, and print the figures as JSON on the last line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-events", action="store_true", help="record no events (Settings.events off)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    figures = trio.run(_measure, plan, Marks(), not args.no_events,
                       clock=trio.testing.MockClock(autojump_threshold=0))
    print(json.dumps(figures))


def run(quick: bool) -> ScenarioResult:
    """Plain run for the time per step and the outcomes; then, unless ``quick``, the counted run."""
    plan = QUICK if quick else FULL
    plain = trio.run(_measure, plan, Marks(), clock=trio.testing.MockClock(autojump_threshold=0))
    counts: dict[str, int] = {}
    notes: list[str] = []
    if (missing := available()) is not None:
        notes.append(f"instructions not counted: {missing}")
    else:
        counts = run_counted("bench.steps_bench", ["--quick"] if quick else [])
    result = ScenarioResult("steps", quick, COLUMNS, rounds=[{"plain": plain, "instructions": counts}])
    for kind in KINDS:
        steps = plain[kind]["steps"]
        per_step = counts[kind] / plan.steps if kind in counts else math.nan
        result.rows.append([kind, steps, per_step, BUDGET, plain[kind]["seconds"] * 1e6,
                            ", ".join(plain[kind]["outcomes"])])
        result.targets.append(Target.bound(f"S.{kind}", f"{kind}: instructions per step <= {BUDGET:,}", per_step,
                                           BUDGET, "instructions"))
    notes.append(f"medium model x{plan.model_factor:g}; {plan.warm} warm-up steps, then {plan.steps} measured, per "
                 "kind; under callgrind every thread's instructions count, from the post to the durable answer")
    result.notes = notes
    return result


if __name__ == "__main__":
    _inner(sys.argv[1:])
