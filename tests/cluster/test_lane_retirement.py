"""The lane heads of nodes that left are retired (``controller/cluster/lane_retirement.py``), with cluster nodes in
this process on the worker's etcd: the lanes listed are the live nodes' again, a read elsewhere still waits for the
retired lane's writes, and a node that comes back writes in its lane anew."""

from __future__ import annotations

from pathlib import Path

import trio

from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.lane_retirement import lanes_to_retire, retiring
from controller.cluster.position import ReplicaPosition
from controller.etcd import EtcdClient, EventType
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import HeldWatch, node
from tests.cluster.test_cluster_lanes import claim, put_state, state, states

KEYS = NetworkKeys("/t/")


def test_only_the_first_live_node_by_name_retires_and_only_departed_nodes_lanes() -> None:
    assert retiring({"b", "a", "c"}, "a")
    assert not retiring({"b", "a", "c"}, "b")
    assert not retiring({"b", "c"}, "a")  # a node not live (its lease lost) may be the one that left
    assert not retiring({"a"}, "")  # not announced yet
    assert lanes_to_retire(["a", "c", "d", "b"], {"a", "b"}, "a") == ["c", "d"]
    assert lanes_to_retire(["a", "c"], {"a", "b"}, "b") == []
    assert lanes_to_retire(["a", "b"], {"a", "b"}, "a") == []


def test_the_retirement_mark_is_held_once_every_write_below_it_is_applied() -> None:
    held = ReplicaPosition(KEYS.head, KEYS.lane("a"), applied=10, head=14)
    assert KEYS.parse(KEYS.retired) is None  # not a row, not a lane: nothing the replica stores
    assert KEYS.head < KEYS.retired < KEYS.lane("") + b"\0" < KEYS.heads_end  # among the heads every txn reads
    assert not held.holds({KEYS.head: 14, KEYS.retired: 12})  # the main chain above applied says nothing of lanes
    held.advanced(12)
    assert held.holds({KEYS.head: 14, KEYS.retired: 12})


async def lanes(client: EtcdClient, keys: NetworkKeys) -> list[str]:
    found = await client.range(keys.lanes, keys.heads_end, keys_only=True)
    return sorted(parsed.lane for kv in found.kvs if (parsed := keys.parse(kv.key)) and parsed.lane is not None)


async def deleted(client: EtcdClient, key: bytes, after: int) -> int:
    """The revision at which ``key`` was deleted, the first time after revision ``after``."""
    async with client.watch(key, start_revision=after + 1) as watch:
        async for update in watch:
            for event in update.events:
                if event.type is EventType.DELETE:
                    return event.kv.mod_revision
    raise AssertionError("the watch ended")


async def test_a_departed_nodes_lane_is_retired_and_a_read_elsewhere_still_waits_for_its_writes(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """c writes an identity's state in its lane while b's replica hears nothing, then stops. a (the first live node
    by name) deletes c's lane head, so the heads are a's and b's again; yet a fresh read on b waits until b holds
    c's write: the retirement mark stands for the lane's writes. Had the head simply gone, b's barrier would find
    every head it reads held and answer without c's write."""
    keys = NetworkKeys(prefix)
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        fence_a, fence_b, fence_c = [await claim(client, prefix) for _ in range(3)]
        await put_state(a, fence_a, "xa", 1)
        await put_state(b, fence_b, "xb", 1)
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        watch = HeldWatch(b)
        async with node(etcd, prefix, tmp_path, "c") as c:
            await put_state(c, fence_c, "xc", 1)
            assert await lanes(client, keys) == ["a", "b", "c"]
            before = (await client.range(keys.lane("c"))).header.revision
        with trio.fail_after(10):
            retired_at = await deleted(client, keys.lane("c"), before)
        assert await lanes(client, keys) == ["a", "b"]
        mark = (await client.range(keys.retired)).kvs
        assert mark and mark[0].mod_revision == retired_at
        assert HeadValue.decode(mark[0].value) == HeadValue("retired c", "a")  # by a, the first live node by name
        assert "xc" not in states(b)
        seen: list[bytes | None] = []

        async def read() -> None:
            await b.freshness.wait_current()
            seen.append(states(b).get("xc"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.sleep(0.3)  # the read is under way: without the mark it would have answered already
            assert seen == []
            watch.release()
        assert seen == [state("xc", 1)]


async def test_a_node_that_comes_back_writes_in_its_lane_anew(etcd: EtcdCluster, prefix: str,
                                                              tmp_path: Path) -> None:
    """b's lane was retired while it was away; started again on its data directory, b's state writes commit (the
    first one finds its head absent and starts the lane anew), and every node reads them."""
    keys = NetworkKeys(prefix)
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a:
        fence = await claim(client, prefix)
        async with node(etcd, prefix, tmp_path, "b") as b:
            await put_state(b, fence, "y", 1)
            before = (await client.range(keys.lane("b"))).header.revision
        with trio.fail_after(10):
            await deleted(client, keys.lane("b"), before)
        async with node(etcd, prefix, tmp_path, "b") as b:
            with trio.fail_after(10):
                await put_state(b, fence, "y", 2)
                await put_state(b, fence, "z", 1)
                await a.freshness.wait_fresh()
            assert await lanes(client, keys) == ["b"]  # a never wrote in its lane
            assert states(a) == states(b) == {"y": state("y", 2), "z": state("z", 1)}
