"""The actors scenario's baselines: what Trio itself costs for the same work, measured in the same process.

* :func:`sleep_until_lateness`: one bare task per deadline sleeping with ``trio.sleep_until`` (Trio's own timer per
  task, no actor, no storage) at the scenario's deadline rate; how late each wakes is the floor any timer design
  on this event loop can reach.
* :func:`parked_task_bytes`: the resident memory of a bare parked Trio task (what a parked actor is compared with).
* :func:`spawn_lean_actors`: the time to spawn and park N lean actors (a mailbox and a task, no state, no storage),
  the floor for restoring N actors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from actors.mailbox import Mailbox
from bench.actors_probe import CpuMeter, anon_bytes, release_free_memory

__all__ = ["SleeperResult", "parked_task_bytes", "sleep_until_lateness", "spawn_lean_actors"]


@dataclass(frozen=True, slots=True)
class SleeperResult:
    """Lateness (seconds) of each measured sleeper and the process's CPU share over the measured span."""

    lateness: list[float]
    cpu_share: float


class _Countdown:
    """Set once :meth:`tick` has been called ``target`` times."""

    def __init__(self, target: int) -> None:
        self.left = target
        self.done = trio.Event()
        if target <= 0:
            self.done.set()

    def tick(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.done.set()


async def sleep_until_lateness(deadlines: Sequence[float], measured: int, *,
                               spawned: Callable[[], object] | None = None) -> SleeperResult:
    """Spawn one sleeper per Trio-time deadline; return the lateness of the first ``measured`` of them.

    The sleepers beyond ``measured`` only make the population the same size as the subject's; they are cancelled
    once the measured ones have woken. ``spawned`` is called once they all exist (to settle the GC, as the subject
    is settled after loading).
    """
    lateness: list[float] = []
    woken = _Countdown(measured)

    async def sleeper(deadline: float, record: bool) -> None:
        await trio.sleep_until(deadline)
        if record:
            lateness.append(trio.current_time() - deadline)
            woken.tick()

    async with trio.open_nursery() as nursery:
        for i, deadline in enumerate(deadlines):
            nursery.start_soon(sleeper, deadline, i < measured)
        if spawned is not None:
            await trio.lowlevel.checkpoint()  # let them all start and park first
            spawned()
        await trio.sleep_until(deadlines[0])
        meter = CpuMeter()
        await woken.done.wait()
        share = meter.share()
        nursery.cancel_scope.cancel()
    return SleeperResult(lateness, share)


async def parked_task_bytes(count: int) -> float:
    """Anonymous resident memory per bare parked task: growth over ``count`` tasks parked on one event."""
    release_free_memory()
    before = anon_bytes()
    parked = _Countdown(count)
    event = trio.Event()

    async def park() -> None:
        parked.tick()
        await event.wait()

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(park)
        await parked.done.wait()
        grown = anon_bytes() - before
        event.set()
    return grown / count


async def spawn_lean_actors(count: int) -> float:
    """Seconds to spawn ``count`` lean actors (a task reading its own mailbox) until every one is parked."""
    parked = _Countdown(count)

    async def actor(mailbox: Mailbox[object]) -> None:
        parked.tick()
        await mailbox.get()

    async with trio.open_nursery() as nursery:
        started = time.perf_counter()
        for _ in range(count):
            nursery.start_soon(actor, Mailbox())
        await parked.done.wait()
        elapsed = time.perf_counter() - started
        nursery.cancel_scope.cancel()
    return elapsed
