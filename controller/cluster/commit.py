"""A cluster node's commit step: batches run optimistically on the local replica and commit to etcd, and the
replica applies everything etcd holds, all on the writer's one task.

A batch runs in one LMDB write transaction of the replica (each mutation nested, as on a single node), which records
what it writes. The batch's write set then goes to etcd in one txn (or a few, within etcd's limits) guarded by the
head (``controller/cluster/head_txns.py``). Committed at revision R: the same LMDB transaction records R and commits,
and the callers are answered (read-your-writes: a write is answered once etcd holds it and this replica does). The
head had moved (another node wrote since this replica's state): the transaction is dropped, the replica catches up
to the head, and the batch runs again, so every rule the mutations check held against the latest state. Each
mutation is whole in one txn; one too large for any is refused (413 ``WRITE_TOO_LARGE``). A lost answer is settled
by looking, never by sending again. etcd refusing writes (no quorum) until the batch's deadline: 503
``CLUSTER_UNAVAILABLE``, nothing written.

The replica's updates (``controller/cluster/replica.py`` hands over the watch's updates with :meth:`enqueue`) are
applied between batches in their own LMDB transactions, in revision order, recording the applied revision; their
changes go to :meth:`subscribe`'s listeners. A rebuilt replica is swapped in the same way (:meth:`swap`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import lmdb
import trio

from controller.cluster.head_txns import Conflict, Refused, fence, send_guarded
from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.replica_apply import (
    APPLIED_META,
    HEAD_META,
    AppliedWrite,
    apply_updates,
    diff_stores,
    replica_position,
)
from controller.cluster.shipments import Limits, merged, plan_txns, txn_ops
from controller.cluster.snapshot import Snapshot
from controller.data.commit_step import Answer, ConditionFailed, Queued
from controller.data.local_commit import apply_yielding
from controller.data.pinned_thread import PinnedThread
from controller.errors import ApiError, nested_cause
from controller.etcd import Compare, EtcdClient, OutcomeUnknown, Unavailable, WatchUpdate
from storage.batch import Outcome, abort_quietly
from storage.store import Store, WriteTxn

__all__ = ["PROBE_DEADLINE", "WRITE_DEADLINE", "ReplicatedCommit"]

log = logging.getLogger("tollgate.cluster")

WRITE_DEADLINE = 3.5
"""Seconds a batch may take to reach etcd (an election included) before its callers are answered 503."""
PROBE_DEADLINE = 1.0
"""The deadline of a batch right after one that found etcd unavailable: callers queued meanwhile are answered
within the same bound as the ones before them."""
KICK_AFTER = 1.0
"""Seconds the writer waits for the replica to reach a revision etcd named before it has the watch restarted."""

FeedListener = Callable[[AppliedWrite], None]
_LOST = -1  # a lost write whose outcome the replica can no longer show


def _unavailable(error: Unavailable) -> ApiError:
    """503: etcd refused the write (it was not applied), or received it without answering (it may be applied once
    the quorum is back, whole: each mutation is one txn)."""
    applied = "unknown" if isinstance(error, OutcomeUnknown) else "no"
    return ApiError("CLUSTER_UNAVAILABLE", nested_cause(str(error), "CLUSTER_UNAVAILABLE", {"applied": applied}))


class ReplicatedCommit:
    """The :class:`~controller.data.commit_step.CommitStep` of a cluster node over its replica ``store``."""

    def __init__(self, store: Store, etcd: EtcdClient, keys: NetworkKeys, *, network: str, node: str,
                 limits: Limits) -> None:
        store.record_writes = True
        self._store = store
        self._etcd = etcd
        self._keys = keys
        self.network = network  # the network's identity (a replica of another is rebuilt)
        self.node = node  # named in the head of every write (the node's name, once known)
        self._limits = limits
        with store.read() as txn:
            self.applied, self.head = replica_position(txn, network)
        self._pending: list[WatchUpdate] = []
        self._snapshot: Snapshot | None = None
        self._wake: Callable[[], None] = lambda: None
        self._progress = trio.lowlevel.ParkingLot()  # woken whenever the replica moves on
        self._arrivals = trio.lowlevel.ParkingLot()  # woken whenever updates are handed over
        self._feed: list[FeedListener] = []
        self._deciding: dict[str, int | None] = {}  # lost writes: their revision once the replica saw them
        self._announced: set[str] = set()  # own writes whose changes their callers' listeners announce
        self._ids = itertools.count()
        self._prefix = os.urandom(6).hex()
        self._recently_unavailable = False
        self._thread: PinnedThread | None = None  # where transactions begin and commit, if synced
        self._running = False
        self.conflicts = 0  # batches that found the head moved by another node's write, and ran again
        self.kick: Callable[[], None] = lambda: None  # restarts the replica's watch (set by the replica service)

    # -- what the replica service and readers use ---------------------------------------------------------------

    @property
    def store_path(self) -> Path:
        """Where the live replica is (a rebuilt one is made beside it)."""
        return self._store.path

    def subscribe(self, listener: FeedListener) -> None:
        """Call ``listener`` with every write this replica applies, on the writer's task: other nodes' writes once
        applied, this node's own once committed (``local``), and a rebuild's difference as one write."""
        self._feed.append(listener)

    def enqueue(self, update: WatchUpdate) -> None:
        """Hand over a watch update of ``d/``, to be applied at the writer's next turn."""
        self._pending.append(update)
        self._arrivals.unpark_all()
        self._wake()

    async def swap(self, snapshot: Snapshot) -> None:
        """Serve from a rebuilt replica from now on; returns once it is swapped in."""
        self._snapshot = snapshot
        self._arrivals.unpark_all()
        self._wake()
        await snapshot.done.wait()

    async def wait_head(self, revision: int) -> None:
        """Return once the replica holds every write up to the head revision ``revision``."""
        while self.head < revision:
            await self._progress.park()

    # -- the commit step ---------------------------------------------------------------------------------------

    def attach(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def serving(self) -> AbstractAsyncContextManager[None]:
        return self._serving()

    @asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        # A commit that waits for no disk costs less than two thread hops: begun and committed on the Trio thread
        # (LMDB binds a write transaction's lock to the thread that began it, always this one).
        pinned = PinnedThread("lmdb-writer") if self._store.synced else contextlib.nullcontext()
        with self._store.held_writes(), pinned as thread:
            self._thread, self._running = thread, True
            try:
                yield
            finally:
                self._thread, self._running = None, False

    async def commit(self, batch: Sequence[Queued], answer: Answer) -> None:
        # Shielded: a batch taken from the queue is carried through (its deadline bounds it) and answered.
        with trio.CancelScope(shield=True):
            await self._commit(batch, answer)

    async def _commit(self, batch: Sequence[Queued], answer: Answer) -> None:
        await self._apply_pending()
        if not batch:
            answer([], 0.0)
            return
        started = time.perf_counter()
        deadline = trio.current_time() + (PROBE_DEADLINE if self._recently_unavailable else WRITE_DEADLINE)
        outcomes: list[Outcome | None] = [None] * len(batch)
        todo = list(range(len(batch)))
        try:
            while todo:
                settled = await self._attempt([batch[i] for i in todo], deadline)
                for position, outcome in settled.items():
                    outcomes[todo[position]] = outcome
                todo = [i for i in todo if outcomes[i] is None]
            self._recently_unavailable = False
        except Unavailable as error:
            log.warning("a write found etcd unavailable", extra={"error": str(error)})
            self._recently_unavailable = True
            for i in todo:
                outcomes[i] = Outcome(error=_unavailable(error))
        answer([outcome if outcome is not None else Outcome() for outcome in outcomes], time.perf_counter() - started)

    async def _attempt(self, items: Sequence[Queued], deadline: float) -> dict[int, Outcome]:
        """Run ``items`` once on the replica and try to commit them; the outcomes settled (by position). Those left
        out run again: another node wrote first, or a txn before theirs failed."""
        txn, raw = await self._begin(record=True)
        try:
            outcomes, broken = await apply_yielding(self._store, txn, [item.mutation for item in items])
        except BaseException:
            await self._end(raw, commit=False)
            raise
        conditions = [_conditions(item) for item in items]  # complete once each mutation has begun
        if broken is not None:
            await self._end(raw, commit=False)
            return {i: Outcome(error=broken) for i in range(len(items))}
        writes = [outcome.writes if outcome.error is None else None for outcome in outcomes]
        plan = plan_txns(self._keys, writes, [len(c) for c in conditions], self._limits)
        if plan.too_large:
            await self._end(raw, commit=False)
            cause = nested_cause(f"etcd takes at most {self._limits.max_txn_ops} operations and "
                                 f"{self._limits.max_request_bytes} bytes in one transaction", "WRITE_TOO_LARGE")
            return {i: Outcome(error=ApiError("WRITE_TOO_LARGE", cause)) for i in plan.too_large}
        if not plan.txns:  # nothing written: nothing to ship
            await self._end(raw, commit=False)
            return dict(enumerate(outcomes))
        head = self.head  # where the head is once the txns so far committed
        done: list[int] = []
        sent: list[str] = []
        try:
            for part in plan.txns:
                write_id = self._new_id()
                sent.append(write_id)
                self._announced.add(write_id)
                ops = txn_ops(self._keys, merged([writes[i] for i in part]))
                guards = [condition for i in part for condition in conditions[i]]
                try:
                    result = await send_guarded(self._etcd, self._keys, ops, head, HeadValue(write_id, self.node),
                                                guards, deadline)
                except OutcomeUnknown:
                    await self._end(raw, commit=False)
                    revision = await self._settle(write_id, head, deadline)
                    if revision is not None:
                        done, head = done + part, revision
                    return await self._partial(outcomes, done, head, deadline)
                except Unavailable:
                    await self._end(raw, commit=False)
                    if done:
                        return await self._partial(outcomes, done, head, deadline)
                    raise
                if isinstance(result, int):
                    done, head = done + part, result
                    continue
                await self._end(raw, commit=False)
                settled = await self._partial(outcomes, done, head, deadline)
                if isinstance(result, Conflict):
                    self.conflicts += 1
                    await self._catch_up(result.head, deadline)
                elif isinstance(result, Refused):
                    owners = [position for position in part for _ in conditions[position]]
                    error = ConditionFailed("a condition of the write did not hold")
                    settled.update((owners[index], Outcome(error=error)) for index in result.failed)
                return settled
            await self._commit_local(txn, raw, head)
            return dict(enumerate(outcomes))
        finally:
            # Applied by now, or never to be: nothing is left to recognise as this node's own.
            self._announced.difference_update(sent)

    async def _commit_local(self, txn: WriteTxn, raw: lmdb.Transaction, head: int) -> None:
        """Etcd holds the batch up to ``head``: commit the same transaction to the replica, recording ``head``."""
        shipped = txn.writes
        txn.set_meta(HEAD_META, head, local=True)
        txn.set_meta(APPLIED_META, max(self.applied, head), local=True)
        await self._end(raw, commit=True)
        self.head, self.applied = head, max(self.applied, head)
        self._progress.unpark_all()
        if self._feed and shipped is not None:
            self._publish(AppliedWrite(head, "", self.node, dict(shipped.rows), dict(shipped.meta), local=True))

    async def _partial(self, outcomes: list[Outcome], done: list[int], head: int,
                       deadline: float) -> dict[int, Outcome]:
        """Mutations ``done`` were committed, up to the head revision ``head``, by txns of their own before the
        batch broke off: answered once the replica has applied them (its watch brings them, and their callers'
        listeners announce them)."""
        if done:
            await self._catch_up(head, deadline)
        return {i: outcomes[i] for i in done}

    async def _settle(self, write_id: str, head: int, deadline: float) -> int | None:
        """The revision of the txn ``write_id``, guarded on ``head`` and lost, or None if it did not commit: fence
        the head past it, let the replica reach where the head is, and look whether it saw the write go by."""
        self._deciding[write_id] = None
        try:
            fenced = await fence(self._etcd, self._keys, head, HeadValue(self._new_id(), self.node), deadline)
            await self._catch_up(fenced.head, deadline)
            revision = self._deciding[write_id]
            if revision == _LOST:
                raise OutcomeUnknown("the replica was rebuilt before a write's outcome could be seen")
            return revision
        except OutcomeUnknown:
            raise
        except Unavailable as error:
            raise OutcomeUnknown(f"etcd received a write and its outcome could not be learned: {error}") from error
        finally:
            self._deciding.pop(write_id, None)

    async def _catch_up(self, revision: int, deadline: float) -> None:
        """Apply the replica's updates until it holds the head revision ``revision`` (Unavailable at ``deadline``)."""
        kicked = False
        while True:
            await self._apply_pending()
            if self.head >= revision:
                return
            wait_until = deadline if kicked else min(deadline, trio.current_time() + KICK_AFTER)
            with trio.move_on_at(wait_until):
                await self._arrivals.park()
            if trio.current_time() >= deadline:
                raise Unavailable(f"the replica did not reach revision {revision} in time")
            if not kicked and trio.current_time() >= wait_until:
                kicked = True
                self.kick()

    # -- applying the replica's updates ---------------------------------------------------------------------------

    async def _apply_pending(self) -> None:
        if self._snapshot is not None:
            await self._swap_in(self._snapshot)
        if not self._pending:
            return
        updates, self._pending = self._pending, []
        if all(event.kv.mod_revision <= self.applied for update in updates for event in update.events):
            # Nothing new (this node's own writes coming back, progress notifications): no transaction. The
            # recorded position is moved with the next write; resuming from an older one only replays what is
            # dropped again.
            self.applied = max(self.applied, *(update.revision for update in updates))
            self._progress.unpark_all()
            return
        txn, raw = await self._begin(record=False)
        try:
            applied = apply_updates(txn, self._store, self._keys, updates, self.applied, self.head)
        except BaseException:
            await self._end(raw, commit=False)
            raise
        await self._end(raw, commit=True)
        self.applied, self.head = applied.applied, applied.head
        for write in applied.writes:
            if write.write_id in self._deciding:
                self._deciding[write.write_id] = write.revision
        self._progress.unpark_all()
        for write in applied.writes:
            own = write.write_id in self._announced
            self._announced.discard(write.write_id)
            self._publish(AppliedWrite(write.revision, write.write_id, write.node, write.rows, write.meta,
                                       [] if own else write.changes, local=own))

    async def _swap_in(self, snapshot: Snapshot) -> None:
        """Serve from ``snapshot`` instead of the current replica: the difference is published as one write."""
        self._snapshot = None
        store = self._store
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
        for write_id in self._deciding:  # their history went with the old replica
            self._deciding[write_id] = _LOST
        self.applied, self.head = snapshot.revision, snapshot.head
        self._progress.unpark_all()
        log.info("replica rebuilt from etcd", extra={"revision": snapshot.revision, "changedRows": len(rows)})
        self._publish(AppliedWrite(snapshot.revision, "", "", rows, {}, changes))
        snapshot.done.set()

    def _publish(self, write: AppliedWrite) -> None:
        for listener in self._feed:
            listener(write)

    # -- transactions: on the pinned thread if the replica is synced, else on the Trio thread --------------------

    async def _begin(self, *, record: bool) -> tuple[WriteTxn, lmdb.Transaction]:
        assert self._running, "the writer is not running"
        if self._thread is None:
            return self._store.begin_write(record=record)
        return await self._thread.call(functools.partial(self._store.begin_write, record=record))

    async def _end(self, raw: lmdb.Transaction, *, commit: bool) -> None:
        assert self._running, "the writer is not running"
        if self._thread is None:
            _end(self._store, raw, commit)
            return
        with trio.CancelScope(shield=True):
            await self._thread.call(_end, self._store, raw, commit)

    def _new_id(self) -> str:
        return f"{self._prefix}.{next(self._ids)}"


def _end(store: Store, raw: lmdb.Transaction, commit: bool) -> None:
    try:
        if commit:
            raw.commit()
        else:
            abort_quietly(raw)
    finally:
        store.write_ended()


def _conditions(item: Queued) -> list[Compare]:
    for condition in item.conditions:
        if not isinstance(condition, Compare):
            raise TypeError(f"a replicated write's conditions are etcd compares, not {condition!r}")
    return list(item.conditions)  # type: ignore[arg-type]  # checked above


