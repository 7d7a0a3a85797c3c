"""Scenario ``events``: what recording events costs the posture engine under the actors scenario's T3 load.

The T3 rounds of ``bench/actors_bench.py`` alone: each round runs the same T3 subject twice on fresh controllers
(100k actors, 25k MFA deadlines in a 5 s window at 5k/s, 20k messages/s offered), once recording events and once with
``Settings.events`` off, the order alternating from round to round so that a drift of the machine's speed within a
round favours neither side. The offered load is more than one core handles here, so the messages each side handled
are its throughput. T3.events is the median over rounds of the ratio within each round (the two sides of a round run
minutes apart; rounds drift by more than the cost measured, as T8 and T9 in the sessions scenario); the table's
figures are medians over rounds of each side, with the process CPU and the deadline -> durable revocation p99.

Full run: 5 rounds; ``--quick``: the actors scenario's quick sizes.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
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


ROUNDS = 5


def build_result(rounds: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    result = ScenarioResult("events", quick, COLUMNS, rounds=rounds)
    on = sorted((r for r in rounds if r["events"]), key=lambda r: int(r["round"]))
    off = sorted((r for r in rounds if not r["events"]), key=lambda r: int(r["round"]))
    for label, key, unit in MEASURES:
        value, base = median(float(r[key]) for r in on), median(float(r[key]) for r in off)
        result.rows.append([f"T3: {label}", value, base, ratio(value, base), unit, len(on)])
    ratios = [ratio(float(a["msg_rate"]), float(b["msg_rate"])) for a, b in zip(on, off, strict=True)]
    result.targets.append(Target(
        "T3.events", "events on: messages/s handled >= 95% of events off (median of the rounds' ratios)",
        median(ratios) >= 0.95, median(float(r["msg_rate"]) for r in on), median(float(r["msg_rate"]) for r in off),
        median(ratios), "msg/s"))
    result.notes.append("the T3 subject of the actors scenario, run with and without events in each round, the "
                        "order alternating by round; ratios by round: " + ", ".join(f"{r:.3f}" for r in ratios))
    return result


def run(quick: bool) -> ScenarioResult:
    config = QUICK if quick else replace(FULL, rounds=ROUNDS)
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-events-"))
    try:
        rounds = trio.run(_rounds, config, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return build_result(rounds, quick)
