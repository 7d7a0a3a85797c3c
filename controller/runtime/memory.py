"""The garbage-collection policy: no collection may stall the event loop for long, however many actors live.

Why a policy at all. CPython frees most objects by reference counting; its cyclic collector exists for reference
cycles, and a *full* (oldest-generation) collection traverses every container object the process tracks. The
controller keeps such objects by the hundred thousand for as long as it runs: parked identity actors (a Trio task,
its coroutine frames, its mailbox and posture state, about a dozen tracked objects each), API sessions, the timer
heap. Untuned, full collections with only 20k actors (and their freshly loaded rows) stalled the loop for
0.4-0.5 s here (every request and every deadline waited for them; architecture.md saw HTTP p99 go from ~100 ms to
600-800 ms at 100k actors), and their cost grows with the population: at a million actors, seconds.

The policy, in four parts:

1. :func:`settle` after start-up, after the restore and after any bulk load: one full collection (so that the
   garbage of the load is freed, not kept), then ``gc.freeze()``, which moves every surviving object into the
   permanent generation that collections never traverse. ``main`` calls it once the engine has re-armed its
   deadlines and the API sessions are loaded; a benchmark server calls it after loading actors.
2. :class:`GcPolicy` (installed by ``main`` for the life of the process) freezes the survivors of every later full
   collection too, from a ``gc.callbacks`` hook. The actor population churns (each handled message replaces an
   actor's state and its parking coroutine with new objects, which survive into the oldest generation) and grows
   (new actors); without re-freezing, the unfrozen oldest generation would grow back to the whole population and
   full collections with it. Re-frozen after each one, it holds only what was promoted since the last, and a full
   collection is bounded by the thresholds: at most about ``threshold0 * threshold1 * threshold2`` objects
   (25k with :data:`THRESHOLDS`, plus the young generations), whatever the population. Measured by the actors
   benchmark with every core busy, at 100k and at 1M actors (14M objects frozen): full collections of ~25 ms on
   average, 32-53 ms at worst (most likely the OS preempting a loaded 2-core machine: young collections of 1000
   objects also took up to 20 ms there); freezing likewise but with thresholds (2000, 10, 10), full collections at
   only 20k busy actors took 100-135 ms. The price is CPU: collections took about 15% of the time under that
   saturating load (more, shorter collections).
3. Objects frozen that die later are still freed by reference counting, as almost everything is (a finished Trio
   task, a replaced actor state: measured, nothing of them is left to the cyclic collector). What freezing does
   cost: a reference *cycle* that was alive at a full collection and dies afterwards is never reclaimed. Those are
   whatever was in flight at that instant (a request's exception traceback, a connection being torn down), so the
   cost is bounded per full collection, not per object; the actors benchmark reports it (``gc.unfreeze()`` and one
   collection at the end count what would have been kept: none at 1M actors), and :func:`collect_frozen` reclaims
   it, at the price of one pause proportional to the whole population, for an operator's maintenance window.
   Serving HTTP is where such cycles would come from; the http benchmark's long runs are where to watch for them.

4. :class:`YoungCollections` bounds the young generation by work as well. CPython starts a young collection when
   the container objects allocated since the last one outnumber those freed by ``threshold0``, and a freed object
   counts whatever its age. An actor that handles a message replaces its frozen state with a new one: one object
   freed for each allocated, so the count stays flat while the young generation keeps every new object. A wave of
   re-checks over a large network would fill it with every re-checked identity's new objects before any collection
   came, and the one that finally came (then each older generation's, as the objects moved up) would stall the loop
   for as long as the wave's population takes to traverse, long enough for a cluster node to lose its lease. The
   actors' steps are therefore counted where they happen (the registry calls :meth:`YoungCollections.stepped` after
   each), and after :data:`YOUNG_STEPS` of them without a collection, the generation CPython would pick is
   collected. Counting actor steps rather than every task step leaves the rest of the work (serving HTTP, which
   frees what it allocates) to CPython's own count, so the young collections come only as often as actors churn.

What the collector traverses under load is mostly what in-flight work holds: at saturation every actor step waits
for the group commit, and each collection walks those waiting steps. Sampling the generations showed about 65 tracked
objects per waiting step (closures and their cells, an Event with its waiter set, the read snapshot and its rows,
the encoded state); trimmed to the coroutines and a few slotted objects (``controller/posture/engine.py``,
``controller/data/domain.py``, :class:`actors.live_actors.OneShot`), young collections per event fell by 60% and the
actor-step CPU by a fifth to a third. Keep objects that wait for a commit lean.

:class:`GcMonitor` records every collection's pause (what ``/metrics``-style monitoring and the benchmarks read).
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["YOUNG_STEPS", "GcMonitor", "GcPolicy", "PauseStatistics", "StepCounted", "YoungCollections",
           "collect_frozen", "runtime_policy", "settle"]

# A collection traverses about 0.5 µs per object on these machines under load (the young generations included),
# so threshold1 = threshold2 = 5 instead of 10 and threshold0 = 1000: the middle generation stays under ~6k objects
# (a few ms) and a full collection of what is not frozen under ~40k (~20 ms).
THRESHOLDS = (1000, 5, 5)
YOUNG_STEPS = 32
"""Actor steps after which :class:`YoungCollections` collects if CPython has not. An actor step keeps about eight
new container objects, and a full collection comes after every ``threshold1 * threshold2`` (25) young ones, so it
then traverses the survivors of about 800 steps (some 7,000 unfrozen objects) however fast the actors churn."""


class StepCounted(Protocol):
    """The actors whose steps :class:`YoungCollections` counts (:class:`actors.live_actors.ActorRegistry`)."""

    after_step: Callable[[], None] | None


def settle() -> int:
    """Collect everything not yet frozen, then freeze what survived; returns the objects now frozen.

    Pauses for as long as one full collection of the objects created since the last freeze (seconds after loading
    a million actors): call it before serving, or between measurements, never on a latency-sensitive path.
    """
    gc.collect()
    gc.freeze()
    # CPython waits for the oldest generation to grow by a quarter of what the last full collection kept before it
    # collects it again; that figure still counts everything just frozen, so without this second collection (of
    # nothing: instant) the next one would wait for, and then traverse, a quarter of the whole population.
    gc.collect()
    return gc.get_freeze_count()


def collect_frozen() -> int:
    """Unfreeze, collect everything and freeze again; returns how many unreachable objects were found.

    The only way to reclaim reference cycles that died after being frozen; it traverses the whole population, so
    it pauses like an untuned full collection.
    """
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found


@dataclass(slots=True)
class PauseStatistics:
    """Collections of one generation: how many, their total and longest pause (seconds)."""

    count: int = 0
    total: float = 0.0
    max: float = 0.0


@dataclass(slots=True)
class GcMonitor:
    """Times every collection of the process while installed (``gc.callbacks``); cheap enough to leave on."""

    generations: list[PauseStatistics] = field(default_factory=lambda: [PauseStatistics() for _ in range(3)])
    _started: float = 0.0

    def install(self) -> GcMonitor:
        gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def reset(self) -> None:
        self.generations = [PauseStatistics() for _ in range(3)]

    @property
    def max_pause(self) -> float:
        return max(g.max for g in self.generations)

    def statistics(self) -> dict[str, float]:
        """Per generation: collections, total and max pause in milliseconds; plus the objects frozen."""
        stats: dict[str, float] = {"frozen": float(gc.get_freeze_count())}
        for number, g in enumerate(self.generations):
            stats[f"gen{number}_collections"] = float(g.count)
            stats[f"gen{number}_total_ms"] = g.total * 1e3
            stats[f"gen{number}_max_ms"] = g.max * 1e3
        return stats

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        g = self.generations[int(info["generation"])]
        g.count += 1
        g.total += pause
        g.max = max(g.max, pause)


class GcPolicy:
    """Thresholds plus freezing after every full collection (part 2 of the module docstring), for as long as it is
    installed. ``uninstall`` restores the previous thresholds and unfreezes: whatever outlives the controller in the
    same process (a test run) goes back to ordinary collection instead of being kept forever."""

    def __init__(self, thresholds: tuple[int, int, int] = THRESHOLDS) -> None:
        self.thresholds = thresholds
        self.refreezes = 0
        self._previous: tuple[int, int, int] | None = None

    def install(self) -> GcPolicy:
        if self._previous is None:
            self._previous = gc.get_threshold()
            gc.set_threshold(*self.thresholds)
            gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        if self._previous is not None:
            gc.set_threshold(*self._previous)
            self._previous = None
            if self._callback in gc.callbacks:
                gc.callbacks.remove(self._callback)
            gc.unfreeze()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        # The collection is over: its survivors are all in the oldest generation, and freezing them is a list
        # splice (constant time), so the next full collection starts from nothing again.
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()
            self.refreezes += 1


class YoungCollections:
    """Collects after ``steps`` actor steps in which no collection ran (part 4 of the module docstring): the
    generation CPython itself would pick, the oldest whose count passed its threshold, or the youngest. Any
    collection, CPython's own included, starts the count again."""

    def __init__(self, actors: StepCounted, steps: int = YOUNG_STEPS) -> None:
        self.steps = steps
        self._actors = actors
        self._left = steps
        self._installed = False

    def install(self) -> YoungCollections:
        """Count the actors' steps (and every collection of the process)."""
        if not self._installed:
            self._installed = True
            gc.callbacks.append(self._collected)
            self._actors.after_step = self.stepped
        return self

    def uninstall(self) -> None:
        if self._installed:
            self._installed = False
            gc.callbacks.remove(self._collected)
            self._actors.after_step = None

    def stepped(self) -> None:
        """One actor step more."""
        self._left -= 1
        if self._left <= 0 and gc.isenabled():
            gc.collect(_due_generation())  # resets the count through _collected

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            self._left = self.steps


