"""The read barrier's two waits (``controller/cluster/freshness.py``), on virtual time, over an etcd that cannot
answer at first: a request settles for the replica as it is, adopting a shard does not; a request whose replica does
not reach what etcd named is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from controller.cluster import ReadIndexBarrier, freshness
from controller.cluster.freshness import CURRENT_RETRY, RIDE_WAIT
from controller.cluster.keys import NetworkKeys
from controller.cluster.position import ReplicaPosition
from controller.cluster.turns import GATHER_PASSES
from controller.errors import ApiError
from controller.etcd import EtcdError, KeyValue, RangeResult

KEYS = NetworkKeys("/t/")


class Etcd:
    """Fails the first ``failures`` reads of the heads, then finds the network's head at ``head``."""

    def __init__(self, failures: int, head: int) -> None:
        self.failures = failures
        self.head = head
        self.reads = 0

    async def range(self, key: bytes, range_end: bytes | None = None, **_: Any) -> RangeResult:
        self.reads += 1
        await trio.lowlevel.checkpoint()
        if self.reads <= self.failures:
            raise EtcdError("no leader")
        return RangeResult(kvs=(KeyValue(key=KEYS.head, mod_revision=self.head),))


class Replica:
    """A replica at ``applied`` that the test moves on."""

    def __init__(self, applied: int) -> None:
        self.position = ReplicaPosition(KEYS.head, KEYS.lane("a"), applied, applied)
        self._moved = trio.lowlevel.ParkingLot()

    @property
    def applied(self) -> int:
        return self.position.applied

    def move_to(self, applied: int) -> None:
        self.position.advanced(applied, applied)
        self._moved.unpark_all()

    async def wait_until(self, reached: Callable[[ReplicaPosition], bool]) -> None:
        while not reached(self.position):
            await self._moved.park()

    def kick(self) -> None:
        """Nothing to restart: this replica has no watch."""


@dataclass
class Running:
    """A barrier serving over the stubs, and the instants at which the requests made through it were answered."""

    etcd: Etcd
    replica: Replica
    barrier: ReadIndexBarrier
    nursery: trio.Nursery
    answered: list[float] = field(default_factory=list)

    def arrives(self) -> None:
        """A request arrives now and waits to be fresh in a task of its own."""
        self.nursery.start_soon(self.fresh)

    async def fresh(self) -> None:
        """A request waits to be fresh here."""
        await self.barrier.wait_fresh()
        self.answered.append(trio.current_time())


@asynccontextmanager
async def running(*, failures: int = 0, applied: int = 7) -> AsyncIterator[Running]:
    """The barrier's service running over an etcd that fails ``failures`` reads, then finds the head at 7, and a
    replica at ``applied``."""
    etcd, replica = Etcd(failures=failures, head=7), Replica(applied=applied)
    barrier = ReadIndexBarrier(etcd, KEYS, replica)  # type: ignore[arg-type]  # a stub etcd
    async with trio.open_nursery() as nursery:
        await nursery.start(barrier.run)
        yield Running(etcd, replica, barrier, nursery)
        nursery.cancel_scope.cancel()


async def test_adopting_waits_for_a_quorum_read_where_a_request_settles_for_the_replica(
        autojump_clock: trio.abc.Clock) -> None:
    async with running(failures=3, applied=5) as run:
        etcd, replica, barrier = run.etcd, run.replica, run.barrier
        start = trio.current_time()
        await barrier.wait_fresh()  # etcd could not say: served from the replica as it is, at once
        assert trio.current_time() == start and etcd.reads == 1
        waited: list[float] = []
        adopted = trio.Event()

        async def adopt() -> None:
            await barrier.wait_current()
            waited.append(trio.current_time() - start)
            adopted.set()

        run.nursery.start_soon(adopt)
        await trio.sleep(0.9)
        # Two more failures, CURRENT_RETRY apart, then the head at 7, which the replica has not reached.
        assert etcd.reads == 4 and not waited and 2 * CURRENT_RETRY < 0.9
        replica.move_to(7)
        await adopted.wait()
        assert waited == [0.9]


