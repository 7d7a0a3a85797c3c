"""A cluster node's commit step: batches run optimistically on the local replica and commit to etcd, on the writer's
one task, which also applies what the replica's watch brings (``controller/cluster/local_replica.py``) between
batches.

A batch runs in one LMDB write transaction of the replica (each mutation nested, as on a single node), which records
what it writes. The batch's write set then goes to etcd in one txn (or a few, within etcd's limits) guarded by the
network's head (``controller/cluster/head_txns.py``). Committed at revision R: the same LMDB transaction commits,
and the callers are answered (read-your-writes: a write is answered once etcd holds it and this replica does). The
head had moved (another node wrote since this replica's state): the transaction is dropped, the replica catches up
to the head, and the batch runs again, so every rule the mutations check held against the latest state.

A batch that only writes rows of the owned kinds, each mutation under its owner's fences (the identity actors'
state: :func:`~controller.cluster.shipments.in_lane`), goes in this node's lane instead: guarded by the node's own
lane head, it never meets another node's writes (which touch those rows only to repair or drop them: the replica
keeps the later of the two, ``ReplicaPosition.shadows``), and the owner's fences keep a former owner out. Where the
replica then stands is kept by :class:`~controller.cluster.position.ReplicaPosition`.

Each mutation is whole in one txn; one too large for any is refused (413 ``WRITE_TOO_LARGE``). A lost answer is
settled by looking, never by sending again. etcd refusing writes (no quorum) until the batch's deadline, or refusing
one outright (out of space): 503 ``CLUSTER_UNAVAILABLE``, nothing written (``applied: no``); a txn the deadline cut
off, or whose answer could not be settled in time: 503, ``applied: unknown``; the mutations of a batch's txns that
committed before it broke off are answered as written, or, should the replica not show them within
:data:`~controller.cluster.write_bounds.SHOW_GRACE`, 503 ``applied: yes``. Whatever happens, the replica's
transaction is ended and every caller is answered in time (``controller/cluster/write_bounds.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Protocol

import lmdb
import trio

from controller.cluster.freshness import Ride
from controller.cluster.head_txns import Committed, Conflict, GuardedResult, Refused, fence, send_guarded
from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.local_replica import LOST, LocalReplica
from controller.cluster.replica_apply import APPLIED_META, HEAD_META, AppliedWrite
from controller.cluster.shipments import Limits, in_lane, merged, plan_txns, txn_ops
from controller.cluster.turns import busy, give_turns
from controller.cluster.write_bounds import Bounds, batch_bounds
from controller.data.commit_step import Answer, ConditionFailed, Queued
from controller.data.local_commit import apply_yielding
from controller.errors import ApiError, nested_cause
from controller.etcd import Compare, Delete, EtcdClient, EtcdError, Op, OutcomeUnknown, Put, Unavailable
from storage.batch import Outcome
from storage.store import WriteTxn

__all__ = ["ReplicatedCommit"]

log = logging.getLogger("tollgate.cluster")

def _unavailable(error: Unavailable) -> ApiError:
    """503: etcd refused the write (it was not applied), or received it without answering (it may be applied once
    the quorum is back, whole: each mutation is one txn)."""
    applied = "unknown" if isinstance(error, OutcomeUnknown) else "no"
    return ApiError("CLUSTER_UNAVAILABLE", nested_cause(str(error), "CLUSTER_UNAVAILABLE", {"applied": applied}))


def _unshown(error: Unavailable) -> ApiError:
    """503 for a write etcd committed that this node's replica did not apply in time: it is written."""
    return ApiError("CLUSTER_UNAVAILABLE", nested_cause(f"etcd holds the write; this node's replica did not show it "
                                                        f"in time: {error}", "CLUSTER_UNAVAILABLE", {"applied": "yes"}))


def _refused(error: EtcdError) -> ApiError:
    """503 for a write etcd refused (out of space, say): it was not applied."""
    return ApiError("CLUSTER_UNAVAILABLE", nested_cause(f"etcd refused the write: {error}", "CLUSTER_UNAVAILABLE",
                                                        {"applied": "no"}))


class Rides(Protocol):
    """What the writer does for the read barrier (``controller/cluster/freshness.py``)."""

    def ride(self) -> Ride | None:
        """The requests waiting for a quorum read now, if any, for the txn about to be sent to answer."""

    def writing(self) -> AbstractContextManager[None]:
        """Around the commit of a batch: the barrier's own read waits for its txns."""


