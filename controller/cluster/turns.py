"""Scheduler turns for the work a busy node is a few task steps from doing, given before a step whose cost is per
call rather than per request: the read barrier's quorum read (``freshness``) and the writer's etcd txn (``commit``).
Plain Trio, no timer: an idle node skips them."""

from __future__ import annotations

import trio

__all__ = ["GATHER_PASSES", "busy", "give_turns"]

GATHER_PASSES = 8
"""Scheduler turns a busy node's barrier gives the runnable tasks before it sends a quorum read, and its writer before
it takes a batch (:func:`give_turns`)."""


def busy() -> bool:
    """Whether any task waits in Trio's run queue now: a sign that the node is busy, which can miss (the tasks of the
    turn under way that have not run yet are not in the queue); callers then just go on at once."""
    return trio.lowlevel.current_statistics().tasks_runnable > 0


async def give_turns(passes: int = GATHER_PASSES) -> None:
    """Give the scheduler ``passes`` turns before the caller goes on: every task runnable meanwhile runs at least
    ``passes - 1`` times, so what such tasks are a few steps from doing (reaching the barrier, queueing a write) is
    done by then. No timer: on an idle node it costs ``passes`` checkpoints, which is why callers first ask
    :func:`busy`."""
    for _ in range(passes):
        await trio.lowlevel.checkpoint()