async def test_a_round_waiting_while_the_writer_commits_is_answered_by_its_txn(
        autojump_clock: trio.abc.Clock) -> None:
    async with running(applied=5) as run:
        barrier = run.barrier
        assert barrier.ride() is None  # nobody waiting: nothing to answer
        with barrier.writing():
            start = trio.current_time()
            run.arrives()
            await trio.sleep(0.01)
            ride = barrier.ride()  # the writer sends a txn: it takes the waiting round
            assert ride is not None and barrier.ride() is None
            await trio.sleep(0.01)
            ride({KEYS.head: 9})  # committed; the request waits for the replica to hold what the txn read
            await trio.sleep(0.01)
            assert not run.answered
            run.replica.move_to(9)
            await trio.sleep(0.01)
        assert run.answered == [start + 0.03] and run.etcd.reads == 0
        assert (barrier.ridden, barrier.rounds) == (1, 0)


async def test_a_round_whose_txn_did_not_commit_waits_for_the_barriers_next_read(
        autojump_clock: trio.abc.Clock) -> None:
    async with running() as run:
        barrier = run.barrier
        with barrier.writing():
            start = trio.current_time()
            run.arrives()
            await trio.sleep(0.01)
            ride = barrier.ride()
            assert ride is not None
            run.arrives()  # a later request, in the next round
            await trio.sleep(0.01)
            ride(None)  # the txn met another write: the round goes back to the barrier
            await trio.sleep(0.01)
            assert not run.answered and run.etcd.reads == 0  # the writer is still committing: its next txn may answer
        await trio.testing.wait_all_tasks_blocked()
        assert run.answered == [start + 0.03, start + 0.03] and run.etcd.reads == 1  # one read for both, once it ended
        assert (barrier.ridden, barrier.rounds) == (0, 1)


async def test_the_barrier_reads_once_the_writer_committed_for_longer_than_the_ride_wait(
        autojump_clock: trio.abc.Clock) -> None:
    async with running() as run:
        with run.barrier.writing():
            start = trio.current_time()
            await run.fresh()  # the writer sends no txn meanwhile
        assert run.answered == [start + RIDE_WAIT] and run.etcd.reads == 1
        await run.fresh()  # nobody writing: read at once
        assert run.answered[1] == start + RIDE_WAIT and run.etcd.reads == 2


@pytest.mark.parametrize(("node_busy", "reads"), [(True, 1), (False, 2)])
async def test_on_a_busy_node_requests_a_few_steps_from_the_barrier_join_the_round(
        autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch, node_busy: bool, reads: int) -> None:
    """On a busy node (other tasks runnable when a round is due) the barrier gives them ``GATHER_PASSES`` turns
    before it sends the round's read: a request that reaches it within ``GATHER_PASSES - 1`` steps of its own joins
    that round. On an idle node the read goes at once, and that request waits for the next round."""
    monkeypatch.setattr(freshness, "busy", lambda: node_busy)
    async with running(applied=7) as run:

        async def a_few_steps_away() -> None:
            for _ in range(GATHER_PASSES - 2):  # its start and that many checkpoints
                await trio.lowlevel.checkpoint()
            await run.fresh()

        start = trio.current_time()
        run.arrives()
        run.nursery.start_soon(a_few_steps_away)
        await trio.testing.wait_all_tasks_blocked()
        assert run.answered == [start, start]  # turns take no time
        assert run.etcd.reads == reads


async def test_a_request_the_replica_does_not_catch_up_for_is_refused_at_the_replica_wait(
        autojump_clock: trio.abc.Clock) -> None:
    """etcd names the head at 7 and the replica stays at 5 (a rebuild, a stuck watch): the request is refused 503 at
    exactly REPLICA_WAIT, not served without the writes up to 7; once the replica is there, the next one passes."""
    async with running(applied=5) as run:
        start = trio.current_time()
        with pytest.raises(ApiError) as refused:
            await run.barrier.wait_fresh()
        assert refused.value.code == "CLUSTER_UNAVAILABLE" and refused.value.status == 503
        assert trio.current_time() - start == freshness.REPLICA_WAIT
        run.replica.move_to(7)
        await run.barrier.wait_fresh()
