"""Scenario ``storage`` (T6): acknowledged durable writes through the group-commit writer, against raw py-lmdb.

The subject is a real controller on a data directory on the real disk, started by ``bench/controller_run.py`` as
``controller.runtime.task_tree`` starts it (its writer committing on its pinned thread, bootstrapped like a first
start). Its workload is what a user runs: ``domain.create("identities", ...)`` (body validation, references, indexes,
the envelope-ready row read back), by 1, 16, 64 and 256 concurrent writers, each submitting one create, awaiting its
acknowledgement (the write is on disk) and repeating. The bare ``Writer.submit`` of one small put of the same size is
measured at the same levels, to separate the group commit from the domain's per-write work.

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
from bench.report import ScenarioResult
from bench.stats import percentile
from bench.storage_raw import HopCounter, RawFigures, RawLmdb, StepCounter, thread_hop_latencies
from bench.storage_report import CONCURRENCY, RAW_BATCH, READ_WRITERS, READERS, build_result
from controller.data.listing import ListParams
from controller.runtime.composition import Controller
from storage.rows import encode

__all__ = ["CONCURRENCY", "Run", "closed_loop", "run"]



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


async def closed_loop(writers: int, seconds: float, op: Callable[[], Awaitable[object]]) -> Run:
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
        run = await closed_loop(writers, seconds, op)
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
    """Start the controller as ``controller.runtime.task_tree`` does (``bench/controller_run.py``: its runtime policy is
    part of what a user's writes cost), warm up, then alternate baseline slots and subject rounds."""
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
    return build_result(rounds, quick)
