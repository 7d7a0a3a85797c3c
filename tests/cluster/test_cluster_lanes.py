"""Owner-fenced state writes in their node's lane (``controller/cluster/commit.py``), with cluster nodes in this
process on the worker's etcd: two nodes' lanes never meet, a read anywhere still sees every acknowledged write, and
a lane write whose answer was lost, or whose node restarted, is settled as the network's writes are."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from controller.cluster import AppliedWrite
from controller.cluster.commit import ReplicatedCommit
from controller.data.write_path import delete_row
from controller.errors import ApiError
from controller.etcd import (
    Compare,
    CompareOp,
    CompareTarget,
    EtcdClient,
    Op,
    OutcomeUnknown,
    Put,
    TxnResult,
    Unavailable,
)
from controller.posture.state import STATE_KIND, IdentityState, encode_state
from controller.runtime.composition import Controller
from storage.batch import Outcome
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import HeldWatch, create_service, local_of, node


async def claim(client: EtcdClient, prefix: str) -> Compare:
    """A fence of the kind an owner's writes carry: this claim key, as created now."""
    key = f"{prefix}claims/{uuid.uuid4().hex}"
    created = (await client.put(key, "mine")).header.revision
    return Compare(key, CompareTarget.CREATE, CompareOp.EQUAL, created)


def state(identity_id: str, version: int) -> bytes:
    return encode_state(IdentityState(identity_id, last_change_at=float(version)))


async def put_state(controller: Controller, fence: Compare, identity_id: str, version: int) -> None:
    """An owner's write of one identity's state: what the posture engine's flushes are made of."""
    def write(ctx: Any) -> None:
        ctx.txn.put_raw(STATE_KIND, identity_id, state(identity_id, version))

    await controller.domain.write(write, conditions=[fence])


def states(controller: Controller) -> dict[str, bytes]:
    with controller.store.read() as txn:
        return dict(txn.scan_raw(STATE_KIND))


def commit_of(controller: Controller) -> ReplicatedCommit:
    assert controller.cluster is not None and controller.cluster.commit is not None
    return controller.cluster.commit


