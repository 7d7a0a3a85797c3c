"""Group commit, the async half: callers hand over a synchronous mutation and await its durable outcome.

One writer task owns the LMDB write side. It takes what is queued since its last commit (at most ``max_batch``),
runs the batch in one transaction with one fsync (``storage/batch.py``), and then wakes each caller with its own
outcome. Throughput grows with concurrency, and a caller is woken only once its write is on disk.

Where the work runs (``in_thread=True``, production): the mutations run on the Trio thread, and only the
transaction's begin and its commit (the page writes and the fsync) run on a :class:`~controller.data.pinned_thread.
PinnedThread`, which begins the next transaction as soon as it has committed one. Measured alternatives:

* The whole batch in a worker thread: py-lmdb gives up and retakes the GIL around every get, put and delete, and
  in the thread each of those calls waits up to a switch interval for a busy event loop to hand the lock back (a
  mutation makes ten or more). With the actors saturating the loop, revocations became durable 2.4-3.9 s late at
  the median; a lone create answered in 1.5 ms.
* Everything inline, fsync included: durable 0.32-0.37 s late and a lone create in 0.9 ms, but over HTTP session
  decisions fell by a quarter, since no request is served during an fsync.

Mutations hold the event loop for their Python work, so the writer yields to other tasks after every
:data:`MUTATIONS_PER_YIELD` of them; the transaction stays open across those yields (and between batches), which
is safe because only this task touches it and every read opens its own snapshot of the last commit. A batch is
what was queued when it started: writes that arrive during its yields wait for the next commit, so the first
caller's wait is bounded by the queue at that moment. Holding LMDB's write lock between commits means nothing else
may begin a write on this store while the writer runs (:meth:`storage.store.Store.held_writes`).

``in_thread=False`` (the virtual-clock tests) does everything inline, so that virtual time cannot jump while a
commit is in flight; it caps a batch at :data:`INLINE_BATCH`, since an inline commit holds the loop for its fsync.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

import lmdb
import trio

from actors.live_actors import OneShot
from controller.data.pinned_thread import PinnedThread
from storage.batch import Mutation, Outcome, abort_quietly, apply_all, end_batch, run_batch
from storage.store import Store, WriteTxn

__all__ = ["INLINE_BATCH", "MUTATIONS_PER_YIELD", "THREAD_BATCH", "Writer"]

INLINE_BATCH = 64  # mutations per inline commit: bounds how long one commit holds the event loop
THREAD_BATCH = 1024
MUTATIONS_PER_YIELD = 16

T = TypeVar("T")


class _Request(OneShot[Outcome]):
    """A queued mutation; the writer sends its :class:`Outcome` once the batch holding it has committed."""

    __slots__ = ("mutation", "on_commit")

    def __init__(self, mutation: Mutation, on_commit: Callable[[], object] | None) -> None:
        super().__init__()
        self.mutation = mutation
        self.on_commit = on_commit


class _Posted(_Request):
    """A mutation queued by :meth:`Writer.post`: nobody waits for it; its outcome goes to ``on_done``."""

    __slots__ = ("on_done",)

    def __init__(self, mutation: Mutation, on_commit: Callable[[], object] | None,
                 on_done: Callable[[Outcome], None]) -> None:
        super().__init__(mutation, on_commit)
        self.on_done = on_done

    def send(self, value: Outcome) -> None:
        self.on_done(value)


class Writer:
    """The single writer of a :class:`Store`.

    Args:
        store: the environment to write.
        in_thread: begin and commit on a pinned worker thread (production; see the module docstring). Tests on
            Trio's virtual clock pass False: everything then runs on the Trio thread.
        max_batch: most mutations per transaction (default :data:`INLINE_BATCH` inline, :data:`THREAD_BATCH` in
            a thread).
    """

    def __init__(self, store: Store, *, in_thread: bool = True, max_batch: int | None = None,
                 observe_batch: Callable[[int, float], None] | None = None) -> None:
        self._store = store
        self._in_thread = in_thread
        if max_batch is None:
            max_batch = THREAD_BATCH if in_thread else INLINE_BATCH
        self._max_batch = max_batch
        # Unbounded, so that post() never blocks; submit() waits while ``_max_waiting`` are queued.
        self._send, self._receive = trio.open_memory_channel[_Request](math.inf)
        self._max_waiting = max_batch * 4
        self._room = trio.lowlevel.ParkingLot()
        self.commits = 0
        self.mutations = 0
        # Seconds the pinned thread spent committing (page writes and fsync); the benchmark reads it.
        self.commit_seconds = 0.0
        # Called on the writer's task after each commit, before its callers are answered, with the batch's size and
        # the seconds its commit took (the whole batch inline): the metrics' observer. It must be quick and not raise.
        self.observe_batch = observe_batch

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; a batch already taken from the queue always completes first."""
        if self._in_thread:
            await self._run_pinned(task_status)
            return
        task_status.started()
        async for first in self._receive:
            batch = self._take(first)
            started = time.perf_counter()
            outcomes = run_batch(self._store, [request.mutation for request in batch])
            self._answer(batch, outcomes, time.perf_counter() - started)

    async def submit(self, mutation: Callable[[WriteTxn], T], *, on_commit: Callable[[], object] | None = None) -> T:
        """Run ``mutation`` in the next batch and return its result once committed; re-raise what it raised.

        ``on_commit`` is called by the writer task right after the commit, whether or not this caller is still
        waiting (a caller cancelled once its write is queued does not stop the write): what must follow every
        committed write, such as telling subscribers, goes there. An exception it raises becomes this call's.
        """
        await trio.lowlevel.checkpoint_if_cancelled()  # a caller already cancelled queues nothing
        while self._send.statistics().current_buffer_used >= self._max_waiting:
            await self._room.park()  # backpressure: the writer makes room as it takes batches
        request = _Request(mutation, on_commit)
        # Queued without a yield: the wait below is this call's checkpoint.
        self._send.send_nowait(request)
        outcome = await request.receive()
        result: T = outcome.unwrap()
        return result

    def post(self, mutation: Mutation, on_done: Callable[[Outcome], None], *,
             on_commit: Callable[[], object] | None = None) -> None:
        """Queue ``mutation`` without waiting: ``on_done`` gets its :class:`Outcome` on the writer's task once the
        batch holding it has committed (or failed); ``on_commit`` runs before, as for :meth:`submit`.

        Never blocks: the callers (the identity actors) bound what they post themselves, one write pending per
        identity at most, so this queue cannot grow beyond the live identities.
        """
        self._send.send_nowait(_Posted(mutation, on_commit, on_done))

    def _take(self, first: _Request) -> list[_Request]:
        batch = [first]
        while len(batch) < self._max_batch:
            try:
                batch.append(self._receive.receive_nowait())
            except trio.WouldBlock:
                break
        self._room.unpark_all()
        return batch

    def _answer(self, batch: list[_Request], outcomes: list[Outcome], seconds: float) -> None:
        self.commits += 1
        self.mutations += len(batch)
        if self.observe_batch is not None:
            self.observe_batch(len(batch), seconds)
        for request, result in zip(batch, outcomes, strict=True):
            if result.error is None and request.on_commit is not None:
                try:
                    request.on_commit()
                except Exception as exc:  # handed to the caller's request boundary, never the writer's end
                    result = Outcome(error=exc)
            request.send(result)

    # Protected from KeyboardInterrupt (Trio delivers it to the main task instead): the open transaction and the
    # requests taken from the queue must never be abandoned between two steps of this bookkeeping.
    @trio.lowlevel.enable_ki_protection
    async def _run_pinned(self, task_status: trio.TaskStatus[None]) -> None:
        store = self._store
        with store.held_writes(), PinnedThread("lmdb-writer") as thread:
            opened: _Opened | None = await thread.call(store.begin_write)
            try:
                task_status.started()
                async for first in self._receive:
                    assert opened is not None  # a failed begin raised below
                    # What is queued now; what arrives while this batch runs waits for the next commit.
                    batch = self._take(first)
                    outcomes, broken = await self._apply(batch, opened[0])
                    raw, opened = opened[1], None  # the pinned thread ends it, whatever happens now
                    outcomes, following, seconds = await thread.call(_end_and_begin, store, raw, outcomes, broken,
                                                                     len(batch))
                    if not isinstance(following, BaseException):
                        opened = following
                    self.commit_seconds += seconds
                    self._answer(batch, outcomes, seconds)
                    if isinstance(following, BaseException):
                        raise following
            finally:
                if opened is not None:
                    with trio.CancelScope(shield=True):
                        await thread.call(abort_quietly, opened[1])

    async def _apply(self, batch: list[_Request], parent: WriteTxn) -> tuple[list[Outcome], Exception | None]:
        """Apply the batch's mutations to ``parent`` (:func:`storage.batch.apply_all`), letting other tasks run
        between every :data:`MUTATIONS_PER_YIELD` of them."""
        outcomes: list[Outcome] = []
        for start in range(0, len(batch), MUTATIONS_PER_YIELD):
            if start:
                # Not a cancellation point: a batch already taken from the queue must reach its commit.
                await trio.lowlevel.cancel_shielded_checkpoint()
            part = [request.mutation for request in batch[start:start + MUTATIONS_PER_YIELD]]
            done, broken = apply_all(self._store, parent, part)
            outcomes += done
            if broken is not None:
                return outcomes, broken
        return outcomes, None


_Opened = tuple[WriteTxn, lmdb.Transaction]


def _end_and_begin(store: Store, raw: lmdb.Transaction, outcomes: list[Outcome], broken: Exception | None,
                   count: int) -> tuple[list[Outcome], _Opened | BaseException, float]:
    """On the pinned thread: commit the batch (or abort it when ``broken``), then begin the next transaction, so
    that the next batch's mutations need no hop first. Returns the outcomes, the next transaction and the seconds
    the commit took. The next begin's failure is returned, not raised, so that the committed batch's callers are
    answered before the writer stops."""
    started = time.perf_counter()
    outcomes = end_batch(store, raw, outcomes, broken, count)
    seconds = time.perf_counter() - started
    try:
        following: _Opened | BaseException = store.begin_write()
    except Exception as exc:
        following = exc
    return outcomes, following, seconds
