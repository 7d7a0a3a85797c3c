"""The read barrier of a cluster node, batched as etcd's own ReadIndex: one quorum read serves every request that
arrived before it was sent.

A request asks to be fresh; the barrier's service sends one linearizable read of the heads (the network's and every
node's lane head: each replicated write moves one, so their mod revisions name the latest write of each chain) for
everyone waiting when it is sent, and those requests then wait until the local replica holds every chain up to
there (:meth:`~controller.cluster.position.ReplicaPosition.holds`). Requests that arrive while a read is in flight
wait for the next one, so one read is in flight at a time whatever the load, and each request sees every write
acknowledged (anywhere) before it arrived. The heads rather than etcd's global revision: a revision moved by keys
outside the replicated data (leases, membership, other networks on the same etcd) would otherwise make readers wait
for a progress notification.

When etcd cannot answer (no quorum), reads are served from the replica as it is after a short bound: it holds at
least every write this node acknowledged, since a write is acknowledged only once applied here. When etcd answers
and the replica does not reach what it named within :data:`REPLICA_WAIT` (a rebuild of a large network, a stuck
watch), the request is refused 503 rather than served without a write acknowledged before it.

A write txn answers a round as well as a quorum read does: every replicated txn reads the heads as it commits
(``controller/cluster/head_txns.py``). The writer takes the round waiting when it sends a txn (:meth:`ReadIndexBarrier.
ride`): committed, its heads answer that round's requests, which all arrived before it was sent; not committed, the
round goes back to wait for the barrier's next read. While the writer is committing a batch (:meth:`ReadIndexBarrier.
writing`), the barrier holds its own read back, at most :data:`RIDE_WAIT`, for the writer's next txn to take the round:
under a write load (every posture report is one) some rounds ride on txns the node sends anyway, and those held back
gather more requests each, so etcd is sent fewer quorum reads. On a busy node the barrier also gives the runnable
tasks a few scheduler turns (``controller/cluster/turns.py``) before it sends a read, for requests a few steps away
to join it. The rounds' answers are as fresh either way.

A request another node forwarded already passed that node's barrier: it names a revision up to which a replica must
have applied everything to hold what that node's replica held (:attr:`ReadIndexBarrier.position`), and
:meth:`ReadIndexBarrier.wait_revision` waits for this replica to get there, with no quorum read of its own.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Protocol

import trio

from controller.cluster.head_txns import heads_of, heads_read
from controller.cluster.keys import NetworkKeys
from controller.cluster.local_replica import KICK_AFTER
from controller.cluster.position import ReplicaPosition
from controller.cluster.turns import busy, give_turns
from controller.errors import ApiError, nested_cause
from controller.etcd import EtcdClient, EtcdError

__all__ = ["RIDE_WAIT", "STALE_READ_WAIT", "ReadIndexBarrier", "Ride"]

log = logging.getLogger("tollgate.cluster")

CURRENT_RETRY = 0.1
"""Seconds :meth:`ReadIndexBarrier.wait_current` waits before a new quorum read after one that etcd could not
answer."""
STALE_READ_WAIT = 0.5
"""Seconds a request waits for a quorum read that does not come back before it is served from the replica as is."""
RIDE_WAIT = 0.05
"""Seconds the barrier holds its read back while the writer commits, for the writer's next txn to answer the round."""
REPLICA_WAIT = 10.0
"""Seconds a request waits for the replica to reach a revision etcd named (the watch is restarted after a second)."""


class _Round:
    """One quorum read and the requests it serves: the ``heads`` once answered (None: etcd could not say). Rounds
    handed back by a txn that did not commit are answered with it (``followers``)."""

    __slots__ = ("answered", "followers", "heads", "waiting")

    def __init__(self) -> None:
        self.answered = trio.Event()
        self.heads: dict[bytes, int] | None = None
        self.waiting = 0
        self.followers: list[_Round] = []

    def answer(self, heads: dict[bytes, int] | None) -> None:
        self.heads = heads
        self.answered.set()
        for round_ in self.followers:
            round_.answer(heads)


Ride = Callable[[dict[bytes, int] | None], None]
"""Given to a writer that took a round (:meth:`ReadIndexBarrier.ride`): call it once, with the heads its txn read as it
committed, or None if the txn did not commit (the round then waits for the barrier's next read)."""


class Replica(Protocol):
    """What the barrier needs of the node's replica (:class:`~controller.cluster.local_replica.LocalReplica`)."""

    @property
    def position(self) -> ReplicaPosition: ...

    @property
    def applied(self) -> int: ...

    async def wait_until(self, reached: Callable[[ReplicaPosition], bool]) -> None:
        """Return once the replica's position is ``reached``."""

    def kick(self) -> None:
        """Restart the replica's watch: it lags what etcd named."""


