"""Scenario ``events``: what recording events costs the posture engine under the actors scenario's T3 load.

The T3 rounds of ``bench/actors_bench.py`` alone: each round runs the same T3 subject twice on fresh controllers
(100k actors, 25k MFA deadlines in a 5 s window at 5k/s, 20k messages/s offered), once recording events and once with
``Settings.events`` off, the order alternating from round to round so that a drift of the machine's speed within a
round favours neither side. Figures are medians over rounds; T3.events compares the messages each side handled at the
same offered load, with the process CPU and the deadline -> durable revocation p99 beside it.

Full run: 3 rounds; ``--quick``: the actors scenario's quick sizes.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import trio

from bench.actors_bench import FULL, QUICK, Config, t3_subject
from bench.report import ScenarioResult, Target, ratio
from bench.stats import median
from controller.runtime import memory

__all__ = ["run"]

COLUMNS = ["measure", "events on", "events off", "ratio", "unit", "rounds"]
MEASURES = (("messages/s handled", "msg_rate", "msg/s"), ("process CPU, share of one core", "cpu_share", "cores"),
            ("deadline -> durable revocation p99", "durable_p99_ms", "ms"),
            ("deadlines still undecided after the patience", "undecided", "deadlines"))


async def _rounds(config: Config, workdir: Path) -> list[dict[str, Any]]:
    monitor = memory.GcMonitor().install()
    rounds: list[dict[str, Any]] = []
    try:
        for r in range(config.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for events in order:
                figures = await t3_subject(config, workdir / f"t3-{r}-{int(events)}", monitor, seed=r, events=events)
                rounds.append({"round": r, "events": events, **figures})
    finally:
        monitor.uninstall()
    return rounds


def build_result(rounds: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    result = ScenarioResult("events", quick, COLUMNS, rounds=rounds)
    on = [r for r in rounds if r["events"]]
    off = [r for r in rounds if not r["events"]]
    for label, key, unit in MEASURES:
        value, base = median(float(r[key]) for r in on), median(float(r[key]) for r in off)
        result.rows.append([f"T3: {label}", value, base, ratio(value, base), unit, len(on)])
    result.targets.append(Target.at_least(
        "T3.events", "events on: messages/s handled >= 95% of events off (same load, same round)",
        median(float(r["msg_rate"]) for r in on), median(float(r["msg_rate"]) for r in off), 0.95, "msg/s"))
    result.notes.append("the T3 subject of the actors scenario, run with and without events in each round, the "
                        "order alternating by round")
    return result


def run(quick: bool) -> ScenarioResult:
    config = QUICK if quick else FULL
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-events-"))
    try:
        rounds = trio.run(_rounds, config, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return build_result(rounds, quick)
