"""Scenario ``storage`` (T6): acknowledged durable writes through the group-commit writer, against raw py-lmdb.

The subject is a real controller on a data directory on the real disk, started by ``bench/controller_run.py`` as
``controller.main`` starts it (its writer committing on its pinned thread, bootstrapped like a first start). Its
workload is what a user runs: ``domain.create("identities", ...)`` (body validation, references, indexes, the
envelope-ready row read back), by 1, 16, 64 and 256 concurrent writers, each submitting one create, awaiting its
acknowledgement (the write is on disk) and repeating. The bare ``Writer.submit`` of one small put of the same size
is measured at the same levels, to separate the group commit from the domain's per-write work.

Baselines, on the same disk with values of the encoded size of a real identity row (``storage_raw.RawLmdb``): one
fsync per put (one transaction per put) and one fsync per 100 puts. Baseline slots and subject rounds alternate
(B0 S1 B1 S2 B2 ...); each subject round is compared with the mean of the slots on either side of it, and every
figure reported is the median over rounds of those per-round figures.

Reads: while 64 writers create, reader tasks run ``domain.detail`` and an indexed ``domain.list_page`` (a lookup by
name); every ``trio.to_thread.run_sync`` call is attributed to its task and every read is checked for having
suspended its task. T6.reads counts the reads' hops and suspensions (must be 0); its baseline is the hops of a
probe task that hops to a thread every 10 ms in the same window, which shows the counter sees hops when there are
any, whatever the writer does. The same reads are timed without
writers, next to the cost of one no-op thread hop and of an unfiltered first page over every identity created so far.

Full run: 5 rounds of about 17 s (about 1.5 minutes with start-up); ``--quick``: 3 tiny rounds, a few seconds.
"""

from __future__ import annotations

import inspect
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from bench.controller_run import running_controller
from bench.report import ScenarioResult, Target
from bench.stats import median, percentile
from bench.storage_raw import HopCounter, RawFigures, RawLmdb, StepCounter, thread_hop_latencies
from controller.listing import ListParams
from controller.root import Controller
from storage.store import encode

__all__ = ["CONCURRENCY", "run"]

CONCURRENCY = (1, 16, 64, 256)
READ_WRITERS = 64
READERS = 4
RAW_BATCH = 100
COLUMNS = ["workload", "writers", "ops/s", "vs raw fsync/100", "vs raw fsync/put", "per commit", "commit ms",
           "p50 ms", "p99 ms"]


@dataclass(frozen=True, slots=True)
class Plan:
    """How long each part of a round runs (seconds of wall time) and how many rounds there are."""

    rounds: int
    raw_seconds: float
    create_seconds: float
    submit_seconds: float
    read_seconds: float
    hop_samples: int
    scans: int


FULL = Plan(rounds=5, raw_seconds=1.0, create_seconds=2.0, submit_seconds=0.8, read_seconds=2.0, hop_samples=300,
            scans=1)
QUICK = Plan(rounds=3, raw_seconds=0.02, create_seconds=0.03, submit_seconds=0.02, read_seconds=0.05,
             hop_samples=5, scans=1)


@dataclass(slots=True)
class Run:
    """A closed-loop run: how many operations completed, over how long, each one's latency (seconds)."""

    ops: int
    seconds: float
    latencies: list[float]
    commits: int = 0
    commit_seconds: float = 0.0  # spent in those commits on the writer's pinned thread (page writes and fsync)

    def figures(self) -> dict[str, float]:
        return {"ops_per_s": self.ops / self.seconds if self.seconds else float("nan"),
                "per_commit": self.ops / self.commits if self.commits else float("nan"),
                "commit_ms": self.commit_seconds / self.commits * 1e3 if self.commits else float("nan"),
                "p50_ms": percentile(self.latencies, 50) * 1e3, "p99_ms": percentile(self.latencies, 99) * 1e3}


async def _closed_loop(writers: int, seconds: float, op: Callable[[], Awaitable[object]]) -> Run:
    """``writers`` tasks each await ``op()`` and repeat until ``seconds`` have passed (at least once each)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while True:
            started = time.perf_counter()
            await op()
            done = time.perf_counter()
            latencies.append(done - started)
            if done >= deadline:
                return

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(writers):
            nursery.start_soon(worker)
    return Run(len(latencies), time.perf_counter() - started, latencies)


def _nothing() -> None:
    """The probe's thread hop: no work, so only the hop is counted."""


