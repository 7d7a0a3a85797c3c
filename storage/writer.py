"""Group commit, the synchronous half: run a batch of mutations in one durable LMDB transaction.

Each mutation runs in its own nested transaction, so one that raises is rolled back alone and the others still
commit. The batch commits once (one fsync for the whole batch). The async half that collects batches and wakes
callers lives in ``controller/writer.py``; this module never touches Trio.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from storage.store import Store, WriteTxn

__all__ = ["Mutation", "Outcome", "run_batch"]

Mutation = Callable[[WriteTxn], Any]


@dataclass(slots=True)
class Outcome:
    """The result of one mutation: its return value, or the exception it raised (its writes rolled back)."""

    value: Any = None
    error: BaseException | None = None

    def unwrap(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def run_batch(store: Store, mutations: Sequence[Mutation]) -> list[Outcome]:
    """Apply ``mutations`` in order inside one write transaction and commit it durably.

    Returns one :class:`Outcome` per mutation. If the commit itself fails, every outcome carries that error, so no
    caller is told its write succeeded when it did not.
    """
    outcomes: list[Outcome] = []
    parent, raw_parent = store.begin_write()
    try:
        for mutation in mutations:
            child, raw_child = store.begin_write(parent)
            try:
                value = mutation(child)
            except Exception as exc:  # the mutation's own failure: roll back only its writes
                child.close_cursors()
                raw_child.abort()
                outcomes.append(Outcome(error=exc))
            else:
                child.close_cursors()
                raw_child.commit()
                outcomes.append(Outcome(value=value))
        raw_parent.commit()
    except BaseException as exc:
        raw_parent.abort()
        if isinstance(exc, Exception):
            return [Outcome(error=exc) for _ in mutations]
        raise
    finally:
        store.write_ended()
    return outcomes
