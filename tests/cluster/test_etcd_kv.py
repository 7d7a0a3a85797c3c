"""The etcd client's key-value calls and txns against a real three-member etcd."""

from __future__ import annotations

import pytest
import trio

from controller.etcd import (
    MAX_TXN_OPS,
    Compacted,
    Compare,
    CompareOp,
    CompareTarget,
    Delete,
    DeleteResult,
    EtcdClient,
    FutureRevision,
    InvalidArgument,
    Put,
    PutResult,
    Range,
    RangeResult,
    RequestTooLarge,
    TooManyOperations,
)
from tests.cluster.etcd_cluster import EtcdCluster


async def test_put_range_prefix_and_delete(client: EtcdClient, prefix: str) -> None:
    first = await client.put(f"{prefix}a", "1")
    second = await client.put(f"{prefix}a", b"2", prev_kv=True)
    # The worker's etcd is shared: other tests' writes may come between the two puts, so only the order holds.
    assert second.header.revision > first.header.revision
    assert second.prev_kv is not None and second.prev_kv.value == b"1"
    assert second.prev_kv.mod_revision == first.header.revision
    await client.put(f"{prefix}b", "3")
    await client.put(f"{prefix}c/d", "4")

    found = await client.get(f"{prefix}a")
    assert found is not None
    assert (found.value, found.version, found.create_revision, found.mod_revision) == (
        b"2", 2, first.header.revision, second.header.revision)
    assert await client.get(f"{prefix}missing") is None

    everything = await client.range(prefix, prefix=True)
    assert [kv.key for kv in everything.kvs] == [f"{prefix}{k}".encode() for k in ("a", "b", "c/d")]
    assert everything.count == 3 and not everything.more
    limited = await client.range(prefix, prefix=True, limit=2, keys_only=True)
    assert [kv.value for kv in limited.kvs] == [b"", b""]
    assert limited.more and limited.count == 3
    counted = await client.range(prefix, prefix=True, count_only=True)
    assert (counted.kvs, counted.count) == ((), 3)
    between = await client.range(f"{prefix}a", f"{prefix}c")
    assert [kv.value for kv in between.kvs] == [b"2", b"3"]
    before = await client.get(f"{prefix}a", revision=first.header.revision)
    assert before is not None and before.value == b"1"
    stale_allowed = await client.range(f"{prefix}a", serializable=True)
    assert stale_allowed.kvs[0].key == f"{prefix}a".encode()

    deleted = await client.delete_range(prefix, prefix=True, prev_kv=True)
    assert deleted.deleted == 3
    assert sorted(kv.value for kv in deleted.prev_kvs) == [b"2", b"3", b"4"]
    assert (await client.range(prefix, prefix=True)).count == 0


async def test_exactly_one_of_two_concurrent_creators_wins(etcd: EtcdCluster, prefix: str) -> None:
    """Two clients, each asking a different member first, race to create each of 30 keys with a txn guarded by
    "absent": for every key exactly one txn succeeds, and the key holds the winner's value."""
    keys = [f"{prefix}claim/{i}" for i in range(30)]
    outcomes: dict[str, list[tuple[str, bool]]] = {key: [] for key in keys}

    async def creator(name: str, endpoints: list[str]) -> None:
        async with EtcdClient(endpoints) as creator_client:
            async def claim(key: str) -> None:
                result = await creator_client.txn([Compare.absent(key)], [Put(key, name)], [Range(key)])
                outcomes[key].append((name, result.succeeded))
                if not result.succeeded:
                    assert isinstance(result.responses[0], RangeResult)
                    assert result.responses[0].kvs[0].value != name.encode()

            async with trio.open_nursery() as nursery:
                for key in keys:
                    nursery.start_soon(claim, key)

    endpoints = etcd.endpoints
    async with trio.open_nursery() as nursery:
        nursery.start_soon(creator, "first", endpoints)
        nursery.start_soon(creator, "second", endpoints[1:] + endpoints[:1])

    async with EtcdClient(endpoints) as reader:
        for key in keys:
            winners = [name for name, succeeded in outcomes[key] if succeeded]
            assert len(outcomes[key]) == 2 and len(winners) == 1, outcomes[key]
            stored = await reader.get(key)
            assert stored is not None and stored.value == winners[0].encode() and stored.version == 1


