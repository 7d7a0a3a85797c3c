"""The etcd side of a replicated write: a txn guarded by the head, and, when its answer was lost, finding out by
looking whether it committed.

Every txn that writes ``d/`` compares the head's mod revision with the one the writer's replica held when it ran the
mutations, and puts the head with the write's id. It therefore commits only if no other write came in between (the
mutations saw the latest state: serializable), and the head names the last write. A txn sent and not answered
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
    KeyValue,
    Op,
    OutcomeUnknown,
    Put,
    Range,
    RangeResult,
    Unavailable,
)

__all__ = ["RETRY_PAUSE", "Conflict", "Fenced", "GuardedResult", "Refused", "fence", "send_guarded"]

RETRY_PAUSE = 0.1
"""Seconds between two tries of a request etcd refused without applying it (no leader yet): an election takes a
second or so, and asking again at once only loads the members."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """Another write came first: the head is now at ``head``."""

    head: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The head had not moved, but these conditions (by position) did not hold."""

    failed: list[int]


GuardedResult = int | Conflict | Refused
"""A committed txn's revision, or why it did not commit."""


def head_compare(keys: NetworkKeys, head: int) -> Compare:
    return Compare(keys.head, CompareTarget.MOD, CompareOp.EQUAL, head)


def _found(result: object) -> KeyValue | None:
    assert isinstance(result, RangeResult)
    return result.kvs[0] if result.kvs else None


async def send_guarded(etcd: EtcdClient, keys: NetworkKeys, ops: Sequence[Op], head: int, head_value: HeadValue,
                       conditions: Sequence[Compare], deadline: float) -> GuardedResult:
    """Send ``ops`` with the head's put, if the head is still at ``head`` and every condition holds; try again
    while etcd refuses without applying, until ``deadline`` (Trio time).

    Raises:
        OutcomeUnknown: the txn was sent and not answered (by ``deadline`` at the latest).
        Unavailable: etcd refused it until ``deadline``; it was not applied.
    """
    compares = [head_compare(keys, head), *conditions]
    success = [*ops, Put(keys.head, head_value.encode())]
    failure: list[Op] = [Range(keys.head, keys_only=True), *(Range(c.key) for c in conditions)]
    last: Unavailable | None = None
    with trio.move_on_at(deadline):
        while True:
            try:
                result = await etcd.txn(compares, success, failure)
            except OutcomeUnknown:
                raise
            except Unavailable as error:
                last = error
                await trio.sleep(RETRY_PAUSE)
                continue
            if result.succeeded:
                return result.header.revision
            found = _found(result.responses[0])
            now = found.mod_revision if found is not None else 0
            if now != head:
                return Conflict(now)
            return Refused([index for index, condition in enumerate(conditions)
                            if not condition_holds(condition, _found(result.responses[index + 1]))])
    raise Unavailable(f"etcd refused the write until its deadline: {last}") from last


@dataclass(frozen=True, slots=True)
class Fenced:
    """The head was moved past a lost txn: by the fence itself (``by_fence``, at ``head``), or by another write
    (the head is at ``head``). Either way the lost txn can no longer commit."""

    head: int
    by_fence: bool


async def fence(etcd: EtcdClient, keys: NetworkKeys, head: int, fence_value: HeadValue, deadline: float) -> Fenced:
    """Make sure no txn guarded on ``head`` can commit from now on: put the head (with ``fence_value``) if it is
    still at ``head``, else learn where it is. The fence is itself guarded on ``head``, so trying it again after a
    lost answer can only fail harmlessly.

    Raises:
        Unavailable: etcd did not let it be settled by ``deadline``.
    """
    last: Unavailable | None = None
    with trio.move_on_at(deadline):
        while True:
            try:
                result = await etcd.txn([head_compare(keys, head)], [Put(keys.head, fence_value.encode())],
                                        [Range(keys.head, keys_only=True)])
            except Unavailable as error:  # OutcomeUnknown too: the next try tells
                last = error
                await trio.sleep(RETRY_PAUSE)
                continue
            if result.succeeded:
                return Fenced(result.header.revision, by_fence=True)
            found = _found(result.responses[0])
            return Fenced(found.mod_revision if found is not None else 0, by_fence=False)
    raise Unavailable(f"etcd did not settle a write's outcome before its deadline: {last}") from last
