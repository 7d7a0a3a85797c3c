"""A batch's write sets as etcd txns, within etcd's limits, and the conditions a txn carries, as plain functions.

A batch goes to etcd as few txns as etcd's limits allow (``--max-txn-ops``, 128 by default, counting the head's put and
the read of the heads that follows it, and the failure branch's reads; ``--max-request-bytes``, 1.5 MiB by default):
consecutive mutations share a txn, each mutation whole in one, and one too large for any txn is refused on its own. A
key several mutations of one txn wrote appears once, with the last value (etcd refuses a key twice in a txn); a kind
cleared up to a key is one range delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.cluster.keys import NetworkKeys
from controller.etcd import Compare, CompareOp, CompareTarget, Delete, KeyValue, Op, Put
from storage.write_set import WriteSet

__all__ = ["Limits", "Plan", "condition_holds", "in_lane", "merged", "plan_txns", "txn_ops"]

# Protobuf framing of one operation in etcd's log, generously (the etcd client's own estimate is 24 per part).
_OP_OVERHEAD = 64
# Room kept for the compares, the head's put and the request's own framing.
_TXN_OVERHEAD = 4096
_MARKER_OPS = 2  # the success branch's own operations: the head's put and the heads' read
# A condition's bytes, generously: its compare (key and operand) and its read in the failure branch (the key again).
_CONDITION_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """etcd's limits as its members are configured: operations per txn and bytes per request."""

    max_txn_ops: int = 128
    max_request_bytes: int = 1536 * 1024


@dataclass(frozen=True, slots=True)
class Plan:
    """Which mutations (by position) go to etcd together, txn by txn in order, and which are too large for any."""

    txns: list[list[int]]
    too_large: list[int]


def _cost(keys: NetworkKeys, writes: WriteSet) -> dict[bytes, int]:
    """The etcd keys a write set puts or deletes, each with the bytes shipping it takes."""
    framing = len(keys.data) + _OP_OVERHEAD
    costs = {keys.row(kind, row_id): framing + len(kind) + len(row_id) + (len(data) if data else 0)
             for (kind, row_id), data in writes.rows.items()}
    costs.update((keys.meta(key), framing + len(key) + (len(data) if data else 0)) for key, data in writes.meta.items())
    # One range delete per kind.
    costs.update((b"\0cleared/" + kind.encode(), framing + len(kind) + len(last))
                 for kind, last in writes.cleared.items())
    return costs


def plan_txns(keys: NetworkKeys, writes: Sequence[WriteSet | None], conditions: Sequence[int],
              limits: Limits) -> Plan:
    """Group the mutations that wrote something into txns. ``writes[i]``: what mutation ``i`` wrote (None or empty:
    nothing to ship); ``conditions[i]``: how many conditions it carries (each a compare and a read in the failure
    branch)."""
    budget_bytes = limits.max_request_bytes - _TXN_OVERHEAD
    txns: list[list[int]] = []
    too_large: list[int] = []
    current: list[int] = []
    costs: dict[bytes, int] = {}  # the current txn's keys, each with the cost of its last value (merged())
    size = 0
    reads = 1  # the failure branch reads the head back
    for index, (written, carried) in enumerate(zip(writes, conditions, strict=True)):
        if not written:
            continue
        own = _cost(keys, written)
        own_size = sum(own.values()) + carried * _CONDITION_BYTES
        # The success branch holds every key once plus the head's put and the heads' read; the failure branch the
        # head and each condition's key.
        if len(own) + _MARKER_OPS > limits.max_txn_ops or 1 + carried > limits.max_txn_ops or own_size > budget_bytes:
            too_large.append(index)
            continue
        # A key written again counts once; every condition counts.
        added = sum(cost - costs.get(key, 0) for key, cost in own.items()) + carried * _CONDITION_BYTES
        fits = (len(costs.keys() | own.keys()) + _MARKER_OPS <= limits.max_txn_ops
                and reads + carried <= limits.max_txn_ops and size + added <= budget_bytes)
        if current and not fits:
            txns.append(current)
            current, costs, size, reads = [], {}, 0, 1
            added = own_size
        current.append(index)
        costs.update(own)
        size += added
        reads += carried
    if current:
        txns.append(current)
    return Plan(txns, too_large)


def in_lane(writes: Sequence[WriteSet | None], conditions: Sequence[Sequence[Compare]],
            owned_kinds: frozenset[str]) -> bool:
    """Whether a batch may go in its node's lane, unordered against other nodes' writes: it writes something, and
    every mutation that writes is fenced (it carries conditions: an owner's claims) and writes only rows of
    ``owned_kinds``, rows that only their owner writes, from what it holds rather than from what it reads."""
    wrote = False
    for written, fences in zip(writes, conditions, strict=True):
        if not written:
            continue
        if not fences or written.meta or written.cleared or any(kind not in owned_kinds for kind, _ in written.rows):
            return False
        wrote = True
    return wrote


def merged(writes: Sequence[WriteSet | None]) -> WriteSet:
    """One write set holding what ``writes`` wrote in order: a later write to a key wins."""
    total = WriteSet()
    for written in writes:
        if written:
            total.absorb(written)
    return total


def txn_ops(keys: NetworkKeys, writes: WriteSet) -> list[Op]:
    """The puts and deletes that ship ``writes`` (without the head's put)."""
    ops: list[Op] = [Delete(keys.row(kind, ""), range_end=keys.row(kind, last) + b"\0")
                     for kind, last in writes.cleared.items()]
    for (kind, row_id), data in writes.rows.items():
        key = keys.row(kind, row_id)
        ops.append(Delete(key) if data is None else Put(key, data))
    for name, data in writes.meta.items():
        key = keys.meta(name)
        ops.append(Delete(key) if data is None else Put(key, data))
    return ops


def condition_holds(condition: Compare, found: KeyValue | None) -> bool:
    """Whether ``condition`` holds of the key as a read found it (None: absent), as etcd would judge it; for the
    failed txn whose compares are to be told apart."""
    if found is None and condition.target is CompareTarget.VALUE:
        return False  # etcd fails a compare of the value of a key that does not exist, whatever the operand
    kv = found if found is not None else KeyValue()
    actual: int | bytes
    match condition.target:
        case CompareTarget.MOD:
            actual = kv.mod_revision
        case CompareTarget.CREATE:
            actual = kv.create_revision
        case CompareTarget.VERSION:
            actual = kv.version
        case CompareTarget.LEASE:
            actual = kv.lease
        case CompareTarget.VALUE:
            actual = kv.value
    operand = condition.operand.encode() if isinstance(condition.operand, str) else condition.operand
    if isinstance(actual, bytes) != isinstance(operand, bytes):
        return False
    match condition.op:
        case CompareOp.EQUAL:
            return actual == operand
        case CompareOp.NOT_EQUAL:
            return actual != operand
        case CompareOp.GREATER:
            return actual > operand  # type: ignore[operator]
        case CompareOp.LESS:
            return actual < operand  # type: ignore[operator]
    return False
