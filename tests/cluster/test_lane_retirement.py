"""The lane heads of nodes that left are retired (``controller/cluster/lane_retirement.py``), with cluster nodes in
this process on the worker's etcd: the lanes listed are the live nodes' again, a read elsewhere still waits for the
retired lane's writes, a node that comes back (or whose lane was retired while it ran) writes in its lane anew, and a
lane write whose answer was lost before its lane was retired is still found committed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import trio
import trio.testing

from controller.cluster.head_txns import heads_of, heads_read
from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.lane_retirement import LaneRetirement, lanes_to_retire, retiring
from controller.cluster.position import ReplicaPosition
from controller.etcd import Compare, Delete, EtcdClient, EventType, Op, OutcomeUnknown, Put, TxnResult
from controller.posture.state import STATE_KIND
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import HeldWatch, local_of, node
from tests.cluster.test_cluster_lanes import claim, client_of, commit_of, put_state, state, states

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
    assert KEYS.head < KEYS.retired < KEYS.lane("a") < KEYS.heads_end  # among the heads every txn reads
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
    by name) deletes c's lane head, so the heads are a's and b's again, and the mark; b does not hold the mark until
    it has applied c's write, so its read barrier waits for it. Had the head simply gone, b would hold every head
    its barrier reads, and answer a read without c's write."""
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
        # What b's read barrier reads now: the mark is among the heads, and b does not hold it yet.
        read = heads_read(keys)
        heads = heads_of(await client.range(read.key, read.range_end, keys_only=True))
        assert heads.keys() == {keys.head, keys.lane("a"), keys.lane("b"), keys.retired}
        assert not local_of(b).position.holds(heads)
        watch.release()
        with trio.fail_after(10):
            await b.freshness.wait_current()
        assert local_of(b).position.holds(heads) and states(b)["xc"] == state("xc", 1)


async def test_a_node_that_comes_back_writes_in_its_lane_anew(etcd: EtcdCluster, prefix: str,
                                                              tmp_path: Path) -> None:
    """b's lane was retired while it was away; started again on its data directory, b's state writes commit (a new
    process starts its lane from an absent head), and every node reads them."""
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


async def retire(client: EtcdClient, keys: NetworkKeys, name: str) -> None:
    """Retire ``name``'s lane as the first live node would once ``name``'s lease had lapsed."""
    mark = HeadValue(f"retired {name}", "t").encode()
    result = await client.txn([], [Delete(keys.lane(name)), Put(keys.retired, mark)])
    assert result.succeeded


async def test_a_running_node_whose_lane_was_retired_starts_it_anew(etcd: EtcdCluster, prefix: str,
                                                                    tmp_path: Path) -> None:
    """b's lane is retired while b runs (as when its lease lapsed and a took it for gone): b's next state write meets
    the absent head, learns it, and commits; a reads it fresh, and b's own reads are not held up."""
    keys = NetworkKeys(prefix)
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        fence = await claim(client, prefix)
        await put_state(b, fence, "w", 1)
        await retire(client, keys, "b")
        with trio.fail_after(10):
            await put_state(b, fence, "w", 2)
            await put_state(b, fence, "v", 1)
            await b.freshness.wait_fresh()
            await a.freshness.wait_fresh()
        assert states(a) == states(b) == {"w": state("w", 2), "v": state("v", 1)}
        assert await lanes(client, keys) == ["b"] and commit_of(b).conflicts == 0


async def test_a_lane_write_whose_answer_was_lost_before_its_lane_was_retired_is_found_committed(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """a's lane txn commits, its answer is lost, and its lane is retired before a fences it, while a's watch lags:
    the fence finds the head absent, yet a waits for every write up to where etcd decided the fence, finds its own
    there, and answers success without sending it again. (Catching up to the absent head's revision, 0, a would
    have looked at once, not found it, and sent it again.)"""
    keys = NetworkKeys(prefix)
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a:
        fence = await claim(client, prefix)
        await put_state(a, fence, "y", 1)  # the lane head stands where a expects it: the fence compares that
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        real = client_of(a).txn
        row = keys.row(STATE_KIND, "z")
        sent: list[str] = []
        fenced = trio.Event()

        async def losing(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                         failure: Sequence[Op] = ()) -> TxnResult:
            if any(isinstance(op, Put) and op.key == row for op in success):
                sent.append("write")
                result = await real(compare, success, failure)
                if len(sent) == 1:
                    assert result.succeeded
                    await retire(client, keys, "a")
                    raise OutcomeUnknown("the answer was lost")
                return result
            result = await real(compare, success, failure)
            if sent == ["write"] and [op.key for op in success] == [keys.lane("a")]:
                fenced.set()  # the settle's fence, decided
            return result

        client_of(a).txn = losing  # type: ignore[method-assign]
        watch = HeldWatch(a)
        async with trio.open_nursery() as nursery:
            async def release() -> None:
                await fenced.wait()
                await trio.testing.wait_all_tasks_blocked()
                watch.release()

            nursery.start_soon(release)
            with trio.fail_after(10):
                await put_state(a, fence, "z", 1)
        assert sent == ["write"] and states(a)["z"] == state("z", 1)
        with trio.fail_after(10):
            await put_state(a, fence, "z", 2)  # the lane starts anew
            await a.freshness.wait_fresh()
        assert sent == ["write", "write"] and states(a)["z"] == state("z", 2)


class Live:
    """The live nodes as a membership would tell them, fixed."""

    def __init__(self, *names: str) -> None:
        self.names = dict.fromkeys(names)

    def live(self) -> dict[str, None]:
        return self.names

    def on_change(self, listener: Callable[[], None]) -> None:
        """Nothing to tell: the live nodes never change here."""


async def test_a_lane_written_after_it_was_read_is_retired_as_it_stands_and_a_node_back_keeps_its_own(
        etcd: EtcdCluster, prefix: str) -> None:
    """a takes x and y for gone. x's head moves between a's read and its txn (x settling a lost write): the txn is
    refused, and a retires the head as it stands. y's live key is back (a's view lags): y's lane is left alone."""
    keys = NetworkKeys(prefix)
    async with EtcdClient(etcd.endpoints) as client:
        written = (await client.put(keys.lane("x"), HeadValue("1", "x").encode())).header.revision
        await client.put(keys.lane("y"), HeadValue("1", "y").encode())
        await client.put(keys.live_member("y"), b"{}")
        real = client.txn
        moved: list[int] = []
        answers: list[tuple[str, bool]] = []
        y_answered = trio.Event()

        async def moving(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                         failure: Sequence[Op] = ()) -> TxnResult:
            [name] = [keys.parse(op.key).lane for op in success if isinstance(op, Delete)]  # type: ignore[union-attr]
            if name == "x" and not moved:
                moved.append((await client.put(keys.lane("x"), HeadValue("2", "x").encode())).header.revision)
            result = await real(compare, success, failure)
            answers.append((str(name), result.succeeded))
            if name == "y":
                y_answered.set()
            return result

        client.txn = moving  # type: ignore[method-assign]
        retirement = LaneRetirement(client, keys, Live("a"))
        retirement.name = "a"
        async with trio.open_nursery() as nursery:
            await nursery.start(retirement.run)
            with trio.fail_after(10):
                retired_at = await deleted(client, keys.lane("x"), written)
                await y_answered.wait()
            nursery.cancel_scope.cancel()
        assert answers == [("x", False), ("x", True), ("y", False)] and retired_at > moved[0]
        assert await lanes(client, keys) == ["y"]
        mark = (await client.range(keys.retired)).kvs
        assert mark and mark[0].mod_revision == retired_at
