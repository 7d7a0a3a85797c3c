"""The writer's commit step: how a batch of queued mutations becomes durable, a seam with one implementation per
topology.

The group-commit writer (``controller/data/group_commit.py``) queues mutations, takes them in batches and answers
each caller with its outcome; a :class:`CommitStep` decides how a batch is run and made durable. A single node runs
it in one local LMDB transaction (:class:`controller.data.local_commit.LocalCommit`); a node of a cluster runs it
against its local replica and commits what it wrote to the store the nodes share (``controller/cluster/``). Nothing
above the writer knows which.

A mutation may run more than once before it is durable (a replicated commit runs a batch again after another node
wrote first): only its last run's writes and result count, so a mutation must compute everything from the
transaction it is given (and what it captured before it was queued) and keep no state from an earlier run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from storage.batch import Mutation, Outcome

__all__ = ["Answer", "CommitStep", "ConditionFailed", "Queued"]

Answer = Callable[[list[Outcome], float], None]
"""How a commit step hands back a batch's outcomes (one per mutation, in order) and the seconds its commit took."""


class Queued(Protocol):
    """A mutation waiting in the writer's queue, with the conditions its commit must meet.

    ``conditions`` are checked by the shared store of a cluster in the same transaction that makes the mutation
    durable (an owner fencing its writes: "only while my claim on this key stands"); the mutation fails with
    :class:`ConditionFailed` when one does not hold. A single node has no shared store and takes none.
    """

    @property
    def mutation(self) -> Mutation: ...

    @property
    def conditions(self) -> Sequence[object]:
        """Read once the mutation has run (a posted write may still gather them until then)."""

    @property
    def queued_at(self) -> float | None:
        """When it was queued (``trio.current_time()``), for a step that bounds how long a caller waits; None for a
        write nobody waits for (:meth:`~controller.data.group_commit.Writer.post`)."""


class ConditionFailed(Exception):
    """A condition a write carried (:attr:`Queued.conditions`) did not hold when it was to commit: nothing of it was
    written."""


class CommitStep(Protocol):
    """How the writer makes batches durable. The writer calls :meth:`attach` once, then, inside :meth:`serving`,
    :meth:`gather` and :meth:`commit` for one batch at a time from its own task."""

    def attach(self, wake: Callable[[], None]) -> None:
        """``wake()`` makes the writer call :meth:`commit` soon, with an empty batch if nothing is queued: a step
        that has work of its own (a replica's updates to apply) asks for its turn this way. It never blocks."""

    def serving(self) -> AbstractAsyncContextManager[None]:
        """The span in which batches are committed (the writer's whole run)."""

    async def gather(self) -> None:
        """Called by the writer just before it takes a batch from its queue: a step whose commits cost more per batch
        than per write may let writes about to be queued join it first. It must not wait on time."""

    async def commit(self, batch: Sequence[Queued], answer: Answer) -> None:
        """Run ``batch``'s mutations in order and make what they wrote durable, then call ``answer`` exactly once
        with their outcomes. A batch already taken is carried through even if the writer is cancelled. Raises only
        for a failure that stops the writer, after ``answer``."""
