"""Plain functions of cluster mode, without etcd: shard placement and the write set's range clears."""

from __future__ import annotations

from controller.cluster.keys import NetworkKeys
from controller.cluster.shards import SHARDS, desired_owner, shard_of
from controller.cluster.shipments import Limits, merged, plan_txns, txn_ops
from controller.etcd import Delete, Put
from storage.write_set import WriteSet


def test_every_node_names_the_same_owner_and_a_leaving_node_moves_only_its_shards() -> None:
    three = ["a", "b", "c"]
    owners = {shard: desired_owner(shard, three) for shard in range(SHARDS)}
    assert owners == {shard: desired_owner(shard, reversed(three)) for shard in range(SHARDS)}
    assert set(owners.values()) == set(three)
    assert all(sum(owner == name for owner in owners.values()) >= SHARDS // 6 for name in three)
    after = {shard: desired_owner(shard, ["a", "b"]) for shard in range(SHARDS)}
    assert {shard for shard in range(SHARDS) if after[shard] != owners[shard]} == \
        {shard for shard, owner in owners.items() if owner == "c"}
    assert desired_owner(0, []) is None
    assert shard_of("some-identity") == shard_of("some-identity") and 0 <= shard_of("x") < SHARDS


def test_a_range_clear_ships_as_one_delete_and_covers_what_it_clears() -> None:
    keys = NetworkKeys("/t/")
    batch = WriteSet()
    first = WriteSet()
    first.rows[("events", "00000000000000000001")] = b"e1"
    batch.absorb(first)
    trim = WriteSet()
    trim.clear_through("events", "00000000000000000300")
    trim.rows[("events", "00000000000000000301")] = b"e301"
    batch.absorb(trim)
    assert batch.rows == {("events", "00000000000000000301"): b"e301"}  # the first row went with the range
    assert batch.cleared == {"events": "00000000000000000300"}
    ops = txn_ops(keys, batch)
    assert ops[0] == Delete(keys.row("events", ""), range_end=keys.row("events", "00000000000000000300") + b"\0")
    assert ops[1:] == [Put(keys.row("events", "00000000000000000301"), b"e301")]
    # Hundreds of rows cleared cost one operation of etcd's budget.
    assert plan_txns(keys, [batch], [0], Limits(max_txn_ops=4)).txns == [[0]]  # 2 keys, the head and the heads


def test_a_row_several_mutations_of_a_txn_rewrite_counts_once_with_its_last_value() -> None:
    """The writes of one batch share an event row, each putting it again longer: a txn ships the last value once,
    so the plan counts its bytes once."""
    keys = NetworkKeys("/t/")
    writes = []
    for index in range(1, 6):
        written = WriteSet()
        written.rows[("identities", f"id{index}")] = b"i" * 100
        written.rows[("events", "00000000000000000001")] = b"e" * (1000 * index)  # the shared row, growing
        writes.append(written)
    limits = Limits(max_txn_ops=128, max_request_bytes=4096 + 8000)  # room for the last value, not for the sum
    plan = plan_txns(keys, writes, [0] * 5, limits)
    assert plan.txns == [[0, 1, 2, 3, 4]] and not plan.too_large
    ops = txn_ops(keys, merged(writes))
    assert Put(keys.row("events", "00000000000000000001"), b"e" * 5000) in ops and len(ops) == 6
    # Past the budget, the next txn starts afresh.
    assert plan_txns(keys, writes, [0] * 5, Limits(max_txn_ops=128, max_request_bytes=4096 + 5300)).txns == \
        [[0, 1, 2, 3], [4]]