async def test_two_nodes_state_writes_never_meet(etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """b writes an identity's state while its replica has not heard of a's writes (a state write and a service):
    in its lane, the write commits at once instead of meeting a's and running again."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        fence_a, fence_b = await claim(client, prefix), await claim(client, prefix)
        watch = HeldWatch(b)
        await put_state(a, fence_a, "ida", 1)
        service = await create_service(a)
        with trio.fail_after(10):
            await put_state(b, fence_b, "idb", 1)
        assert commit_of(b).conflicts == 0 and commit_of(a).conflicts == 0
        assert "ida" not in states(b)  # b never caught up to write
        watch.release()
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
            await a.freshness.wait_fresh()
        assert states(a) == states(b) == {"ida": state("ida", 1), "idb": state("idb", 1)}
        with b.domain.read() as ctx:
            assert ctx.txn.get("services", service["id"]) is not None
        lanes = await client.range(f"{prefix}d/lane/", prefix=True, keys_only=True)
        assert sorted(kv.key.decode().rsplit("/", 1)[1] for kv in lanes.kvs) == ["a", "b"]


async def test_a_read_on_another_node_waits_for_a_state_write_acknowledged_before(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """A state write moves no network head, yet a node whose replica has not applied it does not answer a fresh
    read until it has: the read barrier reads every lane's head."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        fence = await claim(client, prefix)
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        watch = HeldWatch(b)
        await put_state(a, fence, "x", 1)
        seen: list[bytes | None] = []

        async def read() -> None:
            # The barrier without its fallback to the replica as it is (for a quorum read slower than half a second on
            # a loaded machine); the heads it waits for are the same.
            await b.freshness.wait_current()
            seen.append(states(b).get("x"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.sleep(0.3)  # the read is under way: had it not waited for a's lane, it would find no "x"
            watch.release()
        assert seen == [state("x", 1)]


async def test_a_node_reads_its_own_writes_before_its_watch_brings_them(etcd: EtcdCluster, prefix: str,
                                                                        tmp_path: Path) -> None:
    """With its watch silent, a node's fresh reads still come at once after its own state and network writes: its
    replica holds them from their commit. (Were they not counted, the barrier would wait 10 s for the watch.)"""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a:
        fence = await claim(client, prefix)
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        watch = HeldWatch(a)
        await put_state(a, fence, "y", 1)
        await put_state(a, fence, "y", 2)
        service = await create_service(a)
        with trio.fail_after(5):
            await a.freshness.wait_fresh()
        assert states(a)["y"] == state("y", 2)
        watch.release()
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        assert states(a)["y"] == state("y", 2)
        with a.domain.read() as ctx:
            assert ctx.txn.get("services", service["id"]) is not None


async def test_own_writes_the_watch_brings_back_are_not_taken_again(etcd: EtcdCluster, prefix: str,
                                                                    tmp_path: Path) -> None:
    """a's own writes commit to its replica while it has not applied a state write b made before them: when the watch
    brings them back after b's, they are neither applied again (over a's later write of the same row) nor told to
    the feed as another node's."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        fence_a, fence_b = await claim(client, prefix), await claim(client, prefix)
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        heard: list[AppliedWrite] = []
        local_of(a).subscribe(heard.append)
        watch = HeldWatch(a)
        await put_state(b, fence_b, "x", 1)
        await put_state(a, fence_a, "y", 1)
        service = await create_service(a)
        await put_state(a, fence_a, "y", 2)
        assert states(a)["y"] == state("y", 2) and "x" not in states(a)
        watch.release()
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        assert states(a) == {"x": state("x", 1), "y": state("y", 2)}
        ours = [write for write in heard
                if (STATE_KIND, "y") in write.rows or ("services", service["id"]) in write.rows]
        assert len(ours) == 3 and all(write.local for write in ours)
        assert [write.local for write in heard if (STATE_KIND, "x") in write.rows] == [False]


@pytest.mark.parametrize("sent", [True, False], ids=["applied", "not-sent"])
async def test_a_state_write_whose_answer_was_lost_is_settled_by_looking(etcd: EtcdCluster, prefix: str,
                                                                         tmp_path: Path, sent: bool) -> None:
    """The first lane txn raises OutcomeUnknown, after etcd applied it or without sending it: the write is answered
    as a success, its state is there, and the lane goes on from where its fence left it, meeting nothing."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a:
        fence = await claim(client, prefix)
        real = client_of(a).txn
        lost: list[int] = []

        async def losing(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                         failure: Sequence[Op] = ()) -> TxnResult:
            if not lost and any(isinstance(op, Put) and b"/d/lane/" in op.key for op in success):
                lost.append(1)
                if sent:
                    await real(compare, success, failure)
                raise OutcomeUnknown("the answer was lost")
            return await real(compare, success, failure)

        client_of(a).txn = losing  # type: ignore[method-assign]
        with trio.fail_after(10):
            await put_state(a, fence, "z", 1)
        assert lost == [1] and states(a)["z"] == state("z", 1)
        with trio.fail_after(10):
            await put_state(a, fence, "z", 2)
            await a.freshness.wait_fresh()
        assert states(a)["z"] == state("z", 2) and commit_of(a).conflicts == 0


def client_of(controller: Controller) -> EtcdClient:
    assert controller.cluster is not None
    return controller.cluster.etcd


async def test_a_restarted_node_finds_its_lane_where_it_left_it(etcd: EtcdCluster, prefix: str,
                                                                tmp_path: Path) -> None:
    """A node started again under its name finds its lane head already moved (by the process before): its first
    state write learns where, and commits."""
    async with EtcdClient(etcd.endpoints) as client:
        fence = await claim(client, prefix)
        async with node(etcd, prefix, tmp_path, "a") as a:
            await put_state(a, fence, "w", 1)
        async with node(etcd, prefix, tmp_path, "a") as a:
            with trio.fail_after(10):
                await put_state(a, fence, "w", 2)
                await put_state(a, fence, "v", 1)
                await a.freshness.wait_fresh()
            assert states(a) == {"w": state("w", 2), "v": state("v", 1)}
            assert commit_of(a).conflicts == 0


async def test_a_node_stopped_ahead_of_its_watch_rebuilds_its_replica(etcd: EtcdCluster, prefix: str,
                                                                      tmp_path: Path) -> None:
    """a writes in its lane and in the network's order (a name freed and taken again, a row written twice) while it
    has not applied a write b made before them, and stops. Started again, it rebuilds its replica from etcd: the
    watch could neither take its own writes again over the state they led to (the name would meet itself in its
    unique index) nor skip them. It ends as etcd holds the network."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "b") as b:
        fence_a, fence_b = await claim(client, prefix), await claim(client, prefix)
        async with node(etcd, prefix, tmp_path, "a") as a:
            with trio.fail_after(10):
                await a.freshness.wait_fresh()
            HeldWatch(a, drop=True)
            await put_state(b, fence_b, "x", 1)
            await put_state(a, fence_a, "y", 1)
            services = a.domain.registry["services"]
            first = await a.domain.write(a.domain.validated_create("services", {"name": "alpha",
                                                                                "encryptionRequired": True}))
            await a.domain.write(lambda ctx: delete_row(ctx, services, first["id"]))
            second = await a.domain.write(a.domain.validated_create("services", {"name": "alpha",
                                                                                 "encryptionRequired": True}))

            def unfenced(ctx: Any) -> None:  # no fence: a write in the network's order
                ctx.txn.put_raw(STATE_KIND, "y", state("y", 2))

            await a.domain.write(unfenced)
            assert states(a) == {"y": state("y", 2)}
        async with node(etcd, prefix, tmp_path, "a") as a:
            with trio.fail_after(20):
                await a.freshness.wait_current()
            assert a.cluster is not None and a.cluster.replica is not None and a.cluster.replica.rebuilds == 1
            assert states(a) == {"x": state("x", 1), "y": state("y", 2)}
            with a.domain.read() as ctx:
                assert [row["id"] for row in ctx.txn.scan("services") if row["name"] == "alpha"] == [second["id"]]


async def test_an_older_write_of_another_chain_is_not_applied_over_a_newer_own_one(etcd: EtcdCluster, prefix: str,
                                                                                  tmp_path: Path) -> None:
    """b deletes a's state row in the network's order (a repair, say); a writes the row again after it, before its
    watch brings the delete: when the delete comes, a keeps its later row, as etcd does."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        fence = await claim(client, prefix)
        await put_state(a, fence, "z", 1)
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        watch = HeldWatch(a)

        def repair(ctx: Any) -> None:
            ctx.txn.delete_raw(STATE_KIND, "z")

        await b.domain.write(repair)
        await put_state(a, fence, "z", 2)
        watch.release()
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
            await b.freshness.wait_fresh()
        stored = await client.range(f"{prefix}d/r/{STATE_KIND}/z")
        assert [kv.value for kv in stored.kvs] == [state("z", 2)]
        assert states(a)["z"] == states(b)["z"] == state("z", 2)


async def test_a_lane_batch_cut_short_by_a_lost_answer_leaves_its_first_txn_to_the_watch(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """A lane batch of two txns (etcd takes five operations per txn here): the first commits, the second's answer
    is lost and its fence finds etcd unavailable, so the batch is answered 503. The first txn's rows reach the
    replica from the watch, even after a later lane write commits before the watch brings them."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "b"), \
            node(etcd, prefix, tmp_path, "a", etcd_max_txn_ops=5) as a:
        fence = await claim(client, prefix)
        await put_state(a, fence, "before", 1)
        real = client_of(a).txn
        armed = {"lane txns": 0, "on": True}

        async def failing(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                          failure: Sequence[Op] = ()) -> TxnResult:
            lane = any(isinstance(op, Put) and b"/d/lane/" in op.key for op in success)
            rows = any(isinstance(op, Put) and b"/d/r/" in op.key for op in success)
            if armed["on"] and lane and rows:
                armed["lane txns"] += 1
                if armed["lane txns"] == 2:
                    raise OutcomeUnknown("the answer was lost")
            elif armed["on"] and lane:  # the fence of the lost txn
                raise Unavailable("no quorum")
            return await real(compare, success, failure)

        client_of(a).txn = failing  # type: ignore[method-assign]
        watch = HeldWatch(a)
        outcomes: list[Outcome] = []
        done = trio.Event()

        def finished(outcome: Outcome) -> None:
            outcomes.append(outcome)
            if len(outcomes) == 2:
                done.set()

        for name in ("first", "second"):  # queued together: one batch, one txn each (2 rows and the heads: 4 ops)
            def write(ctx: Any, name: str = name) -> None:
                for part in ("a", "b"):
                    ctx.txn.put_raw(STATE_KIND, f"{name}-{part}", state(name, 1))

            a.domain.post_write(write, finished, conditions=[fence])
        with trio.fail_after(30):
            await done.wait()
        assert armed["lane txns"] == 2
        assert all(isinstance(outcome.error, ApiError) and outcome.error.code == "CLUSTER_UNAVAILABLE"
                   for outcome in outcomes)
        armed["on"] = False
        with trio.fail_after(30):
            while True:  # right after a 503, a write has a short deadline: on a loaded machine it may need another try
                try:
                    await put_state(a, fence, "after", 1)
                    break
                except ApiError as error:
                    assert error.code == "CLUSTER_UNAVAILABLE"
        watch.release()
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        assert set(states(a)) == {"before", "first-a", "first-b", "after"}
