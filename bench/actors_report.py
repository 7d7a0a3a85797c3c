"""The actors scenario's table, targets and notes, from its raw rounds (see ``bench/actors_bench.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from bench.report import ScenarioResult, Target, ratio
from bench.stats import median

__all__ = ["build_result"]

COLUMNS = ["measure", "subject", "baseline", "ratio", "unit", "rounds"]


def _pick(rounds: Iterable[dict[str, Any]], part: str, side: str) -> list[dict[str, Any]]:
    return [r for r in rounds if r.get("part") == part and r.get("side") == side]


def _med(rows: list[dict[str, Any]], key: str) -> float:
    return median(float(r[key]) for r in rows if key in r and r[key] is not None)


def _target(name: str, goal: str, value: float, baseline: float, limit: float, unit: str) -> Target:
    """An absolute limit, reported with the same-run baseline beside it (``ratio`` is value / baseline)."""
    return Target(name, goal, not math.isnan(value) and value <= limit, value, baseline, ratio(value, baseline), unit)


def build_result(config: Any, quick: bool, rounds: list[dict[str, Any]]) -> ScenarioResult:
    """Medians of the subject and baseline rounds of each part, the targets T3-T5, and the notes."""
    result = ScenarioResult("actors", quick, COLUMNS, rounds=rounds)
    rows = result.rows
    t3, t3b = _pick(rounds, "T3", "subject"), _pick(rounds, "T3", "baseline")
    t3q = _pick(rounds, "T3", "quiet")
    t4, t4b = _pick(rounds, "T4", "subject"), _pick(rounds, "T4", "baseline")
    t5, t5b = _pick(rounds, "T5", "subject"), _pick(rounds, "T5", "baseline")
    [mem] = _pick(rounds, "T4", "memory") or [{}]
    [gc] = _pick(rounds, "T4", "gc") or [{}]
    n3, n4 = f"{config.t3_count:,}", f"{config.t4_count:,}"

    def add(label: str, subject: list[dict[str, Any]], key: str, baseline: list[dict[str, Any]] | None,
            base_key: str | None, unit: str) -> tuple[float, float]:
        value = _med(subject, key)
        base = _med(baseline, base_key or key) if baseline is not None else math.nan
        rows.append([label, value, base, ratio(value, base), unit, len(subject)])
        return value, base

    figures: dict[str, tuple[float, float]] = {}
    for part, subject, baseline, n in (("T3", t3, t3b, n3), ("T4", t4, t4b, n4)):
        for stat in ("p50", "p99", "max"):
            figures[f"{part}.decision_{stat}"] = add(
                f"{part} {n} actors: deadline -> decision {stat} (baseline: bare sleep_until)", subject,
                f"decision_{stat}_ms", baseline, f"decision_{stat}_ms", "ms")
        for stat in ("p50", "p99", "max"):
            figures[f"{part}.durable_{stat}"] = add(
                f"{part}: deadline -> durable revocation {stat} (baseline: bare sleep_until)", subject,
                f"durable_{stat}_ms", baseline, f"decision_{stat}_ms", "ms")
        figures[f"{part}.cpu"] = add(f"{part}: process CPU, share of one core (commit thread included)", subject,
                                     "cpu_share", baseline, "cpu_share", "cores")
        add(f"{part}: Trio thread CPU, share of one core", subject, "trio_cpu_share", None, None, "cores")
        add(f"{part}: messages/s handled (offered {config.msg_rate:,.0f}/s)", subject, "msg_rate", None, None,
            "msg/s")
        add(f"{part}: longest GC pause in the window", subject, "gc_max_pause_ms", None, None, "ms")
    for point in _pick(rounds, "curve", "subject"):
        offered = float(point["offered"])
        rows.append([f"curve at {config.t3_count:,} actors, {offered:,.0f} events/s offered "
                     f"({point['offered_msg_rate']:,.0f} msg/s + {offered - point['offered_msg_rate']:,.0f} "
                     "deadlines/s): messages/s handled / decision p99 ms", point["msg_rate"],
                     point["decision_p99_ms"], math.nan, "msg/s / ms", 1])
    actor_bytes, task_bytes = mem.get("actor_bytes", math.nan), mem.get("task_bytes", math.nan)
    rows.append(["T4: anonymous RSS per parked actor (baseline: bare parked Trio task)", actor_bytes, task_bytes,
                 ratio(actor_bytes, task_bytes), "bytes", 1])
    rows.append(["T4: file-backed RSS per parked actor (LMDB pages read)", mem.get("actor_file_bytes", math.nan),
                 math.nan, math.nan, "bytes", 1])
    rows.append([f"T4: seed / wake {mem.get('actors', 0):,} parked actors", mem.get("seed_seconds", math.nan),
                 mem.get("wake_seconds", math.nan), math.nan, "s / s", 1])
    figures["T5"] = add(f"T5: restart with {config.t5_count:,} deadlines, open -> serving (baseline: bare spawn "
                        f"of as many lean actors)", t5, "seconds", t5b, "seconds", "s")
    rows.append(["GC: objects frozen / cyclic garbage freezing kept (end of T4)", gc.get("frozen", math.nan),
                 gc.get("frozen_garbage", math.nan), math.nan, "objects", 1])

    def value(name: str) -> tuple[float, float]:
        return figures.get(name, (math.nan, math.nan))

    # Events on against off, round by round: the messages each handled at the same offered load, and the CPU it took.
    handled = add("T3: messages/s handled, events on (baseline: events off)", t3, "msg_rate", t3q, None, "msg/s")
    add("T3: process CPU, events on (baseline: events off)", t3, "cpu_share", t3q, None, "cores")
    add("T3: deadline -> durable revocation p99, events on (baseline: events off)", t3, "durable_p99_ms", t3q, None,
        "ms")

    result.targets += [
        _target("T3.decision_p99", f"{n3} actors, 5k deadlines/s + 20k msg/s: decision p99 <= 5 ms",
                *value("T3.decision_p99"), 5.0, "ms"),
        _target("T3.decision_max", "decision max <= 50 ms", *value("T3.decision_max"), 50.0, "ms"),
        _target("T3.durable_p99", "durable revocation p99 <= 50 ms", *value("T3.durable_p99"), 50.0, "ms"),
        _target("T3.cpu", "on <= 50% of a core (process CPU, commit thread included)", *value("T3.cpu"), 0.5,
                "cores"),
        Target.at_least("T3.events", "events on: messages/s handled >= 95% of events off (same load, same round "
                        "order)", handled[0], handled[1], 0.95, "msg/s"),
        _target("T4.p99", f"{n4} actors: steady-state decision p99 <= 5 ms", *value("T4.decision_p99"), 5.0, "ms"),
        _target("T4.cpu", "on <= 50% of a core", *value("T4.cpu"), 0.5, "cores"),
        _target("T4.memory", "<= 3 KB anonymous RSS per parked actor", actor_bytes, task_bytes, 3072.0, "bytes"),
        _target("T5.restore", f"restore {config.t5_count:,} actors with their deadlines <= 5 s", *value("T5"),
                5.0, "s"),
    ]
    result.notes += _notes(config, t3, t4, t5, mem, gc)
    return result


def _notes(config: Any, t3: list[dict[str, Any]], t4: list[dict[str, Any]], t5: list[dict[str, Any]],
           mem: dict[str, Any], gc: dict[str, Any]) -> list[str]:
    notes = [
        f"T3: median of {len(t3)} rounds, each on a fresh controller (durable LMDB, commits on the writer's pinned "
        f"thread, the GC policy of controller/runtime/memory.py), interleaved with bare sleep_until rounds of the "
        f"same deadlines; {config.t3_measured:,} of the {config.t3_count:,} parked actors' deadlines fall in the "
        f"measured window at {config.rate:,.0f}/s, the rest later.",
        f"Messages (wake, OS posture, unlock, MAC posture in turn, each with a reply slot as the Client API sends "
        f"them) are offered at {config.msg_rate:,.0f}/s to random identities, open loop but with at most "
        f"{config.in_flight:,} not yet handled (a server's bound on requests in progress): when the actors cannot "
        f"keep up, the handled rate shows it.",
        f"T4: one load of {config.t4_count:,} actors (loading a million takes minutes), then {len(t4)} windows of "
        f"{config.t4_per_block:,} deadlines with a bare sleep_until baseline in each gap; memory per parked actor "
        f"is the anonymous RSS growth over waking {mem.get('actors', 0):,} of them (their mailbox, task, timer entry "
        f"and loaded state), against the same growth for as many bare parked tasks measured just before.",
        "T5: time from opening the data directory to serving as controller/runtime/task_tree.py does (API sessions "
        "and every persisted deadline restored, bootstrap, GC settled), without HTTP; restored actors are armed on "
        "the timer heap and spawn at their deadline or first message.",
        f"GC: max pause within measurement windows is the row above; freezing kept {gc.get('frozen_garbage', 0)} "
        f"objects of dead reference cycles out of {gc.get('frozen', 0):,.0f} frozen "
        f"(controller.runtime.memory.collect_frozen counted them at the end of T4).",
    ]
    undecided = sum(int(r.get("undecided", 0)) for r in t3 + t4)
    if undecided:
        notes.append(f"{undecided} measured deadlines were still undecided {config.patience:.0f} s after their "
                     f"window; they count as late as that wait (a lower bound).")
    wrong = [r for r in t3 + t4 if r.get("revoked") != r.get("deadlines") - r.get("undecided", 0)]
    if wrong:
        notes.append(f"{len(wrong)} windows revoked a different number of sessions than deadlines fired: check.")
    overran = [r for r in t3 + t4 if r.get("overran")]
    if overran:
        notes.append(f"{len(overran)} windows started before their identities were all loaded (the machine was "
                     f"slower than the lead allowed for): their first deadlines were late by construction.")
    armed = {r.get("armed") for r in t5}
    if armed != {config.t5_count}:
        notes.append(f"T5: restores armed {sorted(a for a in armed if a is not None)} deadlines, expected "
                     f"{config.t5_count}.")
    return notes
