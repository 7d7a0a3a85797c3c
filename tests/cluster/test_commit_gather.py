"""What a cluster node's writer does just before it takes a batch (``ReplicatedCommit.gather``): nothing when no
other task is runnable; otherwise the runnable tasks get ``GATHER_PASSES`` turns, with the read barrier holding its
read back, so that the writes they are about to queue join the batch. Driven on Trio's scheduler alone: no etcd."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio
import trio.testing

from controller.cluster.commit import ReplicatedCommit
from controller.cluster.freshness import Ride
from controller.cluster.keys import NetworkKeys
from controller.cluster.shipments import Limits
from controller.cluster.turns import GATHER_PASSES


class Barrier:
    """The read barrier as the writer sees it: whether a batch is being gathered or committed."""

    def __init__(self) -> None:
        self.writing_now = 0
        self.entered = 0

    def ride(self) -> Ride | None:
        return None

    @contextmanager
    def writing(self) -> Iterator[None]:
        self.writing_now += 1
        self.entered += 1
        try:
            yield
        finally:
            self.writing_now -= 1


def commit_step(barrier: Barrier) -> ReplicatedCommit:
    # gather() touches nothing but the barrier and the scheduler.
    unused: Any = None
    return ReplicatedCommit(unused, unused, NetworkKeys("/gather/"), node="n", limits=Limits(), barrier=barrier)


async def test_with_nothing_else_runnable_a_batch_is_taken_at_once() -> None:
    barrier = Barrier()
    step = commit_step(barrier)
    await trio.testing.wait_all_tasks_blocked()  # every other task of the run waits: nothing is runnable
    with trio.CancelScope() as scope:
        scope.cancel()
        await step.gather()  # no checkpoint: a cancelled scope would raise at the first
    assert not scope.cancelled_caught
    assert barrier.entered == 0


async def test_runnable_tasks_queue_their_writes_before_the_batch_is_taken() -> None:
    """A task that queues its write in its first ``GATHER_PASSES - 1`` steps has queued it when ``gather`` returns,
    whatever order the scheduler runs each turn's tasks in (the last turn may run it after the writer); one that
    needs more steps than the turns given has not. The barrier held its read back meanwhile."""
    barrier = Barrier()
    step = commit_step(barrier)
    queued: dict[str, int] = {}

    async def writer_to_be(name: str, steps: int) -> None:
        for _ in range(steps):
            await trio.lowlevel.checkpoint()
        queued[name] = barrier.writing_now

    async with trio.open_nursery() as nursery:
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(writer_to_be, "soon", GATHER_PASSES - 2)  # its start and that many checkpoints
        nursery.start_soon(writer_to_be, "late", GATHER_PASSES + 2)
        await step.gather()
        assert queued == {"soon": 1}
        assert barrier.entered == 1 and barrier.writing_now == 0
    assert queued == {"soon": 1, "late": 0}


async def test_the_turns_are_carried_through_under_cancellation() -> None:
    """The writer has taken the batch's first write when it gathers: a cancellation then does not cut the turns
    short (the batch is carried through), it is delivered at the writer's next checkpoint."""
    barrier = Barrier()
    step = commit_step(barrier)
    queued: list[str] = []

    async def writer_to_be() -> None:
        for _ in range(GATHER_PASSES - 2):
            await trio.lowlevel.checkpoint()
        queued.append("write")

    async with trio.open_nursery() as nursery:
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(writer_to_be)
        with trio.CancelScope() as scope:
            scope.cancel()
            await step.gather()
            assert queued == ["write"]
            with pytest.raises(trio.Cancelled):
                await trio.lowlevel.checkpoint()
        assert not scope.cancelled_caught  # the gather itself was not cut short