class ReplicatedCommit:
    """The :class:`~controller.data.commit_step.CommitStep` of a cluster node over its replica ``local``."""

    def __init__(self, local: LocalReplica, etcd: EtcdClient, keys: NetworkKeys, *, node: str, limits: Limits,
                 barrier: Rides, owned_kinds: frozenset[str] = frozenset()) -> None:
        """``barrier``: the node's read barrier, whose waiting requests the heads each txn reads answer."""
        self._local = local
        self._barrier = barrier
        self._etcd = etcd
        self._keys = keys
        self._limits = limits
        self._owned_kinds = owned_kinds
        self._node = node
        self._ids = itertools.count()
        self._prefix = os.urandom(6).hex()
        self._troubled = False  # etcd failed the last batch it was asked about
        self._failing = False  # etcd failed a request of the batch under way
        self.conflicts = 0  # batches that found the head moved by another node's write, and ran again

    @property
    def node(self) -> str:
        """The node named in the head of every write, whose lane this node's lane writes go in."""
        return self._node

    @node.setter
    def node(self, name: str) -> None:  # the node's name, once known
        if name != self._node:
            self._node = name
            self._local.position.lane_key = self._keys.lane(name)
            self._local.position.lane_moved(0)

    def attach(self, wake: Callable[[], None]) -> None:
        self._local.attach(wake)

    def serving(self) -> AbstractAsyncContextManager[None]:
        return self._local.serving()

    async def gather(self) -> None:
        """Before the writer takes a batch: if any other task is runnable, give the runnable tasks their turns first
        (:func:`~controller.cluster.turns.give_turns`), so that the writes they are about to queue join the
        batch (a posture report's write is queued a few task steps after its request is read: handler, actor).
        Each batch is an etcd txn, replicated, fsynced and watched by every node, so fewer and fuller txns leave
        etcd's members and the nodes more of the machine. With nothing else runnable a lone write waits for
        nothing. The read barrier holds its read back meanwhile, as while a batch commits, for the batch's txn to
        answer it."""
        if not busy():
            return
        # Shielded: the writer has taken the batch's first write from its queue, and a batch taken is carried through.
        with trio.CancelScope(shield=True), self._barrier.writing():
            await give_turns()

    async def commit(self, batch: Sequence[Queued], answer: Answer) -> None:
        # Shielded: a batch taken from the queue is carried through (its deadline bounds it) and answered.
        with trio.CancelScope(shield=True), self._barrier.writing():
            await self._commit(batch, answer)

    async def _commit(self, batch: Sequence[Queued], answer: Answer) -> None:
        await self._local.apply_pending()
        if not batch:
            answer([], 0.0)
            return
        started = time.perf_counter()
        outcomes: list[Outcome | None] = [None] * len(batch)
        todo = list(range(len(batch)))
        now = trio.current_time()
        oldest = min((item.queued_at for item in batch if item.queued_at is not None), default=now)
        bounds = batch_bounds(now, oldest, self._troubled)
        self._failing = False
        try:
            if bounds is None:
                raise Unavailable("etcd was unavailable for as long as the write may wait")
            if not await self._local.hold_writes(bounds.send):
                raise Unavailable("this node's replica was being rebuilt from etcd for as long as the write may wait")
            try:
                while todo:
                    settled = await self._attempt([batch[i] for i in todo], bounds)
                    for position, outcome in settled.items():
                        outcomes[todo[position]] = outcome
                    todo = [i for i in todo if outcomes[i] is None]
            finally:
                self._local.release_writes()
        except Unavailable as error:
            log.warning("a write found etcd unavailable", extra={"error": str(error)})
            for i in todo:
                outcomes[i] = Outcome(error=_unavailable(error))
        except Exception as error:  # a failure that stops the writer: its callers are answered first
            for i in todo:
                outcomes[i] = Outcome(error=error)
            answer([outcome if outcome is not None else Outcome() for outcome in outcomes],
                   time.perf_counter() - started)
            raise
        if bounds is not None:  # a batch answered untried leaves etcd as it found it: in trouble
            self._troubled = self._failing
        answer([outcome if outcome is not None else Outcome() for outcome in outcomes], time.perf_counter() - started)

    async def _attempt(self, items: Sequence[Queued], bounds: Bounds) -> dict[int, Outcome]:
        """Run ``items`` once on the replica and try to commit them; the outcomes settled (by position). Those left
        out run again: another node wrote first, or a txn before theirs failed. Whatever happens, the replica's
        transaction is ended before this returns or raises."""
        txn, raw = await self._local.begin(record=True)
        opened = _Opened(self._local, raw)
        try:
            return await self._run(items, txn, opened, bounds)
        finally:
            await opened.end(commit=False)  # a no-op once committed or ended

    async def _run(self, items: Sequence[Queued], txn: WriteTxn, opened: _Opened,
                   bounds: Bounds) -> dict[int, Outcome]:
        outcomes, broken = await apply_yielding(self._local.store, txn, [item.mutation for item in items])
        conditions = [_conditions(item) for item in items]  # complete once each mutation has begun
        if broken is not None:
            return {i: Outcome(error=broken) for i in range(len(items))}
        writes = [outcome.writes if outcome.error is None else None for outcome in outcomes]
        plan = plan_txns(self._keys, writes, [len(c) for c in conditions], self._limits)
        if plan.too_large:
            for index in plan.too_large:
                refused = writes[index]
                assert refused is not None
                log.warning("a write too large for one etcd txn was refused", extra={
                    "rows": dict(Counter(kind for kind, _ in refused.rows)), "meta": len(refused.meta),
                    "conditions": len(conditions[index])})
            cause = nested_cause(f"etcd takes at most {self._limits.max_txn_ops} operations and "
                                 f"{self._limits.max_request_bytes} bytes in one transaction", "WRITE_TOO_LARGE")
            return {i: Outcome(error=ApiError("WRITE_TOO_LARGE", cause)) for i in plan.too_large}
        if not plan.txns:  # nothing written: nothing to ship
            return dict(enumerate(outcomes))
        lane = in_lane(writes, conditions, self._owned_kinds)
        position = self._local.position
        head_key = position.lane_key if lane else self._keys.head
        at = compared = position.lane_expected if lane else position.head  # the head once the txns so far committed
        done: list[int] = []
        sent: list[str] = []
        committed: Committed | None = None
        revisions: list[int] = []
        written: list[list[bytes]] = []  # the keys each committed txn wrote
        try:
            for number, part in enumerate(plan.txns):
                write_id = self._new_id()
                sent.append(write_id)
                self._local.announce([write_id])
                ops = txn_ops(self._keys, merged([writes[i] for i in part]))
                guards = [condition for i in part for condition in conditions[i]]
                try:
                    result = await self._send(head_key, ops, at, HeadValue(write_id, self.node), guards, bounds.send)
                except OutcomeUnknown:
                    await opened.end(commit=False)
                    if lane:  # it may have committed, and will not be in the replica before the watch brings it
                        position.lane_skipped()
                    try:
                        revision = await self._settle(write_id, head_key, at, bounds.send)
                    except OutcomeUnknown as unknown:
                        settled = await self._partial(outcomes, done, at, lane, bounds)
                        settled.update((i, Outcome(error=_unavailable(unknown))) for i in part)
                        return settled  # the txns after it were not sent: they run again
                    if revision is not None:
                        done, at = done + part, revision
                    return await self._partial(outcomes, done, at, lane, bounds)
                except Unavailable:
                    await opened.end(commit=False)
                    if done:
                        return await self._partial(outcomes, done, at, lane, bounds)
                    raise
                except EtcdError as error:  # refused, not applied (etcd out of space, say): nor are the txns after
                    await opened.end(commit=False)
                    log.warning("etcd refused a write", extra={"error": str(error)})
                    settled = await self._partial(outcomes, done, at, lane, bounds)
                    refusal = Outcome(error=_refused(error))
                    settled.update((i, refusal) for later in plan.txns[number:] for i in later)
                    return settled
                if isinstance(result, Committed):
                    done, at, committed = done + part, result.revision, result
                    revisions.append(at)
                    written.append(_keys_written(ops))
                    if lane:
                        position.lane_shipped(at)
                    continue
                await opened.end(commit=False)
                settled = await self._partial(outcomes, done, at, lane, bounds)
                if isinstance(result, Conflict):
                    if lane:  # the lane head was moved before this process, or by a fence: not another node's write
                        position.lane_moved(result.head)
                    else:
                        self.conflicts += 1
                        with contextlib.suppress(Unavailable):  # the next run meets the head again, or the deadline
                            await self._local.catch_up(result.head, bounds.send, main=True)
                elif isinstance(result, Refused):
                    owners = [position for position in part for _ in conditions[position]]
                    unmet = ConditionFailed("a condition of the write did not hold")
                    # None named (a condition judged here otherwise than etcd judged it): every fenced one fails,
                    # rather than the batch running again until its deadline.
                    failed = {owners[index] for index in result.failed} or {i for i in part if conditions[i]}
                    settled.update((index, Outcome(error=unmet)) for index in failed or part)
                return settled
            assert committed is not None
            await self._commit_local(txn, opened, lane, compared, revisions, committed.heads, written)
            return dict(enumerate(outcomes))
        finally:
            # Applied by now, or never to be: nothing is left to recognise as this node's own.
            self._local.forget(sent)

    async def _send(self, head_key: bytes, ops: Sequence[Op], at: int, head_value: HeadValue,
                    guards: Sequence[Compare], deadline: float) -> GuardedResult:
        """One guarded txn (:func:`send_guarded`), which answers the read barrier's waiting round if it commits."""
        ride = self._barrier.ride()
        result: GuardedResult | None = None
        late = trio.current_time() >= deadline  # then nothing is sent: no failure of etcd's
        try:
            result = await send_guarded(self._etcd, self._keys, head_key, ops, at, head_value, guards, deadline)
            return result
        except EtcdError:
            self._failing = self._failing or not late
            raise
        finally:
            if ride is not None:
                ride(result.heads if isinstance(result, Committed) else None)

    async def _commit_local(self, txn: WriteTxn, opened: _Opened, lane: bool, compared: int,
                            revisions: list[int], heads: dict[bytes, int], written: list[list[bytes]]) -> None:
        """Etcd holds the batch (its txns committed at ``revisions`` writing the keys ``written``, the first guarded
        on ``compared``, the last leaving the heads at ``heads``): commit the same transaction to the replica,
        recording where it stands."""
        shipped = txn.writes
        position = self._local.position
        # The position the commit records, worked out on a copy: the live one moves only once the commit is durable.
        after = position.copy()
        after.committed(lane=lane, compared=compared, revisions=revisions, heads=heads, written=written)
        if after.head != position.head:
            txn.set_meta(HEAD_META, after.head, local=True)
        txn.set_meta(APPLIED_META, after.applied, local=True)  # the watch may have moved it on since it was recorded
        await opened.end(commit=True)
        position.committed(lane=lane, compared=compared, revisions=revisions, heads=heads, written=written)
        self._local.moved_on()
        if shipped is not None:
            self._local.publish(AppliedWrite(revisions[-1], "", self.node, dict(shipped.rows), dict(shipped.meta),
                                             local=True))

    async def _partial(self, outcomes: list[Outcome], done: list[int], at: int, lane: bool,
                       bounds: Bounds) -> dict[int, Outcome]:
        """Mutations ``done`` were committed, the last at revision ``at`` (in the lane if ``lane``), by txns of their
        own before the batch broke off: answered once the replica has applied them (its watch brings them, and
        their callers' listeners announce them), or, should it not by ``bounds.show``, 503 saying that etcd holds
        them."""
        if not done:
            return {}
        if lane:
            self._local.position.lane_skipped()
        try:
            await self._local.catch_up(at, bounds.show, main=not lane)
        except Unavailable as error:
            return dict.fromkeys(done, Outcome(error=_unshown(error)))
        return {i: outcomes[i] for i in done}

    async def _settle(self, write_id: str, head_key: bytes, at: int, deadline: float) -> int | None:
        """The revision of the txn ``write_id``, guarded on ``at`` of the head ``head_key`` and lost, or None if it
        did not commit: fence that head past it, let the replica apply every write up to where the fence found the
        head (or, the head gone, the lane's retirement: :class:`Fenced`), and look whether it saw the write go
        by. Once seen, the write is committed whatever the settling met after.

        Raises:
            OutcomeUnknown: whether it committed could not be learned by ``deadline``.
        """
        self._local.look_for(write_id)
        main = head_key == self._keys.head
        failure: Unavailable | None = None
        try:
            fenced = await fence(self._etcd, self._keys, head_key, at, HeadValue(self._new_id(), self.node), deadline)
            if not main:
                self._local.position.lane_moved(fenced.head)
            await self._local.catch_up(fenced.revision, deadline, main=False)
        except Unavailable as error:  # OutcomeUnknown too
            failure = error
            self._failing = True
        finally:
            revision = self._local.seen(write_id)
        if revision == LOST:
            raise OutcomeUnknown("the replica was rebuilt before a write's outcome could be seen")
        if revision is None and failure is not None:
            if isinstance(failure, OutcomeUnknown):
                raise failure
            raise OutcomeUnknown(f"etcd received a write and its outcome could not be learned: {failure}") from failure
        return revision

    def _new_id(self) -> str:
        return f"{self._prefix}.{next(self._ids)}"


class _Opened:
    """The replica's write transaction of one run of a batch, ended exactly once."""

    def __init__(self, local: LocalReplica, raw: lmdb.Transaction) -> None:
        self._local = local
        self._raw: lmdb.Transaction | None = raw

    async def end(self, *, commit: bool) -> None:
        """Commit or abort it; nothing if it has ended."""
        raw, self._raw = self._raw, None
        if raw is not None:
            await self._local.end(raw, commit=commit)


def _keys_written(ops: Sequence[Op]) -> list[bytes]:
    """The keys a txn's puts and single-key deletes wrote (a range delete only clears the event log's old rows)."""
    return [op.key for op in ops
            if isinstance(op.key, bytes) and (isinstance(op, Put) or (isinstance(op, Delete) and op.range_end is None))]


def _conditions(item: Queued) -> list[Compare]:
    for condition in item.conditions:
        if not isinstance(condition, Compare):
            raise TypeError(f"a replicated write's conditions are etcd compares, not {condition!r}")
    return list(item.conditions)  # type: ignore[arg-type]  # checked above