async def _complete(value: object) -> None:
    """Await ``value`` if a read ever returns an awaitable, so that a read made async is still measured whole."""
    if inspect.isawaitable(value):
        await value


class _Subject:
    """The controller under test and the workloads run against it."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.serial = 0
        self.created: list[tuple[str, str]] = []  # (id, name) of every acknowledged create
        self.payload = b""

    async def create(self) -> None:
        self.serial += 1
        name = f"bench-{self.serial:08d}"
        body = {"name": name, "type": "User", "isAdmin": False,
                "roleAttributes": ["bench", f"group-{self.serial % 16}"]}
        row = await self.controller.domain.create("identities", body)
        self.created.append((str(row["id"]), name))

    async def submit(self) -> None:
        self.serial += 1
        key, payload = f"bench/{self.serial}", self.payload
        await self.controller.writer.submit(lambda txn: txn.set_meta(key, payload))

    def row_size(self) -> int:
        """Encoded bytes of a stored identity row (the raw baselines' value size)."""
        with self.controller.store.read() as txn:
            row = txn.get("identities", self.created[-1][0])
        assert row is not None
        return len(encode(row))

    async def measure(self, writers: int, seconds: float, op: Callable[[], Awaitable[None]]) -> Run:
        """A closed-loop run of ``op``, with the fsync commits the writer made meanwhile and their time."""
        writer = self.controller.writer
        commits, commit_seconds = writer.commits, writer.commit_seconds
        run = await _closed_loop(writers, seconds, op)
        run.commits = writer.commits - commits
        run.commit_seconds = writer.commit_seconds - commit_seconds
        return run

    async def reads(self, seconds: float, writers: int) -> dict[str, Any]:
        """Reads by :data:`READERS` tasks while ``writers`` writers create (if any); hops and suspensions counted."""
        domain = self.controller.domain
        hops, steps = HopCounter(), StepCounter()
        readers: set[trio.lowlevel.Task] = set()
        detail: list[float] = []
        lookup: list[float] = []
        suspended = 0
        deadline = time.perf_counter() + seconds

        async def timed(sample: list[float], me: trio.lowlevel.Task, call: Callable[..., object], *args: Any) -> object:
            nonlocal suspended
            before = steps.steps[me]
            started = time.perf_counter()
            result = call(*args)
            await _complete(result)
            sample.append(time.perf_counter() - started)
            suspended += steps.steps[me] != before
            return result

        async def reader(seed: int) -> None:
            me = trio.lowlevel.current_task()
            readers.add(me)
            steps.watched.add(me)
            rng = random.Random(seed)
            while time.perf_counter() < deadline:
                row_id, name = self.created[rng.randrange(len(self.created))]
                await timed(detail, me, domain.detail, "identities", row_id)
                page = await timed(lookup, me, domain.list_page, "identities",
                                   ListParams(filter=f'name = "{name}"'))
                if not isinstance(page, tuple) or len(page[0]) != 1:
                    raise RuntimeError(f"the lookup of {name!r} did not find exactly one identity")
                # Separate requests: the writers run between two reads.
                await trio.lowlevel.checkpoint()

        written: list[Run] = []

        async def write_load() -> None:
            written.append(await self.measure(writers, seconds, self.create))

        async def probe() -> None:
            while time.perf_counter() < deadline:
                await trio.to_thread.run_sync(_nothing)
                await trio.sleep(0.01)

        trio.lowlevel.add_instrument(steps)
        try:
            with hops.installed():
                started = time.perf_counter()
                async with trio.open_nursery() as nursery:
                    if writers:
                        nursery.start_soon(write_load)
                    nursery.start_soon(probe)
                    for seed in range(READERS):
                        nursery.start_soon(reader, seed)
        finally:
            trio.lowlevel.remove_instrument(steps)
        span = time.perf_counter() - started
        writes = written[0].ops if written else 0
        return {"reads": len(detail) + len(lookup), "reader_hops": hops.of(readers),
                "other_hops": hops.besides(readers), "suspended_reads": suspended, "writes": writes,
                "detail": _latency(detail, span), "lookup": _latency(lookup, span)}

    def scans(self, count: int) -> dict[str, Any]:
        """An unfiltered first page of identities (limit 10), timed alone, with the number of rows it covers."""
        latencies = []
        for _ in range(count):
            started = time.perf_counter()
            self.controller.domain.list_page("identities", ListParams(limit="10"))
            latencies.append(time.perf_counter() - started)
        with self.controller.store.read() as txn:
            rows = txn.count("identities")
        return {"rows": rows, **_latency(latencies, sum(latencies))}


def _latency(seconds: list[float], span: float) -> dict[str, float]:
    return {"ops_per_s": len(seconds) / span if span else float("nan"), "p50_ms": percentile(seconds, 50) * 1e3,
            "p99_ms": percentile(seconds, 99) * 1e3}


def _raw_slot(per_put: RawLmdb, batched: RawLmdb, seconds: float) -> dict[str, RawFigures]:
    """One baseline slot: fsync per put, then fsync per 100 puts (on the Trio thread: nothing else is running)."""
    return {"put": per_put.run(seconds, 1), "batch": batched.run(seconds, RAW_BATCH)}


def _mean_raw(before: dict[str, RawFigures], after: dict[str, RawFigures]) -> dict[str, dict[str, Any]]:
    """A subject round's baseline: the mean of the slots measured just before and just after it."""
    out = {}
    for key, per_commit in (("put", 1), ("batch", RAW_BATCH)):
        a, b = before[key], after[key]
        out[key] = {"ops_per_s": (a.puts_per_s + b.puts_per_s) / 2, "per_commit": float(per_commit),
                    "p50_ms": (a.p50_ms + b.p50_ms) / 2, "p99_ms": (a.p99_ms + b.p99_ms) / 2,
                    "slots": [{"ops_per_s": f.puts_per_s, "p50_ms": f.p50_ms} for f in (a, b)]}
    return out


async def _subject_round(subject: _Subject, plan: Plan) -> dict[str, Any]:
    creates = {str(n): (await subject.measure(n, plan.create_seconds, subject.create)).figures() for n in CONCURRENCY}
    submits = {str(n): (await subject.measure(n, plan.submit_seconds, subject.submit)).figures() for n in CONCURRENCY}
    reads = await subject.reads(plan.read_seconds, READ_WRITERS)
    idle_reads = await subject.reads(plan.read_seconds / 3, 0)
    hop = await thread_hop_latencies(plan.hop_samples)
    return {"create": creates, "submit": submits, "reads": reads, "idle_reads": idle_reads,
            "thread_hop": _latency(hop, sum(hop)), "scan": subject.scans(plan.scans)}


async def _measure(plan: Plan, base: Path) -> list[dict[str, Any]]:
    """Start the controller as ``controller.main`` does (``bench/controller_run.py``: its runtime policy is part of
    what a user's writes cost), warm up, then alternate baseline slots and subject rounds."""
    raws: list[RawLmdb] = []
    try:
        async with running_controller(base / "controller") as running:
            return await _measured_rounds(plan, base, running.controller, raws)
    finally:
        for raw in raws:
            raw.close()


async def _measured_rounds(plan: Plan, base: Path, controller: Controller,
                           raws: list[RawLmdb]) -> list[dict[str, Any]]:
    """Warm up, then alternate baseline slots and subject rounds; the raw stores it opens go into ``raws``."""
    subject = _Subject(controller)
    # Warm-up: import paths, validators and caches; also gives the size of a real row.
    await subject.measure(16, plan.create_seconds / 3, subject.create)
    value_size = subject.row_size()
    subject.payload = bytes(value_size)
    raws.extend([RawLmdb(base / "raw-put", value_size), RawLmdb(base / "raw-batch", value_size)])
    await subject.measure(16, plan.submit_seconds / 3, subject.submit)
    raws[0].run(plan.raw_seconds / 3, 1)
    raws[1].run(plan.raw_seconds / 3, RAW_BATCH)
    slots = [_raw_slot(raws[0], raws[1], plan.raw_seconds)]
    rounds = []
    for number in range(plan.rounds):
        measured = await _subject_round(subject, plan)
        slots.append(_raw_slot(raws[0], raws[1], plan.raw_seconds))
        rounds.append({"round": number + 1, "value_size": value_size, **measured,
                       "raw": _mean_raw(slots[-2], slots[-1])})
    return rounds


def run(quick: bool) -> ScenarioResult:
    """Run the scenario (``quick``: a smoke run of a few seconds whose figures mean nothing)."""
    plan = QUICK if quick else FULL
    base = Path(tempfile.mkdtemp(prefix="tollgate-bench-storage-"))
    try:
        rounds = trio.run(_measure, plan, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return _result(rounds, quick)


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


def _result(rounds: list[Round], quick: bool) -> ScenarioResult:
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
        "identity row) in every workload; 'per commit' is writes acknowledged per fsync commit; 'commit ms' is the "
        "mean time of one such commit (page writes and fsync) on the writer's pinned thread",
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
