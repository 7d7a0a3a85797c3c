"""A cluster node's LMDB replica as the writer's task keeps it: its write transactions, where it stands
(:class:`~controller.cluster.position.ReplicaPosition`), the watch's updates applied to it, a rebuilt replica
swapped in, and every write it takes told to the feed's listeners.

The replica service (``controller/cluster/replica.py``) hands over the watch's updates (:meth:`LocalReplica.enqueue`)
and rebuilt replicas (:meth:`LocalReplica.swap`); the commit step (``controller/cluster/commit.py``) applies them
between its batches (:meth:`LocalReplica.apply_pending`), on the writer's one task, in revision order, each in an
LMDB transaction of its own that records the new position. Readers wait for a position with
:meth:`LocalReplica.wait_until`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import lmdb
import trio

from controller.cluster.keys import NetworkKeys
from controller.cluster.position import ReplicaPosition
from controller.cluster.replica_apply import (
    AppliedWrite,
    apply_updates,
    diff_stores,
    news,
    rebuilt_parts,
    replica_position,
)
from controller.cluster.snapshot import Snapshot
from controller.data.pinned_thread import PinnedThread
from controller.etcd import Unavailable, WatchUpdate
from storage.batch import abort_quietly
from storage.store import Store, WriteTxn

__all__ = ["KICK_AFTER", "LOST", "PUBLISH_PART", "FeedListener", "LocalReplica"]

log = logging.getLogger("tollgate.cluster")

KICK_AFTER = 1.0
"""Seconds the writer waits for the replica to reach a revision etcd named before it has the watch restarted."""
LOST = -1
"""What :meth:`LocalReplica.seen` gives for a write whose outcome the replica can no longer show (it was rebuilt)."""
PUBLISH_PART = 1024
"""Rows (and changes) of a rebuilt replica's difference told to the feed's listeners between two checkpoints."""

FeedListener = Callable[[AppliedWrite], None]


class LocalReplica:
    """The replica ``store`` of ``network`` on the node whose lane head is ``lane_key``."""

    def __init__(self, store: Store, keys: NetworkKeys, *, network: str, lane_key: bytes) -> None:
        store.record_writes = True
        self.store = store
        self._keys = keys
        self.network = network  # the network's identity (a replica of another is rebuilt)
        with store.read() as txn:
            applied, head = replica_position(txn, network)
        if head > applied:
            # The node stopped with its own writes in the network's order ahead of what its watch had brought. They
            # cannot be taken again from the watch over the later state they led to (a name freed and taken again
            # would meet itself in a unique index), nor skipped (another node's write in between may have touched
            # the same rows): the replica is rebuilt from etcd, as an empty one is.
            log.warning("the replica stopped ahead of its watch: rebuilding it from etcd",
                        extra={"applied": applied, "head": head})
            applied = head = 0
        self.position = ReplicaPosition(keys.head, lane_key, applied, head)
        self._pending: list[WatchUpdate] = []
        self._snapshot: Snapshot | None = None
        self._wake: Callable[[], None] = lambda: None
        self._progress = trio.lowlevel.ParkingLot()  # woken whenever the replica moves on
        self._arrivals = trio.lowlevel.ParkingLot()  # woken whenever updates are handed over
        self._feed: list[FeedListener] = []
        self._deciding: dict[str, int | None] = {}  # lost writes: their revision once the replica saw them
        self._announced: set[str] = set()  # own writes whose changes their callers' listeners announce
        self._thread: PinnedThread | None = None  # where transactions begin and commit, if synced
        self._running = False
        self._writes = trio.Lock()  # held by the commit step around each batch, and by a rebuild while it reads
        self.kick: Callable[[], None] = lambda: None  # restarts the replica's watch (set by the replica service)

    # -- what the replica service and readers use ---------------------------------------------------------------

    @property
    def store_path(self) -> Path:
        """Where the live replica is (a rebuilt one is made beside it)."""
        return self.store.path

    @property
    def applied(self) -> int:
        """The revision up to which the replica holds every change of ``d/``."""
        return self.position.applied

    def subscribe(self, listener: FeedListener) -> None:
        """Call ``listener`` with every write this replica applies, on the writer's task: other nodes' writes once
        applied, this node's own once committed (``local``), and a rebuild's difference as one write."""
        self._feed.append(listener)

    def enqueue(self, update: WatchUpdate) -> None:
        """Hand over a watch update of ``d/``, to be applied at the writer's next turn."""
        self._pending.append(update)
        self._arrivals.unpark_all()
        self._wake()

    @asynccontextmanager
    async def rebuilding(self) -> AsyncIterator[Callable[[Snapshot], None]]:
        """Around reading a rebuilt replica, from before its first read: the commit step sends nothing to etcd
        meanwhile (the batch under way ends first), so that every write this node commits before the swap is in
        the rebuilt replica, rather than landing past the revision it is read at and being served as absent until
        the watch brings it back. Gives the function that hands the rebuilt replica over, to be swapped in before
        the next batch runs (its ``done`` is set then)."""
        async with self._writes:
            def hand_over(snapshot: Snapshot) -> None:
                self._snapshot = snapshot
                self._arrivals.unpark_all()
                self._wake()

            yield hand_over

    async def wait_until(self, reached: Callable[[ReplicaPosition], bool]) -> None:
        """Return once the replica's position is ``reached``."""
        while not reached(self.position):
            await self._progress.park()

    # -- what the commit step uses, on the writer's task ------------------------------------------------------------

    def attach(self, wake: Callable[[], None]) -> None:
        """``wake()`` gives the writer a turn (to apply what was handed over)."""
        self._wake = wake

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The span in which transactions begin and end (the writer's whole run)."""
        # A commit that waits for no disk costs less than two thread hops: begun and committed on the Trio thread
        # (LMDB binds a write transaction's lock to the thread that began it, always this one).
        pinned = PinnedThread("lmdb-writer") if self.store.synced else contextlib.nullcontext()
        with self.store.held_writes(), pinned as thread:
            self._thread, self._running = thread, True
            try:
                yield
            finally:
                self._thread, self._running = None, False

    async def begin(self, *, record: bool) -> tuple[WriteTxn, lmdb.Transaction]:
        """A write transaction of the replica (recording what it writes if ``record``)."""
        assert self._running, "the writer is not running"
        if self._thread is None:
            return self.store.begin_write(record=record)
        return await self._thread.call(functools.partial(self.store.begin_write, record=record))

    async def end(self, raw: lmdb.Transaction, *, commit: bool) -> None:
        """Commit or abort a transaction :meth:`begin` gave."""
        assert self._running, "the writer is not running"
        if self._thread is None:
            _end(self.store, raw, commit)
            return
        with trio.CancelScope(shield=True):
            await self._thread.call(_end, self.store, raw, commit)

    async def hold_writes(self, deadline: float) -> bool:
        """Take the right to commit a batch (:meth:`release_writes` gives it back), which a rebuild holds while it
        reads (:meth:`rebuilding`); False, not taken, if it did not come by ``deadline``. A rebuilt replica handed
        over meanwhile is swapped in first, and if that leaves no time before ``deadline``, False all the same. (A
        swap tells the listeners the whole difference: writes queued before it can wait past their bound.)"""
        try:
            self._writes.acquire_nowait()  # no scheduler turn when nothing rebuilds: the common case
        except trio.WouldBlock:
            with trio.move_on_at(deadline) as waited:
                await self._writes.acquire()
            if waited.cancelled_caught:
                return False
        if self._snapshot is None:
            return True
        try:
            await self.apply_pending()
        except BaseException:
            self._writes.release()
            raise
        if trio.current_time() >= deadline:
            self._writes.release()
            return False
        return True

    def release_writes(self) -> None:
        """Give back what :meth:`hold_writes` took."""
        self._writes.release()

    def moved_on(self) -> None:
        """The position moved (the commit step committed a batch): wake who waits for it."""
        self._progress.unpark_all()

    def announce(self, write_ids: list[str]) -> None:
        """Own writes that the watch may bring before the commit step commits them (a batch that broke off): their
        callers' listeners announce their changes, the feed's do not again."""
        self._announced.update(write_ids)

    def forget(self, write_ids: list[str]) -> None:
        """The writes :meth:`announce` named are applied, or never will be."""
        self._announced.difference_update(write_ids)

    def look_for(self, write_id: str) -> None:
        """Note the revision of the write ``write_id`` (lost on its way) if the watch brings it: :meth:`seen`."""
        self._deciding[write_id] = None

    def seen(self, write_id: str) -> int | None:
        """The revision of the write :meth:`look_for` named, None if not seen, :data:`LOST` if the replica was
        rebuilt since; forgets it."""
        return self._deciding.pop(write_id, None)

    def publish(self, write: AppliedWrite) -> None:
        """Tell every feed listener of ``write``."""
        for listener in self._feed:
            listener(write)

    async def catch_up(self, revision: int, deadline: float, *, main: bool) -> None:
        """Apply the replica's updates until it holds the network head's chain up to ``revision`` (``main``), or
        every write up to it (Unavailable at ``deadline``)."""
        kicked = False
        while True:
            await self.apply_pending()
            if (self.position.head if main else self.position.applied) >= revision:
                return
            wait_until = deadline if kicked else min(deadline, trio.current_time() + KICK_AFTER)
            with trio.move_on_at(wait_until):
                await self._arrivals.park()
            if trio.current_time() >= deadline:
                raise Unavailable(f"the replica did not reach revision {revision} in time")
            if not kicked and trio.current_time() >= wait_until:
                kicked = True
                self.kick()

    async def apply_pending(self) -> None:
        """Swap in a rebuilt replica, then apply the updates handed over, if any."""
        if self._snapshot is not None:
            await self._swap_in(self._snapshot)
        if not self._pending:
            return
        updates, self._pending = self._pending, []
        position = self.position
        if not news(self._keys, updates, position):
            # Nothing new (this node's own writes coming back, progress notifications): no transaction. The
            # recorded position is moved with the next write; resuming from an older one only replays what is
            # dropped again.
            position.advanced(max(update.revision for update in updates))
            self._progress.unpark_all()
            return
        txn, raw = await self.begin(record=False)
        try:
            applied = apply_updates(txn, self.store, self._keys, updates, position)
        except BaseException:
            await self.end(raw, commit=False)
            raise
        await self.end(raw, commit=True)
        position.advanced(applied.applied, applied.head)
        for write in applied.writes:
            if write.write_id in self._deciding:
                self._deciding[write.write_id] = write.revision
        self._progress.unpark_all()
        for write in applied.writes:
            own = write.write_id in self._announced
            self._announced.discard(write.write_id)
            self.publish(AppliedWrite(write.revision, write.write_id, write.node, write.rows, write.meta,
                                      [] if own else write.changes, local=own))

    async def _swap_in(self, snapshot: Snapshot) -> None:
        """Serve from ``snapshot`` instead of the current replica: the difference is published a part at a time.

        Shielded: begun on a request's task (:meth:`catch_up`), a swap completes even if that request is cancelled,
        since nobody else would finish it. The difference of a whole network takes seconds to tell the listeners, so
        other tasks (the lease's keepalives among them) run between its parts; the position moves only once every
        part is told, so that a request waiting for the rebuilt replica finds the listeners' state complete."""
        with trio.CancelScope(shield=True):
            self._snapshot = None
            store = self.store
            rows, changes = await trio.to_thread.run_sync(diff_stores, store, snapshot.store)
            live = store.path
            retired = live.with_name(live.name + ".old")
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, retired, ignore_errors=True))
            if live.exists():
                os.rename(live, retired)
            os.rename(snapshot.store.path, live)
            store.adopt(snapshot.store)
            store.path = live
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, retired, ignore_errors=True))
            self._pending.clear()
            for write_id, seen in self._deciding.items():  # their history went with the old replica
                if seen is None:
                    self._deciding[write_id] = LOST
            log.info("replica rebuilt from etcd", extra={"revision": snapshot.revision, "changedRows": len(rows)})
            for part in rebuilt_parts(snapshot.revision, rows, changes, PUBLISH_PART):
                self.publish(part)
                await trio.lowlevel.checkpoint()
            self.position.rebuilt(snapshot.revision, snapshot.head)
            self._progress.unpark_all()
            snapshot.done.set()


def _end(store: Store, raw: lmdb.Transaction, commit: bool) -> None:
    try:
        if commit:
            raw.commit()
        else:
            abort_quietly(raw)
    finally:
        store.write_ended()
