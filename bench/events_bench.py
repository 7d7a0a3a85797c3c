"""Scenario ``events``: what recording events costs the posture engine under the actors scenario's T3 load.

The T3 rounds of ``bench/actors_bench.py`` alone: each round runs the same T3 subject twice on fresh controllers
(100k actors, 25k MFA deadlines in a 5 s window at 5k/s, 20k messages/s offered), once recording events and once with
``Settings.events`` off, the order alternating from round to round so that a drift of the machine's speed within a
round favours neither side. The offered load is more than one core handles here, so the messages each side handled
are its throughput. T3.events is the median over rounds of the ratio within each round (the two sides of a round run
minutes apart; rounds drift by more than the cost measured, as T8 and T9 in the sessions scenario); the table's
figures are medians over rounds of each side, with the process CPU and the deadline -> durable revocation p99.

Then the same comparison at a load one core sustains (``sustained``: 1k deadlines/s and 2k messages/s offered, 5k
deadlines in the window, the same 100k actors): both sides handle everything offered, so what recording events costs
shows as process CPU; T3s.events.cpu is the median over rounds of the ratio of the two sides' CPU share within each
round.

Full run: 5 rounds of each part; ``--quick``: the actors scenario's quick sizes.
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

__all__ = ["parts", "run"]

COLUMNS = ["measure", "events on", "events off", "ratio", "unit", "rounds"]
MEASURES = (("messages/s handled", "msg_rate", "msg/s"), ("process CPU, share of one core", "cpu_share", "cores"),
            ("deadline -> durable revocation p99", "durable_p99_ms", "ms"),
            ("deadlines still undecided after the patience", "undecided", "deadlines"))


async def _rounds(parts: dict[str, Config], workdir: Path) -> list[dict[str, Any]]:
    monitor = memory.GcMonitor().install()
    rounds: list[dict[str, Any]] = []
    try:
        for part, config in parts.items():
            for r in range(config.rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                for events in order:
                    figures = await t3_subject(config, workdir / f"{part}-{r}-{int(events)}", monitor, seed=r,
                                               events=events)
                    rounds.append({"part": part, "round": r, "events": events, **figures})
    finally:
        monitor.uninstall()
    return rounds


ROUNDS = 5


def _sides(rounds: list[dict[str, Any]], part: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    ordered = sorted((r for r in rounds if r["part"] == part), key=lambda r: int(r["round"]))
    return [r for r in ordered if r["events"]], [r for r in ordered if not r["events"]]


def _round_ratios(on: list[dict[str, Any]], off: list[dict[str, Any]], key: str) -> list[float]:
    return [ratio(float(a[key]), float(b[key])) for a, b in zip(on, off, strict=True)]


def build_result(rounds: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    result = ScenarioResult("events", quick, COLUMNS, rounds=rounds)
    for part, label in (("T3", "T3"), ("sustained", "T3 at a sustained load")):
        on, off = _sides(rounds, part)
        for measure, key, unit in MEASURES:
            value, base = median(float(r[key]) for r in on), median(float(r[key]) for r in off)
            result.rows.append([f"{label}: {measure}", value, base, ratio(value, base), unit, len(on)])
    on, off = _sides(rounds, "T3")
    handled = _round_ratios(on, off, "msg_rate")
    result.targets.append(Target(
        "T3.events", "events on: messages/s handled >= 95% of events off (median of the rounds' ratios)",
        median(handled) >= 0.95, median(float(r["msg_rate"]) for r in on), median(float(r["msg_rate"]) for r in off),
        median(handled), "msg/s"))
    on, off = _sides(rounds, "sustained")
    cpu = _round_ratios(on, off, "cpu_share")
    result.targets.append(Target(
        "T3s.events.cpu", "at a load one core sustains: process CPU with events on <= 105% of events off (median of "
        "the rounds' ratios)", median(cpu) <= 1.05, median(float(r["cpu_share"]) for r in on),
        median(float(r["cpu_share"]) for r in off), median(cpu), "cores"))
    result.notes.append("the T3 subject of the actors scenario, run with and without events in each round, the "
                        "order alternating by round; T3's ratios of messages handled by round: "
                        + ", ".join(f"{r:.3f}" for r in handled) + "; the sustained load's ratios of CPU by round: "
                        + ", ".join(f"{r:.3f}" for r in cpu))
    return result


def parts(quick: bool) -> dict[str, Config]:
    """T3 as the actors scenario runs it, and the same at a load one core sustains."""
    config = QUICK if quick else replace(FULL, rounds=ROUNDS)
    sustained = replace(config, rate=config.rate / 5, msg_rate=config.msg_rate / 10,
                        t3_measured=config.t3_measured // 5)
    return {"T3": config, "sustained": sustained}


def run(quick: bool) -> ScenarioResult:
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-events-"))
    try:
        rounds = trio.run(_rounds, parts(quick), workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return build_result(rounds, quick)
