"""Group commit, the async half: callers hand over a synchronous mutation and await its durable outcome.

One writer task owns the write side of the store. It takes what is queued since its last commit (at most
``max_batch``), hands the batch to its commit step, which runs it in one transaction and makes it durable
(``controller/data/commit_step.py``: one local LMDB transaction with one fsync on a single node,
``controller/data/local_commit.py``, where the measurements behind that split are), and then wakes each caller with
its own outcome. Throughput grows with concurrency, and a caller is woken only once its write is durable.

A batch is what was queued when it started (after the commit step's ``gather``, which a cluster node uses to let
writes about to be queued join it): writes that arrive while it runs wait for the next commit, so the first caller's
wait is bounded by the queue at that moment. ``in_thread=False`` (the virtual-clock tests) caps a batch at
:data:`INLINE_BATCH`, since an inline commit holds the loop for its fsync.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import trio

from actors.live_actors import OneShot
from controller.data.commit_step import CommitStep
from controller.data.local_commit import MUTATIONS_PER_YIELD, LocalCommit
from storage.batch import Mutation, Outcome
from storage.store import Store, WriteTxn

__all__ = ["INLINE_BATCH", "MUTATIONS_PER_YIELD", "THREAD_BATCH", "Writer"]

INLINE_BATCH = 64  # mutations per inline commit: bounds how long one commit holds the event loop
THREAD_BATCH = 1024

T = TypeVar("T")


class _Request(OneShot[Outcome]):
    """A queued mutation (a :class:`~controller.data.commit_step.Queued`); the writer sends its :class:`Outcome`
    once the batch holding it has committed."""

    __slots__ = ("conditions", "mutation", "on_commit", "queued_at")

    def __init__(self, mutation: Mutation, on_commit: Callable[[], object] | None,
                 conditions: Sequence[object] = ()) -> None:
        super().__init__()
        self.mutation = mutation
        self.on_commit = on_commit
        self.conditions = conditions
        self.queued_at: float | None = trio.current_time()


class _Posted(_Request):
    """A mutation queued by :meth:`Writer.post`: nobody waits for it; its outcome goes to ``on_done``."""

    __slots__ = ("on_done",)

    def __init__(self, mutation: Mutation, on_commit: Callable[[], object] | None,
                 on_done: Callable[[Outcome], None], conditions: Sequence[object] = ()) -> None:
        super().__init__(mutation, on_commit, conditions)
        self.on_done = on_done
        self.queued_at = None  # nobody waits: it bounds no batch

    def send(self, value: Outcome) -> None:
        self.on_done(value)


class Writer:
    """The single writer of a :class:`Store`.

    Args:
        store: the environment to write.
        in_thread: begin and commit on a pinned worker thread (production; ``controller/data/local_commit.py``).
            Tests on Trio's virtual clock pass False: everything then runs on the Trio thread.
        max_batch: most mutations per transaction (default :data:`INLINE_BATCH` inline, :data:`THREAD_BATCH` in
            a thread).
        step: how batches become durable; default the single node's :class:`LocalCommit` of ``store``.
    """

    def __init__(self, store: Store, *, in_thread: bool = True, max_batch: int | None = None,
                 observe_batch: Callable[[int, float], None] | None = None, step: CommitStep | None = None) -> None:
        self._store = store
        self._step: CommitStep = step if step is not None else LocalCommit(store, in_thread=in_thread)
        if max_batch is None:
            max_batch = THREAD_BATCH if in_thread else INLINE_BATCH
        self._max_batch = max_batch
        # Unbounded, so that post() never blocks; submit() waits while ``_max_waiting`` are queued. None: the commit
        # step asked for a turn (wake).
        self._send, self._receive = trio.open_memory_channel[_Request | None](math.inf)
        self._max_waiting = max_batch * 4
        self._room = trio.lowlevel.ParkingLot()
        self.commits = 0
        self.mutations = 0
        # Seconds spent committing (page writes and fsync; the whole batch inline); the benchmark reads it.
        self.commit_seconds = 0.0
        # Called on the writer's task after each commit, before its callers are answered, with the batch's size and
        # the seconds its commit took (the whole batch inline): the metrics' observer. It must be quick and not raise.
        self.observe_batch = observe_batch
        self._step.attach(self.wake)

    # Protected from KeyboardInterrupt (Trio delivers it to the main task instead): an open transaction and the
    # requests taken from the queue must never be abandoned between two steps of the commit's bookkeeping.
    @trio.lowlevel.enable_ki_protection
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; a batch already taken from the queue always completes first."""
        async with self._step.serving():
            task_status.started()
            async for first in self._receive:
                await self._step.gather()
                # What is queued now; what arrives while this batch runs waits for the next commit.
                batch = self._take(first)
                await self._step.commit(batch, functools.partial(self._answer, batch))

    def wake(self) -> None:
        """Give the commit step a turn soon, even with nothing queued (:meth:`CommitStep.attach`)."""
        self._send.send_nowait(None)

    async def submit(self, mutation: Callable[[WriteTxn], T], *, on_commit: Callable[[], object] | None = None,
                     conditions: Sequence[object] = ()) -> T:
        """Run ``mutation`` in the next batch and return its result once committed; re-raise what it raised.

        ``on_commit`` is called by the writer task right after the commit, whether or not this caller is still
        waiting (a caller cancelled once its write is queued does not stop the write): what must follow every
        committed write, such as telling subscribers, goes there. An exception it raises becomes this call's.
        ``conditions``: what the commit must check (:class:`~controller.data.commit_step.Queued`).
        """
        await trio.lowlevel.checkpoint_if_cancelled()  # a caller already cancelled queues nothing
        while self._send.statistics().current_buffer_used >= self._max_waiting:
            await self._room.park()  # backpressure: the writer makes room as it takes batches
        request = _Request(mutation, on_commit, tuple(conditions))
        # Queued without a yield: the wait below is this call's checkpoint.
        self._send.send_nowait(request)
        outcome = await request.receive()
        result: T = outcome.unwrap()
        return result

    def post(self, mutation: Mutation, on_done: Callable[[Outcome], None], *,
             on_commit: Callable[[], object] | None = None, conditions: Sequence[object] = ()) -> None:
        """Queue ``mutation`` without waiting: ``on_done`` gets its :class:`Outcome` on the writer's task once the
        batch holding it has committed (or failed); ``on_commit`` runs before, as for :meth:`submit`.

        Never blocks: the callers (the identity actors) bound what they post themselves, one write pending per
        identity at most, so this queue cannot grow beyond the live identities. ``conditions`` are read when the
        batch holding the mutation runs it: a poster may add to the list it passed until its mutation begins (the
        identity actors' writes gather their owners' fences so).
        """
        self._send.send_nowait(_Posted(mutation, on_commit, on_done, conditions))

    def _take(self, first: _Request | None) -> list[_Request]:
        batch = [] if first is None else [first]
        while len(batch) < self._max_batch:
            try:
                request = self._receive.receive_nowait()
            except trio.WouldBlock:
                break
            if request is not None:
                batch.append(request)
        self._room.unpark_all()
        return batch

    def _answer(self, batch: list[_Request], outcomes: list[Outcome], seconds: float) -> None:
        if not batch:
            return
        self.commits += 1
        self.mutations += len(batch)
        self.commit_seconds += seconds
        if self.observe_batch is not None:
            self.observe_batch(len(batch), seconds)
        for request, result in zip(batch, outcomes, strict=True):
            if result.error is None and request.on_commit is not None:
                try:
                    request.on_commit()
                except Exception as exc:  # handed to the caller's request boundary, never the writer's end
                    result = Outcome(error=exc)
            request.send(result)
