"""The ``actors`` scenario (issue 4, targets T3-T5): identity actors with MFA deadlines at 100k and 1M identities.

Every identity is a live actor parked on its MFA deadline (seeded by ``bench/identity_seeding.py``); when a deadline is
reached the engine re-evaluates the identity and revokes its Dial session, and its lateness recorder reports when
the decision was computed and when the revocation was durable. Meanwhile a stream of wake/unlock and posture
messages goes to random identities, as clients would send them through the Client API.

* T3, ``rounds`` rounds, each on a fresh controller, interleaved with baseline rounds: 100k actors, 25k of whose
  deadlines fall in a 5 s window at 5k/s while 20k messages/s are offered (the other 75k wait beyond the window).
  Baseline: bare ``trio.sleep_until`` tasks, 100k of them, the same 25k deadlines, under the same GC policy. Each
  round also runs once with no events recorded (``Settings.events`` off): T3.events compares the two.
* T5, ``rounds`` restarts of a controller holding 100k pending deadlines: the time from opening the data
  directory to serving with every deadline re-armed, interleaved with a bare spawn of 100k lean actors.
* The capacity curve, one controller of 100k actors (all loaded before the first window): one window of
  ``curve_seconds`` per offered load of ``curve_loads`` events per second, a fifth of them deadlines and the rest
  messages (T3's mix), ``curve_gap`` seconds apart; each reports the messages handled per second and the decision
  lateness, so the load at which the engine stops keeping up (the knee) shows.
* T4, one load of 1M actors (a single load: loading a million takes minutes), then three measurement windows like
  T3's with a baseline window in each gap; memory per parked actor (anonymous RSS growth over waking the parked
  population) against a bare parked Trio task measured the same way just before.

The GC is monitored throughout (``controller.runtime.memory.GcMonitor``); its longest pause within the measurement
windows is reported. ``--quick`` shrinks every size so the whole scenario runs in seconds; its figures mean nothing.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio

from bench.actors_harness import ROLE, TIMEOUT_SECONDS, Outcomes, load_measured, load_parked, message_stream
from bench.actors_probe import anon_bytes, file_bytes, release_free_memory
from bench.actors_report import build_result
from bench.baselines import parked_task_bytes, sleep_until_lateness, spawn_lean_actors
from bench.controller_run import running_controller
from bench.identity_seeding import seed_mfa_identities, wake_all
from bench.report import ScenarioResult
from bench.stats import summarize
from controller.runtime import memory
from controller.runtime.composition import Controller

__all__ = ["FULL", "QUICK", "Config", "run", "t3_subject"]


@dataclass(frozen=True, slots=True)
class Config:
    """Sizes and rates of one run (see the module docstring)."""

    rounds: int
    rate: float  # deadlines per second
    msg_rate: float  # messages per second offered
    in_flight: int  # messages not yet handled, at most (a server's bound on requests in progress)
    t3_count: int
    t3_measured: int
    t4_count: int
    t4_blocks: int
    t4_per_block: int
    t4_gap: float
    t5_count: int
    patience: float  # how long to wait after a window for its deadlines' outcomes
    margin: float  # spare seconds before the first measured deadline, after loading or spawning
    curve_loads: tuple[float, ...] = (2_500, 5_000, 10_000, 20_000, 40_000)  # events per second offered
    curve_seconds: float = 2.0
    curve_gap: float = 8.0


FULL = Config(rounds=3, rate=5_000, msg_rate=20_000, in_flight=1_024, t3_count=100_000, t3_measured=25_000,
              t4_count=1_000_000, t4_blocks=3, t4_per_block=25_000, t4_gap=20.0, t5_count=100_000, patience=20.0,
              margin=2.0)
# A quick run's patience only bounds the wait for outcomes that are late: it ends as soon as every one is in, and a
# loaded machine (a smoke test beside a parallel suite) may need far longer than the figures would ever show.
QUICK = Config(rounds=3, rate=1_000, msg_rate=500, in_flight=1_024, t3_count=400, t3_measured=100,
               t4_count=1_000, t4_blocks=3, t4_per_block=100, t4_gap=0.3, t5_count=400, patience=120.0,
               margin=0.1, curve_loads=(250, 500), curve_seconds=0.2, curve_gap=0.3)
DEADLINE_SHARE = 0.2
"""Of the curve's events, the share that are deadlines (T3: 5k of 25k)."""


def run(quick: bool) -> ScenarioResult:
    """Run the scenario (see the module docstring)."""
    config = QUICK if quick else FULL
    result: ScenarioResult = trio.run(_run, config, quick)
    return result


