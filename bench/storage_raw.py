"""The storage scenario's baselines and probes: bare py-lmdb commits, and counters of thread hops and suspensions.

Baselines: :class:`RawLmdb` is an LMDB environment opened the way ``storage.store.Store`` opens its own (``sync`` and
``metasync`` on, no readahead, the same map size) on the same disk, written with keys made as the controller makes
its ids (``controller.ids``: 10 characters, in creation order) and values of a given size. Only the LMDB work is
timed (begin, puts, commit): the key generation and loop bookkeeping are not, so the baseline is the best the disk
and py-lmdb can do.

Probes: :class:`HopCounter` wraps ``trio.to_thread.run_sync`` while it is installed and counts the calls of each
task; :class:`StepCounter` is a Trio instrument that counts the scheduler steps of watched tasks, so a caller can tell
whether a synchronous-looking read ever suspended its task (any thread hop, lock or sleep needs a suspension).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
import trio

from bench.stats import percentile
from controller.ids import IdSequence

__all__ = ["HopCounter", "RawFigures", "RawLmdb", "StepCounter", "thread_hop_latencies"]

# The store's own map size (a sparse file: it costs nothing until used).
_MAP_SIZE = 1 << 35


@dataclass(frozen=True, slots=True)
class RawFigures:
    """One baseline run: puts per second of LMDB time, and the latency of one commit (all its puts), in ms."""

    puts: int
    puts_per_s: float
    p50_ms: float
    p99_ms: float


def _controller_keys(ids: IdSequence, count: int) -> list[bytes]:
    """``count`` new ids, as the controller makes a row's key, so that the baseline inserts where the controller
    does (ordered ids append to the same leaves; random ones dirtied a leaf per put and ran 8x slower)."""
    return [ids.next().encode() for _ in range(count)]


class RawLmdb:
    """A bare py-lmdb environment, one key-value DB, durable commits.

    Args:
        path: directory of the environment (created if missing).
        value_size: bytes per value; the scenario passes the encoded size of a real identity row.
    """

    def __init__(self, path: Path, value_size: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(path), map_size=_MAP_SIZE, sync=True, metasync=True, readahead=False)
        self._value = os.urandom(value_size)
        self._ids = IdSequence()

    def run(self, seconds: float, per_commit: int, min_commits: int = 3) -> RawFigures:
        """Commit ``per_commit`` puts per transaction (each commit one fsync) for about ``seconds`` of wall time.

        Returns puts/s over the summed transaction times and the latency of one transaction (begin to durable
        commit), which is also the acknowledgement latency of its last put.
        """
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds
        value = self._value
        while time.perf_counter() < deadline or len(latencies) < min_commits:
            keys = _controller_keys(self._ids, per_commit)
            started = time.perf_counter()
            with self.env.begin(write=True) as txn:
                for key in keys:
                    txn.put(key, value)
            latencies.append(time.perf_counter() - started)
        busy = sum(latencies)
        puts = per_commit * len(latencies)
        return RawFigures(puts, puts / busy if busy else float("nan"), percentile(latencies, 50) * 1e3,
                          percentile(latencies, 99) * 1e3)

    def close(self) -> None:
        self.env.close()


class HopCounter:
    """Counts ``trio.to_thread.run_sync`` calls per calling task while :meth:`installed` is active.

    The controller looks the function up on the module at each call (``trio.to_thread.run_sync(...)``), so
    replacing the module attribute sees every hop the writer, the password hasher or a read would make.
    """

    def __init__(self) -> None:
        self.calls: Counter[trio.lowlevel.Task] = Counter()

    @contextmanager
    def installed(self) -> Iterator[HopCounter]:
        original = trio.to_thread.run_sync

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[trio.lowlevel.current_task()] += 1
            return await original(*args, **kwargs)

        setattr(trio.to_thread, "run_sync", counted)  # noqa: B010 (an assignment would not type-check)
        try:
            yield self
        finally:
            setattr(trio.to_thread, "run_sync", original)  # noqa: B010

    def of(self, tasks: set[trio.lowlevel.Task]) -> int:
        """Hops made by ``tasks``."""
        return sum(n for task, n in self.calls.items() if task in tasks)

    def besides(self, tasks: set[trio.lowlevel.Task]) -> int:
        """Hops made by every other task."""
        return sum(n for task, n in self.calls.items() if task not in tasks)


class StepCounter(trio.abc.Instrument):
    """Counts the scheduler steps of the tasks in :attr:`watched`.

    A task that runs code without suspending stays in one step; if its step count changed across a call, the call
    suspended it (to wait for a thread, a lock, I/O or a checkpoint).
    """

    def __init__(self) -> None:
        self.watched: set[trio.lowlevel.Task] = set()
        self.steps: Counter[trio.lowlevel.Task] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self.watched:
            self.steps[task] += 1


async def thread_hop_latencies(count: int) -> list[float]:
    """Round trips of a no-op through ``trio.to_thread.run_sync``, in seconds: what one hop would add to a read."""
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        await trio.to_thread.run_sync(_nothing)
        latencies.append(time.perf_counter() - started)
    return latencies


def _nothing() -> None:
    return None
