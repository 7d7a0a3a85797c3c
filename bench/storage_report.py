"""The storage scenario's table, targets and notes, from its raw rounds (see ``bench/storage_bench.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.report import ScenarioResult, Target
from bench.stats import median

__all__ = ["CONCURRENCY", "RAW_BATCH", "READERS", "READ_WRITERS", "build_result"]

CONCURRENCY = (1, 16, 64, 256)
READ_WRITERS = 64
READERS = 4
RAW_BATCH = 100
COLUMNS = ["workload", "writers", "ops/s", "vs raw fsync/100", "vs raw fsync/put", "per commit", "commit ms",
           "p50 ms", "p99 ms"]


Round = dict[str, Any]


def _get(*path: str) -> Callable[[Round], float]:
    """A getter of one figure of a round, by its path of keys."""
    def get(r: Round) -> float:
        value: Any = r
        for key in path:
            value = value[key]
        return float(value)
    return get


def _med(rounds: list[Round], get: Callable[[Round], float]) -> float:
    return median(get(r) for r in rounds)


def _ratio(rounds: list[Round], value: Callable[[Round], float], baseline: Callable[[Round], float]) -> float:
    """The median over rounds of each round's ``value / baseline``."""
    return median(value(r) / baseline(r) if baseline(r) else float("nan") for r in rounds)


_PER_PUT = _get("raw", "put", "ops_per_s")
_PER_BATCH = _get("raw", "batch", "ops_per_s")
_NAN = float("nan")


def _row(rounds: list[Round], label: str, writers: str, *path: str, compare: bool = True) -> list[Any]:
    """A table row from the figures at ``path`` (``ops_per_s``, ``p50_ms``, ``p99_ms``, maybe ``per_commit`` and
    ``commit_ms``)."""
    rate = _get(*path, "ops_per_s")
    figures = _at(rounds[0], path)
    per_commit = _med(rounds, _get(*path, "per_commit")) if "per_commit" in figures else _NAN
    commit_ms = _med(rounds, _get(*path, "commit_ms")) if "commit_ms" in figures else _NAN
    return [label, writers, _med(rounds, rate),
            _ratio(rounds, rate, _PER_BATCH) if compare else _NAN, _ratio(rounds, rate, _PER_PUT) if compare else _NAN,
            per_commit, commit_ms, _med(rounds, _get(*path, "p50_ms")), _med(rounds, _get(*path, "p99_ms"))]


def _at(r: Round, path: tuple[str, ...]) -> dict[str, Any]:
    value: Any = r
    for key in path:
        value = value[key]
    return dict(value)


def build_result(rounds: list[Round], quick: bool) -> ScenarioResult:
    """The scenario's result: the table rows, the T6 targets and the notes, from the measured rounds."""
    result = ScenarioResult("storage", quick, COLUMNS, rounds=rounds)
    result.rows.append(_row(rounds, "raw lmdb, fsync per put", "1", "raw", "put"))
    result.rows.append(_row(rounds, f"raw lmdb, fsync per {RAW_BATCH} puts", "1", "raw", "batch"))
    for label, workload in (("domain.create identity", "create"), ("Writer.submit small put", "submit")):
        result.rows += [_row(rounds, label, str(n), workload, str(n)) for n in CONCURRENCY]
    for phase, during, writers in (("reads", "during writes", READ_WRITERS), ("idle_reads", "alone", 0)):
        for label, key in (("domain.detail", "detail"), ("domain.list_page name=", "lookup")):
            result.rows.append(_row(rounds, f"{label} {during}", f"{writers} (+{READERS} readers)", phase, key,
                                    compare=False))
    result.rows.append(_row(rounds, "thread hop (to_thread no-op)", "-", "thread_hop", compare=False))
    result.rows.append(_row(rounds, f"domain.list_page unfiltered ({int(rounds[-1]['scan']['rows']):,} rows)", "-",
                            "scan", compare=False))
    result.targets = _targets(rounds)
    result.notes += _notes(rounds)
    return result


def _targets(rounds: list[Round]) -> list[Target]:
    creates, submits = _get("create", "64", "ops_per_s"), _get("submit", "64", "ops_per_s")
    create_p50, commit_p50 = _get("create", "1", "p50_ms"), _get("raw", "put", "p50_ms")
    throughput = _ratio(rounds, creates, _PER_BATCH)
    writer = _ratio(rounds, submits, _PER_BATCH)
    latency = _ratio(rounds, create_p50, commit_p50)
    reader_hops = sum(int(r["reads"]["reader_hops"]) + int(r["reads"]["suspended_reads"]) for r in rounds)
    probe_hops = sum(int(r["reads"]["other_hops"]) for r in rounds)
    return [
        Target("T6.throughput", "identity creates/s at 64 writers >= 25% of raw fsync-per-100 puts/s",
               throughput >= 0.25, _med(rounds, creates), _med(rounds, _PER_BATCH), throughput, "writes/s"),
        Target("T6.throughput.writer", "bare Writer.submit puts/s at 64 writers >= 25% of raw fsync-per-100",
               writer >= 0.25, _med(rounds, submits), _med(rounds, _PER_BATCH), writer, "writes/s"),
        Target("T6.latency", "one writer's create p50 <= 2x one raw fsync commit's p50", latency <= 2.0,
               _med(rounds, create_p50), _med(rounds, commit_p50), latency, "ms"),
        # The baseline is the probe's hops in the same windows: proof that the counter sees hops when made.
        Target("T6.reads", "reads hop threads (or suspend) 0 times; baseline: a probe's hops seen meanwhile",
               reader_hops == 0 and probe_hops > 0, float(reader_hops), float(probe_hops),
               reader_hops / probe_hops if probe_hops else _NAN, "hops"),
    ]


def _notes(rounds: list[Round]) -> list[str]:
    def total(key: str) -> int:
        return sum(int(r["reads"][key]) for r in rounds)

    slots = [slot for r in rounds for slot in r["raw"]["put"]["slots"]]
    batches = [slot for r in rounds for slot in r["raw"]["batch"]["slots"]]
    return [
        f"{len(rounds)} rounds, medians; ratios are medians of per-round ratios against the mean of the baseline "
        f"slots measured just before and after each round; values of {rounds[0]['value_size']} bytes (one encoded "
        "identity row) in every workload; the raw puts are keyed as the controller keys its rows (ids in creation "
        "order, controller/ids.py); 'per commit' is writes acknowledged per fsync commit; 'commit ms' is the mean "
        "time of one such commit (page writes and fsync) on the writer's pinned thread",
        f"one writer's create: its commit alone took {_med(rounds, _get('create', '1', 'commit_ms')):.3g} ms on "
        f"average, {_ratio(rounds, _get('create', '1', 'commit_ms'), _get('raw', 'put', 'p50_ms')):.3g}x one raw "
        "fsync commit's p50 (a create dirties the row, its index entries and their B-tree paths, where the raw put "
        "dirties one leaf)",
        f"reads: {total('reads'):,} reads by {READERS} tasks during {READ_WRITERS} concurrent writers; "
        f"{total('reader_hops')} thread hops and {total('suspended_reads')} suspensions inside reads, "
        f"{total('other_hops'):,} hops by the probe task in the same windows",
        "noise: across the baseline slots one raw fsync commit's p50 ranged "
        f"{min(s['p50_ms'] for s in slots):.3g}-{max(s['p50_ms'] for s in slots):.3g} ms and raw fsync-per-100 "
        f"{min(s['ops_per_s'] for s in batches):,.0f}-{max(s['ops_per_s'] for s in batches):,.0f} puts/s",
    ]
