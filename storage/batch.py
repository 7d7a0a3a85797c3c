"""Group commit, the synchronous half: run a batch of mutations in one durable LMDB transaction.

Each mutation runs in its own nested transaction, so one that raises is rolled back alone and the others still
commit. The batch commits once (one fsync for the whole batch). The async half that collects batches and wakes
callers lives in ``controller/data/group_commit.py``; this module never touches Trio.

Two ways to drive it: :func:`run_batch` does everything in one call; :func:`apply_all` and :func:`end_batch` split
the mutations from the commit, so that a caller can run the mutations on one thread and begin and commit the
transaction on another (LMDB binds a write transaction's lock to the thread that began it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import lmdb

from storage.store import Store, WriteTxn
from storage.write_set import WriteSet

__all__ = ["Mutation", "Outcome", "abort_quietly", "apply", "apply_all", "end_batch", "run_batch"]

Mutation = Callable[[WriteTxn], Any]


@dataclass(slots=True)
class Outcome:
    """The result of one mutation: its return value, or the exception it raised (its writes rolled back).
    ``writes``: what it wrote, when its transaction recorded that (``storage/write_set.py``)."""

    value: Any = None
    error: BaseException | None = None
    writes: WriteSet | None = None

    def unwrap(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def apply(store: Store, parent: WriteTxn, mutation: Mutation) -> Outcome:
    """Run ``mutation`` in a transaction nested under ``parent``; an ``Exception`` it raises rolls back only its
    own writes and becomes its outcome.

    Raises what the mutation raised if that is not an ``Exception``, and LMDB's error if the nested transaction
    cannot commit; either way ``parent`` must then be aborted.
    """
    child, raw_child = store.begin_write(parent)
    try:
        value = mutation(child)
    except Exception as exc:  # the mutation's own failure: roll back only its writes
        child.close_cursors()
        raw_child.abort()
        return Outcome(error=exc)
    except BaseException:
        child.close_cursors()
        raw_child.abort()
        raise
    child.close_cursors()
    raw_child.commit()
    if child.writes is None:
        return Outcome(value=value)
    assert parent.writes is not None  # a child records only under a parent that does
    parent.writes.absorb(child.writes)
    return Outcome(value=value, writes=child.writes)


def apply_all(store: Store, parent: WriteTxn, mutations: Sequence[Mutation]) -> tuple[list[Outcome], Exception | None]:
    """:func:`apply` each mutation in order; stops at the first LMDB error that breaks ``parent`` and returns it
    with the outcomes so far (``parent`` must then be aborted: :func:`end_batch`)."""
    outcomes: list[Outcome] = []
    for mutation in mutations:
        try:
            outcomes.append(apply(store, parent, mutation))
        except Exception as exc:
            return outcomes, exc
    return outcomes, None


def end_batch(store: Store, raw_parent: lmdb.Transaction, outcomes: list[Outcome], broken: Exception | None,
              count: int) -> list[Outcome]:
    """End the batch of ``count`` mutations: commit it durably and return ``outcomes``, or, when ``broken`` (or when
    the commit fails), abort it and return ``count`` outcomes carrying that error, so that no caller is told its
    write succeeded when it did not."""
    try:
        if broken is None:
            try:
                raw_parent.commit()
                return outcomes
            except Exception as exc:
                broken = exc
        abort_quietly(raw_parent)
        return [Outcome(error=broken) for _ in range(count)]
    finally:
        store.write_ended()


def run_batch(store: Store, mutations: Sequence[Mutation]) -> list[Outcome]:
    """Apply ``mutations`` in order inside one write transaction and commit it durably (see :func:`end_batch`).

    Raises:
        RuntimeError: a pinned writer holds the store's writes (:meth:`Store.held_writes`); submit to it instead.
    """
    if store.writes_held:
        raise RuntimeError("the store's writer holds its write lock: submit the write to the writer")
    parent, raw_parent = store.begin_write()
    try:
        outcomes, broken = apply_all(store, parent, mutations)
    except BaseException:
        abort_quietly(raw_parent)
        store.write_ended()
        raise
    return end_batch(store, raw_parent, outcomes, broken, len(mutations))


def abort_quietly(raw: lmdb.Transaction) -> None:
    """Abort ``raw`` unless it has already ended (a failed commit ends it; aborting again may raise)."""
    with contextlib.suppress(lmdb.Error):
        raw.abort()