async def _run(config: Config, quick: bool) -> ScenarioResult:
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-actors-"))
    monitor = memory.GcMonitor().install()
    rounds: list[dict[str, Any]] = []
    try:
        for r in range(config.rounds):
            rounds.append({"part": "T3", "round": r, "side": "baseline", **await _t3_baseline(config)})
            rounds.append({"part": "T3", "round": r, "side": "subject",
                           **await t3_subject(config, workdir / f"t3-{r}", monitor, seed=r)})
            # The same round with no events recorded: what recording them costs the engine (T3.events).
            rounds.append({"part": "T3", "round": r, "side": "quiet",
                           **await t3_subject(config, workdir / f"t3q-{r}", monitor, seed=r, events=False)})
        rounds.extend(await _curve(config, workdir / "curve", monitor))
        rounds.extend(await _t5(config, workdir / "t5"))
        rounds.extend(await _t4(config, workdir / "t4", monitor))
    finally:
        monitor.uninstall()
        shutil.rmtree(workdir, ignore_errors=True)
    return build_result(config, quick, rounds)


def _lateness(prefix: str, seconds: list[float]) -> dict[str, float]:
    summary = summarize(seconds)
    return {f"{prefix}_p50_ms": summary.p50_ms, f"{prefix}_p99_ms": summary.p99_ms,
            f"{prefix}_max_ms": summary.max_ms}


async def _window(controller: Controller, ids: list[str], outcomes: Outcomes, monitor: memory.GcMonitor,
                  start: float, config: Config, count: int, seed: int) -> dict[str, Any]:
    """One measurement window: ``count`` deadlines from ``start`` (wall clock) under the message stream."""
    end = start + count / config.rate
    await trio.sleep_until(controller.clock.to_trio(start))
    monitor.reset()
    stream = await message_stream(controller, ids, config.msg_rate, controller.clock.to_trio(end),
                                  in_flight=config.in_flight, seed=seed)
    got = await outcomes.wait_for(start, end, count, patience=config.patience)
    # A deadline still undecided after the patience counts as late as the wait (a lower bound, flagged).
    missing = count - len(got)
    waited = controller.clock.now()
    decision = [o.decision_lateness for o in got] + [waited - end] * missing
    durable = [o.durable_lateness for o in got] + [waited - end] * missing
    return {"deadlines": count, "undecided": missing, "revoked": sum(o.revoked for o in got),
            **_lateness("decision", decision), **_lateness("durable", durable),
            "cpu_share": stream.cpu_share, "trio_cpu_share": stream.trio_cpu_share, "msg_rate": stream.rate,
            "gc_max_pause_ms": monitor.max_pause * 1e3, "gc": monitor.statistics()}


async def _sleepers(config: Config, measured: int, total: int) -> dict[str, Any]:
    """Bare ``sleep_until`` tasks: ``measured`` deadlines at the scenario's rate, the rest far beyond them."""
    now = trio.current_time()
    lead = config.margin + total * 40e-6  # spawning them and settling the GC
    deadlines = [now + lead + i / config.rate for i in range(measured)]
    deadlines += [now + 1_800.0 + i / config.rate for i in range(total - measured)]
    result = await sleep_until_lateness(deadlines, measured, spawned=memory.settle)
    return {"deadlines": measured, **_lateness("decision", result.lateness), "cpu_share": result.cpu_share}


async def _t3_baseline(config: Config) -> dict[str, Any]:
    """Bare sleepers under the same GC policy as the controller (otherwise the baseline would measure untuned
    full collections over its 100k tasks, not the timers)."""
    release_free_memory()
    policy = memory.GcPolicy().install()
    try:
        return await _sleepers(config, config.t3_measured, config.t3_count)
    finally:
        policy.uninstall()


async def t3_subject(config: Config, data_dir: Path, monitor: memory.GcMonitor, *, seed: int,
                      events: bool = True, young_steps: int | None = memory.YOUNG_STEPS) -> dict[str, Any]:
    release_free_memory()
    async with running_controller(data_dir, events=events, young_steps=young_steps) as running:
        controller = running.controller
        parked = await load_parked(controller, config.t3_count - config.t3_measured, rate=config.rate)
        # Observed before the measured identities are seeded: on a loaded machine seeding may overrun the first
        # deadlines, and an outcome decided before the observer was added would never be seen.
        outcomes = Outcomes(controller)
        measured = await load_measured(controller, blocks=1, per_block=config.t3_measured, rate=config.rate,
                                       gap=0.0, wake_per_actor=parked.wake_seconds / max(1, len(parked.ids)),
                                       margin=config.margin)
        window = await _window(controller, parked.ids + measured.ids, outcomes, monitor, measured.block_starts[0],
                               config, config.t3_measured, seed)
        outcomes.close()
        live = controller.engine.actors.statistics()["live"]
    shutil.rmtree(data_dir, ignore_errors=True)
    return {**window, "live_actors_after": live, "overran": measured.overran}


