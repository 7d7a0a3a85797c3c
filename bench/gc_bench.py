"""Scenario ``gc``: what collecting the young generation every few actor steps changes
(:class:`controller.runtime.memory.YoungCollections`), each workload run with it and without it, interleaved.

Two workloads, both of which replace long-lived (frozen) actor state with new objects, one freed for each allocated:
churn that CPython's own trigger of young collections does not count (whether other allocations on the way make up
for it is what the figures show):

* ``T3``: the actors scenario's T3 round (``bench/actors_bench.py``: 100,000 actors, 5,000 deadlines/s and 20,000
  messages/s offered), reporting deadline -> decision p99, messages handled and the longest collection in its window;
* ``re-checks``: a restart of a controller holding ``N`` identities with API sessions, every one re-checked as it is
  adopted (``bench/adoption_bench.py`` measures the same restart's cost); reported from serving to every re-check
  settled: the longest collection and all collections' time; and the process's CPU time to then, plus one full
  collection of what the wave left (without it, the side whose collections the wave postponed would look cheaper).

Each row is the median of the rounds; the one target is the issue's bound on a collection while serving (T2.gc's):
the longest, with the young collections, in either workload.
"""

from __future__ import annotations

import gc
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench import actors_bench, adoption_bench
from bench.controller_run import running_controller
from bench.report import ScenarioResult, Target
from bench.stats import median
from controller.runtime import memory

__all__ = ["COLUMNS", "run"]

COLUMNS = ["workload", "young collections", "decision p99 ms", "msg/s", "longest collection ms",
           "collections ms", "CPU s", "rounds"]
PAUSE_LIMIT_MS = 50.0
_WITH = f"every {memory.YOUNG_STEPS} actor steps"
_SIDES: dict[str, int | None] = {_WITH: memory.YOUNG_STEPS, "CPython's only": None}
_FULL = (3, 20_000)  # rounds, identities re-checked
_QUICK = (1, 500)


def _collections_ms(monitor: memory.GcMonitor) -> float:
    return sum(generation.total for generation in monitor.generations) * 1e3


async def _t3(config: actors_bench.Config, work: Path, seed: int, young_steps: int | None) -> dict[str, Any]:
    monitor = memory.GcMonitor().install()
    try:
        window = await actors_bench.t3_subject(config, work / "t3", monitor, seed=seed, young_steps=young_steps)
        return {"decision_p99_ms": window["decision_p99_ms"], "msg_rate": window["msg_rate"],
                "pause_ms": window["gc_max_pause_ms"], "collections_ms": _collections_ms(monitor)}
    finally:
        monitor.uninstall()


async def _rechecks(data_dir: Path, young_steps: int | None) -> dict[str, Any]:
    """From serving (after the start's own full collection) to every re-check settled, then one full collection of
    what the wave left, whose time counts in the CPU time and not as a pause of the wave."""
    monitor = memory.GcMonitor().install()
    try:
        async with running_controller(data_dir, young_steps=young_steps) as running:
            monitor.reset()
            cpu = time.process_time()
            await running.controller.engine.adoptions_rechecked()
            pause_ms, collections_ms = monitor.max_pause * 1e3, _collections_ms(monitor)
            gc.collect()
            return {"pause_ms": pause_ms, "collections_ms": collections_ms, "cpu_seconds": time.process_time() - cpu}
    finally:
        monitor.uninstall()


async def _rounds(quick: bool) -> list[dict[str, Any]]:
    rounds, identities = _QUICK if quick else _FULL
    config = actors_bench.QUICK if quick else actors_bench.FULL
    work = Path(tempfile.mkdtemp(prefix="tollgate-bench-gc-"))
    measured: list[dict[str, Any]] = []
    try:
        await adoption_bench.seed(work / "rechecks", identities)
        for number in range(rounds):
            for side, steps in _SIDES.items():
                measured.append({"workload": "T3", "side": side, "round": number,
                                 **await _t3(config, work / f"{number}-{steps}", number, steps)})
                measured.append({"workload": "re-checks", "side": side, "round": number, "identities": identities,
                                 **await _rechecks(work / "rechecks", steps)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return measured


def _median(rows: list[dict[str, Any]], key: str) -> float:
    values = [float(row[key]) for row in rows if key in row]
    return median(values) if values else float("nan")


def build_result(measured: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    result = ScenarioResult("gc", quick, COLUMNS, rounds=measured)
    for workload in ("T3", "re-checks"):
        for side in _SIDES:
            rows = [row for row in measured if row["workload"] == workload and row["side"] == side]
            result.rows.append([workload, side, _median(rows, "decision_p99_ms"), _median(rows, "msg_rate"),
                                _median(rows, "pause_ms"), _median(rows, "collections_ms"),
                                _median(rows, "cpu_seconds"), len(rows)])
    with_young = [row for row in measured if row["side"] == _WITH]
    worst = max(float(row["pause_ms"]) for row in with_young)
    result.targets.append(Target.bound(
        "gc.pause", f"longest collection with the young collections, T3 and the re-checks, <= {PAUSE_LIMIT_MS:g} ms",
        worst, PAUSE_LIMIT_MS, "ms"))
    result.notes.append("rows are medians of the rounds; the target takes the worst round; 're-checks' counts from "
                        "serving to every adopted identity's re-check settled")
    return result


def run(*, quick: bool) -> ScenarioResult:
    return build_result(trio.run(_rounds, quick), quick)
