"""The actors scenario's subject: a real controller in-process, the identities it is loaded with, the message
stream it serves, and the deadline outcomes it reports.

The controller is started by ``bench/controller_run.py`` as ``controller.runtime.task_tree`` runs it, minus HTTP: the
scenario measures the actors, and HTTP is the http scenario's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from actors.lateness import DeadlineOutcome
from actors.live_actors import OneShot
from bench.actors_probe import CpuMeter
from bench.identity_seeding import seed_mfa_identities, wake_all
from controller.posture.messages import IdentityMessage, PostureReported
from controller.runtime import memory
from controller.runtime.composition import Controller

__all__ = ["Loaded", "Outcomes", "StreamResult", "load_measured", "load_parked", "message_stream"]

ROLE = "bench-mfa"
# Long enough that no seeded MFA pass lies in the future (the seeder refuses that), short enough to be plausible.
TIMEOUT_SECONDS = 7_200


@dataclass(slots=True)
class Loaded:
    """Identities seeded and awake (each a live actor parked on its MFA deadline)."""

    ids: list[str]
    seed_seconds: float
    wake_seconds: float
    block_starts: list[float] = field(default_factory=list)
    overran: bool = False


async def load_parked(controller: Controller, count: int, *, rate: float, far: float = 1_800.0) -> Loaded:
    """Seed and wake ``count`` actors whose deadlines (``rate`` per second) start ``far`` seconds ahead: the
    population that stays parked while others are measured. Settles the GC afterwards, as a restore does."""
    started = time.perf_counter()
    ids = await seed_mfa_identities(controller, count, deadlines_per_second=rate, start_in=far,
                              timeout_seconds=TIMEOUT_SECONDS, role=ROLE)
    seeded = time.perf_counter()
    await wake_all(controller, ids)
    loaded = Loaded(ids, seeded - started, time.perf_counter() - seeded)
    memory.settle()
    return loaded


async def load_measured(controller: Controller, *, blocks: int, per_block: int, rate: float, gap: float,
                        wake_per_actor: float = 200e-6, margin: float = 2.0) -> Loaded:
    """Seed and wake the actors whose deadlines are measured: ``blocks`` blocks of ``per_block`` deadlines at
    ``rate`` per second, ``gap`` seconds apart (room for a baseline between them).

    The first deadline comes once they are all awake: the lead is ``margin`` seconds plus three times the time
    they should take to seed, wake (``wake_per_actor``, as measured on the parked population) and settle. Loading
    that still overruns it sets ``overran`` (the report says so: the first deadlines were then late by design).
    """
    count = blocks * per_block
    lead = margin + 3 * count * (wake_per_actor + 50e-6)
    began = controller.clock.now()
    started = time.perf_counter()
    ids = await seed_mfa_identities(controller, count, deadlines_per_second=rate, start_in=lead,
                              timeout_seconds=TIMEOUT_SECONDS, role=ROLE, gap_every=per_block, gap=gap)
    seeded = time.perf_counter()
    await wake_all(controller, ids)
    loaded = Loaded(ids, seeded - started, time.perf_counter() - seeded)
    memory.settle()
    loaded.overran = controller.clock.now() > began + lead
    loaded.block_starts = [began + lead + b * (per_block / rate + gap) for b in range(blocks)]
    return loaded


class Outcomes:
    """Every deadline outcome the engine reports while this is open (an observer of its lateness recorder)."""

    def __init__(self, controller: Controller) -> None:
        self._recorder = controller.engine.lateness
        self.items: list[DeadlineOutcome] = []
        self._window: tuple[float, float] = (0.0, 0.0)
        self._wanted = 0
        self._seen = 0
        self._done = trio.Event()
        self._recorder.add_observer(self._observe)

    def close(self) -> None:
        self._recorder.remove_observer(self._observe)

    def _observe(self, outcome: DeadlineOutcome) -> None:
        self.items.append(outcome)
        start, end = self._window
        if start <= outcome.deadline < end:
            self._seen += 1
            if self._seen >= self._wanted:
                self._done.set()

    def between(self, start: float, end: float) -> list[DeadlineOutcome]:
        """Outcomes of the deadlines in ``[start, end)`` (wall clock)."""
        return [o for o in self.items if start <= o.deadline < end]

    async def wait_for(self, start: float, end: float, expected: int, *, patience: float) -> list[DeadlineOutcome]:
        """The outcomes of ``[start, end)`` once ``expected`` are in, or whatever is in after ``patience`` s."""
        self._window, self._wanted, self._done = (start, end), expected, trio.Event()
        self._seen = len(self.between(start, end))
        if self._seen < expected:
            with trio.move_on_after(patience):
                await self._done.wait()
        self._window = (0.0, 0.0)
        return self.between(start, end)


@dataclass(frozen=True, slots=True)
class StreamResult:
    """What the message stream achieved over its span: messages posted, seconds, and CPU shares of one core."""

    posted: int
    seconds: float
    cpu_share: float
    trio_cpu_share: float

    @property
    def rate(self) -> float:
        return self.posted / self.seconds if self.seconds > 0 else float("nan")


_OS = ({"id": "bench-os", "typeId": "OS", "type": "Windows", "version": "10.0.19045", "build": "19045"},)
_MAC = ({"id": "bench-mac", "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]},)


def _message(kind: int, identity_id: str) -> IdentityMessage:
    """Wake, OS posture, unlock, MAC posture, in turn; each with a reply slot, as the Client API sends them."""
    api_session_id = identity_id + "a"
    reply: OneShot[Any] = OneShot()
    if kind % 2 == 0:
        return PostureReported(api_session_id, (), reply, woken=kind == 0, unlocked=kind == 2)
    return PostureReported(api_session_id, _OS if kind == 1 else _MAC, reply)


async def message_stream(controller: Controller, ids: Sequence[str], rate: float, until: float, *,
                         in_flight: int, seed: int) -> StreamResult:
    """Post ``rate`` messages per second to random identities of ``ids`` until Trio time ``until``.

    Open loop, like clients that do not wait for each other, but with at most ``in_flight`` messages not yet
    handled, as a server's connection limit bounds the requests in progress: when the actors fall behind, the
    stream slows down instead of queueing without end, and the achieved rate says so.
    """
    actors = controller.engine.actors
    rng = random.Random(seed)
    base = actors.statistics()
    posted = 0
    meter = CpuMeter()
    start = trio.current_time()
    while (now := trio.current_time()) < until:
        stats = actors.statistics()
        handled = (stats["handled"] - base["handled"]) - (stats["scheduler_fired"] - base["scheduler_fired"])
        budget = min(int((now - start) * rate) - posted, in_flight - (posted - handled))
        for _ in range(budget):
            identity_id = ids[rng.randrange(len(ids))]
            controller.engine.post(identity_id, _message(posted % 4, identity_id))
            posted += 1
        await trio.sleep(0.001)
    return StreamResult(posted, trio.current_time() - start, meter.share(), meter.thread_share())
