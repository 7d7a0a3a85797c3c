"""The etcd side of a replicated write: a txn guarded by a head, and, when its answer was lost, finding out by
looking whether it committed.

Every txn that writes ``d/`` compares the mod revision of one head (the network's, or a lane's: ``keys.py``) with the
one the writer held when it ran the mutations, and puts that head with the write's id. It therefore commits only if
no other write of that head's chain came in between (on the network's head: the mutations saw the latest state,
serializable), and the head names the chain's last write. A committed txn also reads every head as it left them,
which tells the writer whether its replica now holds everything up to the txn's revision. A txn sent and not answered
(``OutcomeUnknown``) is never sent again: :func:`fence` moves the head past it with a txn of its own (guarded the
same way, so sending that again is harmless), after which the lost txn can never commit; whether it did is then read
from the head's history as the replica saw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import trio

from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.shipments import condition_holds
from controller.etcd import (
    Compare,
    CompareOp,
    CompareTarget,
    EtcdClient,
    EtcdError,
    InvalidArgument,
    KeyValue,
    NoSpace,
    Op,
    OutcomeUnknown,
    PermissionDenied,
    Put,
    Range,
    RangeResult,
    Unauthenticated,
    Unavailable,
)

__all__ = ["RETRY_PAUSE", "Committed", "Conflict", "Fenced", "GuardedResult", "Refused", "fence", "send_guarded"]

_REFUSALS = (InvalidArgument, NoSpace, PermissionDenied, Unauthenticated)
"""What etcd answers a write it refused outright: not applied, and not to be tried again."""

RETRY_PAUSE = 0.1
"""Seconds between two tries of a request etcd refused without applying it (no leader yet): an election takes a
second or so, and asking again at once only loads the members."""


@dataclass(frozen=True, slots=True)
class Committed:
    """The txn committed at ``revision``; ``heads`` are the mod revisions of every head there (by key)."""

    revision: int
    heads: dict[bytes, int]


@dataclass(frozen=True, slots=True)
class Conflict:
    """Another write came first: the head is now at ``head``."""

    head: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The head had not moved, but these conditions (by position) did not hold."""

    failed: list[int]


GuardedResult = Committed | Conflict | Refused
"""A committed txn, or why it did not commit."""


def head_compare(head_key: bytes, head: int) -> Compare:
    return Compare(head_key, CompareTarget.MOD, CompareOp.EQUAL, head)


def heads_read(keys: NetworkKeys) -> Range:
    """The read of every head (the network's and the lanes'), keys only."""
    return Range(keys.head, keys.heads_end, keys_only=True)


def heads_of(result: object) -> dict[bytes, int]:
    """Every head's mod revision, by key, from :func:`heads_read`'s result."""
    assert isinstance(result, RangeResult)
    return {kv.key: kv.mod_revision for kv in result.kvs}


def _found(result: object) -> KeyValue | None:
    assert isinstance(result, RangeResult)
    return result.first


