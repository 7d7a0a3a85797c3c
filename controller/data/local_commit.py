"""The single node's commit step: a batch runs in one local LMDB transaction with one fsync.

Where the work runs (``in_thread=True``, production): the mutations run on the Trio thread, and only the
transaction's begin and its commit (the page writes and the fsync) run on a :class:`~controller.data.pinned_thread.
PinnedThread`, which begins the next transaction as soon as it has committed one. Measured alternatives:

* The whole batch in a worker thread: py-lmdb gives up and retakes the GIL around every get, put and delete, and
  in the thread each of those calls waits up to a switch interval for a busy event loop to hand the lock back (a
  mutation makes ten or more). With the actors saturating the loop, revocations became durable 2.4-3.9 s late at
  the median; a lone create answered in 1.5 ms.
* Everything inline, fsync included: durable 0.32-0.37 s late and a lone create in 0.9 ms, but over HTTP session
  decisions fell by a quarter, since no request is served during an fsync.

Mutations hold the event loop for their Python work, so the step yields to other tasks after every
:data:`MUTATIONS_PER_YIELD` of them; the transaction stays open across those yields (and between batches), which
is safe because only the writer's task touches it and every read opens its own snapshot of the last commit.
Holding LMDB's write lock between commits means nothing else may begin a write on this store while the writer runs
(:meth:`storage.store.Store.held_writes`).

``in_thread=False`` (the virtual-clock tests) does everything inline, so that virtual time cannot jump while a
commit is in flight.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import lmdb
import trio

from controller.data.commit_step import Answer, Queued
from controller.data.pinned_thread import PinnedThread
from storage.batch import Outcome, abort_quietly, apply_all, end_batch, run_batch
from storage.store import Store, WriteTxn

__all__ = ["MUTATIONS_PER_YIELD", "LocalCommit", "apply_yielding"]

MUTATIONS_PER_YIELD = 16

_Opened = tuple[WriteTxn, lmdb.Transaction]


class LocalCommit:
    """The :class:`~controller.data.commit_step.CommitStep` of a single node: ``store`` is the whole truth."""

    def __init__(self, store: Store, *, in_thread: bool = True) -> None:
        self._store = store
        self._in_thread = in_thread
        self._thread: PinnedThread | None = None
        self._opened: _Opened | None = None

    def attach(self, wake: Callable[[], None]) -> None:
        """Nothing of its own to do between batches: it never wakes the writer."""

    def serving(self) -> AbstractAsyncContextManager[None]:
        return self._serving()

    @asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        if not self._in_thread:
            yield
            return
        store = self._store
        with store.held_writes(), PinnedThread("lmdb-writer") as thread:
            self._thread = thread
            self._opened = await thread.call(store.begin_write)
            try:
                yield
            finally:
                opened, self._opened, self._thread = self._opened, None, None
                if opened is not None:
                    with trio.CancelScope(shield=True):
                        await thread.call(abort_quietly, opened[1])

    async def gather(self) -> None:
        """Nothing: a batch takes what is queued (its fsync runs off the loop, and writes queue meanwhile)."""

    async def commit(self, batch: Sequence[Queued], answer: Answer) -> None:
        mutations = [queued.mutation for queued in batch]
        for queued in batch:
            if queued.conditions:
                raise ValueError("a single node has no shared store to check a write's conditions against")
        if self._thread is None:
            started = time.perf_counter()
            outcomes = run_batch(self._store, mutations)
            answer(outcomes, time.perf_counter() - started)
            return
        opened = self._opened
        assert opened is not None  # a failed begin raised below
        outcomes, broken = await apply_yielding(self._store, opened[0], mutations)
        self._opened = None  # the pinned thread ends it, whatever happens now
        outcomes, following, seconds = await self._thread.call(_end_and_begin, self._store, opened[1], outcomes,
                                                               broken, len(batch))
        if not isinstance(following, BaseException):
            self._opened = following
        answer(outcomes, seconds)
        if isinstance(following, BaseException):
            raise following


async def apply_yielding(store: Store, parent: WriteTxn,
                         mutations: Sequence[Callable[[WriteTxn], object]]) -> tuple[list[Outcome], Exception | None]:
    """Apply ``mutations`` to ``parent`` (:func:`storage.batch.apply_all`), letting other tasks run between every
    :data:`MUTATIONS_PER_YIELD` of them."""
    outcomes: list[Outcome] = []
    for start in range(0, len(mutations), MUTATIONS_PER_YIELD):
        if start:
            # Not a cancellation point: a batch already taken from the queue must reach its commit.
            await trio.lowlevel.cancel_shielded_checkpoint()
        done, broken = apply_all(store, parent, mutations[start:start + MUTATIONS_PER_YIELD])
        outcomes += done
        if broken is not None:
            return outcomes, broken
    return outcomes, None


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