async def _curve(config: Config, data_dir: Path, monitor: memory.GcMonitor) -> list[dict[str, Any]]:
    """The capacity curve: ``t3_count`` actors, one window per offered load (see the module docstring)."""
    counts = [max(1, round(load * DEADLINE_SHARE * config.curve_seconds)) for load in config.curve_loads]
    release_free_memory()
    rounds: list[dict[str, Any]] = []
    async with running_controller(data_dir) as running:
        controller = running.controller
        parked = await load_parked(controller, config.t3_count - sum(counts), rate=config.rate)
        wake_per_actor = parked.wake_seconds / max(1, len(parked.ids))
        # Every window's identities are seeded before the first window, at the rate of their own load.
        began = controller.clock.now()
        lead = config.margin + 3 * sum(counts) * (wake_per_actor + 50e-6)
        starts = [began + lead + n * (config.curve_seconds + config.curve_gap) for n in range(len(counts))]
        measured: list[str] = []
        outcomes = Outcomes(controller)  # before seeding, as in t3_subject
        for load, count, start in zip(config.curve_loads, counts, starts, strict=True):
            measured += await seed_mfa_identities(
                controller, count, deadlines_per_second=load * DEADLINE_SHARE, start_in=start - controller.clock.now(),
                timeout_seconds=TIMEOUT_SECONDS, role=ROLE)
        await wake_all(controller, measured)
        memory.settle()
        overran = controller.clock.now() > starts[0]
        ids = parked.ids + measured
        for n, (load, count, start) in enumerate(zip(config.curve_loads, counts, starts, strict=True)):
            mix = replace(config, rate=load * DEADLINE_SHARE, msg_rate=load * (1 - DEADLINE_SHARE))
            window = await _window(controller, ids, outcomes, monitor, start, mix, count, seed=100 + n)
            rounds.append({"part": "curve", "side": "subject", "offered": load, "overran": overran,
                           "offered_msg_rate": mix.msg_rate, **window})
        outcomes.close()
    shutil.rmtree(data_dir, ignore_errors=True)
    return rounds


async def _t5(config: Config, data_dir: Path) -> list[dict[str, Any]]:
    """Restarts of a controller holding ``t5_count`` pending deadlines, interleaved with bare lean spawns."""
    async with running_controller(data_dir) as running:
        await load_parked(running.controller, config.t5_count, rate=config.rate)
    rounds: list[dict[str, Any]] = []
    for r in range(config.rounds):
        release_free_memory()
        rounds.append({"part": "T5", "round": r, "side": "baseline",
                       "seconds": await spawn_lean_actors(config.t5_count)})
        release_free_memory()
        async with running_controller(data_dir) as running:
            armed = running.controller.engine.actors.statistics()["scheduler_pending"]
            rounds.append({"part": "T5", "round": r, "side": "subject", "seconds": running.ready_seconds,
                           "armed": armed})
    return rounds


async def _t4(config: Config, data_dir: Path, monitor: memory.GcMonitor) -> list[dict[str, Any]]:
    """One load of ``t4_count`` actors; memory per parked actor; windows with baselines in their gaps."""
    population = config.t4_count - config.t4_blocks * config.t4_per_block
    release_free_memory()
    task_bytes = await parked_task_bytes(population)
    rounds: list[dict[str, Any]] = []
    async with running_controller(data_dir) as running:
        controller = running.controller
        before_anon, before_file = anon_bytes(), file_bytes()
        parked = await load_parked(controller, population, rate=config.rate)
        release_free_memory()
        rounds.append({"part": "T4", "side": "memory", "actors": population, "task_bytes": task_bytes,
                       "actor_bytes": (anon_bytes() - before_anon) / population,
                       "actor_file_bytes": (file_bytes() - before_file) / population,
                       "seed_seconds": parked.seed_seconds, "wake_seconds": parked.wake_seconds})
        outcomes = Outcomes(controller)  # before seeding, as in t3_subject
        measured = await load_measured(controller, blocks=config.t4_blocks, per_block=config.t4_per_block,
                                       rate=config.rate, gap=config.t4_gap,
                                       wake_per_actor=parked.wake_seconds / population, margin=config.margin)
        ids = parked.ids + measured.ids
        for b, start in enumerate(measured.block_starts):
            window = await _window(controller, ids, outcomes, monitor, start, config, config.t4_per_block, seed=b)
            rounds.append({"part": "T4", "round": b, "side": "subject", "overran": measured.overran,
                           "live_actors": controller.engine.actors.statistics()["live"], **window})
            next_start = (measured.block_starts[b + 1] if b + 1 < len(measured.block_starts) else math.inf)
            span = 2 * config.margin + config.t4_per_block * 30e-6 + config.t4_per_block / config.rate
            if controller.clock.now() + span < next_start:
                rounds.append({"part": "T4", "round": b, "side": "baseline",
                               **await _sleepers(config, config.t4_per_block, config.t4_per_block)})
        outcomes.close()
        # What freezing kept that a full collection would have freed (cycles that died after being frozen).
        rounds.append({"part": "T4", "side": "gc", "frozen": memory.GcMonitor().statistics()["frozen"],
                       "frozen_garbage": memory.collect_frozen(), "population": len(ids)})
    return rounds