async def test_compares_on_every_target_and_operator(client: EtcdClient, prefix: str) -> None:
    key = f"{prefix}k"
    lease = await client.lease_grant(60)
    created = await client.put(key, "b", lease=lease.id)
    updated = await client.put(key, "m", lease=lease.id)
    create_revision, mod_revision = created.header.revision, updated.header.revision

    async def holds(target: CompareTarget, op: CompareOp, operand: int | str) -> bool:
        return (await client.txn([Compare(key, target, op, operand)])).succeeded

    for target, value in ((CompareTarget.MOD, mod_revision), (CompareTarget.CREATE, create_revision),
                          (CompareTarget.VERSION, 2), (CompareTarget.LEASE, lease.id)):
        assert await holds(target, CompareOp.EQUAL, value), target
        assert not await holds(target, CompareOp.NOT_EQUAL, value), target
        assert await holds(target, CompareOp.GREATER, value - 1), target
        assert not await holds(target, CompareOp.GREATER, value), target
        assert await holds(target, CompareOp.LESS, value + 1), target
        assert not await holds(target, CompareOp.LESS, value), target
    assert await holds(CompareTarget.VALUE, CompareOp.EQUAL, "m")
    assert await holds(CompareTarget.VALUE, CompareOp.GREATER, "c")
    assert await holds(CompareTarget.VALUE, CompareOp.LESS, "n")
    assert await holds(CompareTarget.VALUE, CompareOp.NOT_EQUAL, "b")
    # A compare over a range holds when it holds for every key in it.
    await client.put(f"{prefix}l", "z")
    assert (await client.txn([Compare(key, CompareTarget.VERSION, CompareOp.GREATER, 0,
                                      range_end=f"{prefix}m")])).succeeded
    assert not (await client.txn([Compare(key, CompareTarget.VALUE, CompareOp.EQUAL, "m",
                                          range_end=f"{prefix}m")])).succeeded

    result = await client.txn([Compare.unchanged(key, mod_revision)],
                              [Put(key, "n", prev_kv=True), Delete(f"{prefix}l", prev_kv=True), Range(key)])
    assert result.succeeded
    put, deleted, read = result.responses
    assert isinstance(put, PutResult) and put.prev_kv is not None and put.prev_kv.value == b"m"
    assert isinstance(deleted, DeleteResult) and deleted.deleted == 1
    assert isinstance(read, RangeResult) and read.kvs[0].value == b"n"
    assert read.header.revision == result.header.revision  # one txn, one revision
    assert not (await client.txn([Compare.unchanged(key, mod_revision)], [Put(key, "lost")])).succeeded
    await client.lease_revoke(lease.id)


async def test_etcd_limits_give_clear_errors(client: EtcdClient, prefix: str) -> None:
    most = [Put(f"{prefix}{i}", "v") for i in range(MAX_TXN_OPS)]
    assert (await client.txn([], most)).succeeded
    assert (await client.range(prefix, prefix=True, count_only=True)).count == MAX_TXN_OPS
    with pytest.raises(TooManyOperations):
        await client.txn([], [*most, Put(f"{prefix}one-more", "v")])
    with pytest.raises(RequestTooLarge):
        await client.put(f"{prefix}big", b"x" * (2 * 1024 * 1024))
    with pytest.raises(InvalidArgument) as refused:  # etcd's own refusal, mapped
        await client.txn([], [Put(f"{prefix}twice", "1"), Put(f"{prefix}twice", "2")])
    assert refused.value.code == 3
    assert await client.get(f"{prefix}twice") is None
    assert await client.get(f"{prefix}big") is None
    assert await client.get(f"{prefix}one-more") is None


async def test_reading_a_compacted_or_future_revision(etcd: EtcdCluster, client: EtcdClient, prefix: str) -> None:
    old = await client.put(f"{prefix}k", "1")
    new = await client.put(f"{prefix}k", "2")
    await etcd.compact(new.header.revision)
    with pytest.raises(Compacted):
        await client.get(f"{prefix}k", revision=old.header.revision)
    with pytest.raises(FutureRevision):
        await client.get(f"{prefix}k", revision=new.header.revision + 1_000_000)
    current = await client.get(f"{prefix}k", revision=new.header.revision)
    assert current is not None and current.value == b"2"


async def test_the_client_counts_its_requests_by_call(etcd: EtcdCluster, prefix: str) -> None:
    """Before its first request that needs the leader, the client asks the members' status in order until the one
    that answers leads (``controller/etcd/routing.py``): those are counted too."""
    async with EtcdClient(etcd.endpoints) as client:
        await client.put(f"{prefix}n", "1")
        await client.get(f"{prefix}n")
        await client.get(f"{prefix}n", serializable=True)
        await client.txn([], [Put(f"{prefix}n", "2")], [])
        await client.txn([], [Range(f"{prefix}n")], [])
        await client.txn([], [Range(f"{prefix}n", serializable=True)], [])
        assert client.requests == {"kv/put": 1, "kv/range": 1, "kv/range-serializable": 1, "kv/txn": 1,
                                   "kv/txn-read": 1, "kv/txn-serializable": 1,
                                   "maintenance/status": etcd.endpoints.index(client.current_endpoint) + 1}