class ReadIndexBarrier:
    """A :class:`~controller.data.freshness.Freshness` over the replica ``local``; :meth:`run` is its service."""

    def __init__(self, etcd: EtcdClient, keys: NetworkKeys, local: Replica) -> None:
        self._etcd = etcd
        self._keys = keys
        self._local = local
        self._next = _Round()
        self._wanted = trio.lowlevel.ParkingLot()
        self._writing = 0
        self._written = trio.lowlevel.ParkingLot()
        self.rounds = 0  # quorum reads sent
        self.ridden = 0  # rounds answered by a write txn

    def ride(self) -> Ride | None:
        """Take the round waiting now, if any, for a txn about to be sent that reads every head as it commits."""
        if not self._next.waiting:
            return None
        round_, self._next = self._next, _Round()
        return functools.partial(self._ridden, round_)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around the writer's commit of a batch: the barrier's read waits for the txns it sends meanwhile."""
        self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1
            self._written.unpark_all()

    async def _wait_for_rides(self) -> None:
        """While the writer commits, and at most :data:`RIDE_WAIT`, let its txns take the waiting rounds."""
        with trio.move_on_after(RIDE_WAIT):
            while self._next.waiting and self._writing:
                await self._written.park()
                # A batch queued meanwhile is taken one scheduling turn after the last one ended: look again then.
                await trio.lowlevel.checkpoint()

    def _ridden(self, round_: _Round, heads: dict[bytes, int] | None) -> None:
        if heads is not None:
            self.ridden += 1
            round_.answer(heads)
            return
        self._next.followers.append(round_)
        self._next.waiting += round_.waiting
        self._wanted.unpark()

    def _join(self) -> _Round:
        """The round whose quorum read is sent next, counting one more request in it."""
        round_ = self._next
        round_.waiting += 1
        self._wanted.unpark()
        return round_

    async def wait_fresh(self) -> None:
        """:meth:`Freshness.wait_fresh`. Raises ApiError ``CLUSTER_UNAVAILABLE`` (503) when etcd named the writes
        to wait for and the replica did not apply them within :data:`REPLICA_WAIT` (a rebuild, a stuck watch): a
        read is refused rather than served without a write acknowledged before it."""
        round_ = self._join()
        with trio.move_on_after(STALE_READ_WAIT):
            await round_.answered.wait()
        heads = round_.heads
        if heads is not None and not await self._wait(lambda position: position.holds(heads)):
            raise ApiError("CLUSTER_UNAVAILABLE", nested_cause(
                f"this node's replica did not reach the writes acknowledged before the request within {REPLICA_WAIT}"
                " s", "CLUSTER_UNAVAILABLE"))

    async def wait_current(self) -> None:
        """As :meth:`wait_fresh`, without ever settling for the replica as it is: quorum reads until one is answered
        and the replica holds what it named (adopting a shard needs the state its old owner left)."""
        warned = False
        while True:
            round_ = self._join()
            await round_.answered.wait()
            heads = round_.heads
            if heads is None:
                if not warned:
                    warned = True
                    log.warning("etcd cannot say what was acknowledged: waiting for it before adopting shards")
                await trio.sleep(CURRENT_RETRY)
                continue
            await self._wait(functools.partial(ReplicaPosition.holds, heads=heads))
            if self._local.position.holds(heads):
                return

    @property
    def position(self) -> int:
        """A revision up to which another replica must have applied every write to hold what this node's replica
        holds (every write it has seen acknowledged, by any node), but the state its own actors wrote."""
        return self._local.position.forwarded

    def reached(self, revision: int) -> bool:
        """Whether this node's replica has applied every write up to ``revision``."""
        return self._local.applied >= revision

    async def wait_revision(self, revision: int) -> None:
        """Return once the replica has applied every write up to ``revision`` (or after :data:`REPLICA_WAIT`, the
        watch restarted after a second: :meth:`reached` then says it did not)."""
        await self._wait(lambda position: position.applied >= revision)

    async def _wait(self, reached: Callable[[ReplicaPosition], bool]) -> bool:
        """Whether the replica's position is ``reached`` within :data:`REPLICA_WAIT` (its watch restarted after
        :data:`~controller.cluster.local_replica.KICK_AFTER`)."""
        if reached(self._local.position):
            return True
        with trio.move_on_after(KICK_AFTER):
            await self._local.wait_until(reached)
            return True
        self._local.kick()  # the replica lags what etcd named: its watch may be stuck
        with trio.move_on_after(REPLICA_WAIT - KICK_AFTER):
            await self._local.wait_until(reached)
            return True
        return False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send one quorum read at a time, each for the requests waiting when it is sent."""
        task_status.started()
        while True:
            while not self._next.waiting:
                await self._wanted.park()
            await self._wait_for_rides()
            if busy():
                # Requests a few task steps from the barrier (their handlers runnable) join this round rather than
                # wait for the next: each is still answered by a read sent after it arrived.
                await give_turns()
            if not self._next.waiting:
                continue
            round_, self._next = self._next, _Round()
            heads: dict[bytes, int] | None = None
            try:
                read = heads_read(self._keys)
                heads = heads_of(await self._etcd.range(read.key, read.range_end, keys_only=True))
            except EtcdError as error:
                log.debug("a read barrier could not reach etcd", extra={"error": str(error)})
            self.rounds += 1
            round_.answer(heads)
