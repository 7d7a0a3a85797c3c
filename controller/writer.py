"""Group commit, the async half: callers hand over a synchronous mutation and await its durable outcome.

One writer task owns the LMDB write side. It takes everything queued since its last commit, runs the batch in a
worker thread (``storage.writer.run_batch``: one transaction, one fsync), and then wakes each caller with its own
outcome. A commit therefore never blocks the Trio thread, throughput grows with concurrency, and a caller is woken
only once its write is on disk.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from storage.store import Store, WriteTxn
from storage.writer import Outcome, run_batch

__all__ = ["Writer"]

T = TypeVar("T")


class _Request:
    __slots__ = ("done", "mutation", "outcome")

    def __init__(self, mutation: Callable[[WriteTxn], Any]) -> None:
        self.mutation = mutation
        self.done = trio.Event()
        self.outcome: Outcome | None = None


class Writer:
    """The single writer of a :class:`Store`.

    Args:
        store: the environment to write.
        in_thread: commit in a worker thread (production). Tests on Trio's virtual clock pass False so that virtual
            time cannot jump while a commit is in flight; the commit then runs on the Trio thread.
        max_batch: most mutations per transaction.
    """

    def __init__(self, store: Store, *, in_thread: bool = True, max_batch: int = 1024) -> None:
        self._store = store
        self._in_thread = in_thread
        self._max_batch = max_batch
        self._send, self._receive = trio.open_memory_channel[_Request](max_batch * 4)
        self.commits = 0
        self.mutations = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; a batch already handed to the worker thread always completes first."""
        task_status.started()
        async for first in self._receive:
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    batch.append(self._receive.receive_nowait())
                except trio.WouldBlock:
                    break
            mutations = [request.mutation for request in batch]
            if self._in_thread:
                outcomes = await trio.to_thread.run_sync(functools.partial(run_batch, self._store, mutations))
            else:
                outcomes = run_batch(self._store, mutations)
            self.commits += 1
            self.mutations += len(batch)
            for request, outcome in zip(batch, outcomes, strict=True):
                request.outcome = outcome
                request.done.set()

    async def submit(self, mutation: Callable[[WriteTxn], T]) -> T:
        """Run ``mutation`` in the next batch and return its result once committed; re-raise what it raised."""
        request = _Request(mutation)
        await self._send.send(request)
        await request.done.wait()
        assert request.outcome is not None
        result: T = request.outcome.unwrap()
        return result