def _due_generation() -> int:
    """The generation CPython's next automatic collection would take: the oldest whose count (the collections of the
    next younger generation since its own) passed its threshold, else the youngest. CPython also puts a full
    collection off until a quarter of the long-lived objects are new; Python cannot see that ratio, and with the
    survivors of each full collection frozen, one more full collection traverses little."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    for generation in (2, 1):
        if counts[generation] > thresholds[generation]:
            return generation
    return 0


@contextmanager
def runtime_policy(actors: StepCounted, young_steps: int | None = YOUNG_STEPS) -> Iterator[GcPolicy]:
    """The process settings a running controller needs, restored on exit: the :class:`GcPolicy`,
    :class:`YoungCollections` every ``young_steps`` steps of ``actors`` (None: none, what the ``gc`` benchmark
    compares with), and a GIL switch interval of 0.5 ms. The commit thread holds the GIL for up to the switch interval
    (5 ms by default) whenever it runs Python; a shorter interval hands the lock back to the event loop sooner, which
    bounds the latency a commit adds, and lets the commit thread in sooner when the event loop is the busy one."""
    policy = GcPolicy().install()
    young = YoungCollections(actors, young_steps).install() if young_steps is not None else None
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        yield policy
    finally:
        sys.setswitchinterval(switch_interval)
        if young is not None:
            young.uninstall()
        policy.uninstall()