async def send_guarded(etcd: EtcdClient, keys: NetworkKeys, head_key: bytes, ops: Sequence[Op], head: int,
                       head_value: HeadValue, conditions: Sequence[Compare], deadline: float) -> GuardedResult:
    """Send ``ops`` with the put of the head ``head_key``, if that head is still at ``head`` and every condition
    holds; try again while etcd refuses without applying, until ``deadline`` (Trio time).

    Raises:
        OutcomeUnknown: the txn was sent and not answered (by ``deadline`` at the latest), or answered with something
            this node cannot read.
        Unavailable: etcd refused it until ``deadline``, or ``deadline`` had passed; it was not applied.
        InvalidArgument, NoSpace, PermissionDenied, Unauthenticated: etcd refused it outright; it was not applied.
    """
    compares = [head_compare(head_key, head), *conditions]
    success = [*ops, Put(head_key, head_value.encode()), heads_read(keys)]
    failure: list[Op] = [Range(head_key, keys_only=True), *(Range(c.key) for c in conditions)]
    if trio.current_time() >= deadline:  # the cancellation below would cut the first try before anything is sent
        raise Unavailable("the write's deadline passed before it was sent")
    last: Unavailable | None = None
    out = False  # a try is under way: the deadline may cut it after etcd received it
    with trio.move_on_at(deadline):
        while True:
            out = True
            try:
                result = await etcd.txn(compares, success, failure)
            except OutcomeUnknown:
                raise
            except Unavailable as error:  # refused, not applied
                out = False
                last = error
                await trio.sleep(RETRY_PAUSE)
                continue
            except _REFUSALS:
                raise
            except EtcdError as error:  # an answer this node cannot read (etcd may have committed), and the like
                raise OutcomeUnknown(f"etcd's answer to a write was not understood: {error}") from error
            out = False
            if result.succeeded:
                return Committed(result.header.revision, heads_of(result.responses[-1]))
            found = _found(result.responses[0])
            now = found.mod_revision if found is not None else 0
            if now != head:
                return Conflict(now)
            return Refused([index for index, condition in enumerate(conditions)
                            if not condition_holds(condition, _found(result.responses[index + 1]))])
    if out:
        # The client's own time-out ends with this deadline, and the outermost scope catches the cancellation, so
        # the client cannot say so itself.
        raise OutcomeUnknown("a write was sent and not answered before its deadline") from last
    raise Unavailable(f"etcd refused the write until its deadline: {last}") from last


@dataclass(frozen=True, slots=True)
class Fenced:
    """The head was moved past a lost txn: by the fence itself (``by_fence``, at ``head``), or by another write
    (the head is at ``head``; 0: it is absent, a lane retired). Either way the lost txn can no longer commit; if it
    did, it is among the writes up to ``revision``, the revision of a write under ``d/`` (the fence, the head's
    latest write, or the lane's retirement), which the replica's watch brings."""

    head: int
    by_fence: bool
    revision: int


async def fence(etcd: EtcdClient, keys: NetworkKeys, head_key: bytes, head: int, fence_value: HeadValue,
                deadline: float) -> Fenced:
    """Make sure no txn guarded on ``head`` of the head ``head_key`` can commit from now on: put that head (with
    ``fence_value``) if it is still at ``head``, else learn where it is (or, a lane head gone, when its lane was
    retired). The fence is itself guarded on ``head``, so trying it again after a lost answer can only fail
    harmlessly.

    Raises:
        Unavailable: etcd did not let it be settled by ``deadline``, or refused the fence outright.
    """
    if trio.current_time() >= deadline:
        raise Unavailable("a write's outcome was to be settled after its deadline")
    last: Unavailable | None = None
    with trio.move_on_at(deadline):
        while True:
            try:
                result = await etcd.txn([head_compare(head_key, head)], [Put(head_key, fence_value.encode())],
                                        [Range(head_key, keys_only=True), Range(keys.retired, keys_only=True)])
            except Unavailable as error:  # OutcomeUnknown too: the next try tells
                last = error
                await trio.sleep(RETRY_PAUSE)
                continue
            except EtcdError as error:  # refused (out of space, say), or not understood: not settled
                raise Unavailable(f"etcd did not settle a write's outcome: {error}") from error
            if result.succeeded:
                return Fenced(result.header.revision, by_fence=True, revision=result.header.revision)
            found, mark = _found(result.responses[0]), _found(result.responses[1])
            if found is not None:
                return Fenced(found.mod_revision, by_fence=False, revision=found.mod_revision)
            # Gone since it stood at ``head``: only a lane's retirement deletes a head, and puts the mark with it.
            return Fenced(0, by_fence=False, revision=mark.mod_revision if mark is not None else result.header.revision)
    raise Unavailable(f"etcd did not settle a write's outcome before its deadline: {last}") from last
