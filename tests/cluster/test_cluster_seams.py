"""Cluster nodes in this process, on the worker's etcd: the seams part B builds on (write conditions checked by etcd,
the feed of applied writes), batches split within etcd's limits, lost answers settled by looking, and what the
metrics show of a node."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client import generate_latest

from controller.cluster import AppliedWrite, freshness
from controller.cluster.shards import SHARDS, desired_owner
from controller.data.commit_step import ConditionFailed
from controller.errors import ApiError
from controller.etcd import Compare, CompareOp, CompareTarget, EtcdClient, Op, OutcomeUnknown, Put, TxnResult
from controller.insight import kept_events
from controller.model.events import MFA, Event
from controller.runtime.composition import Controller
from tests.cluster.controllers import wait_until
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import HeldWatch, create_service, local_of, node


def service_ids(controller: Controller) -> set[str]:
    with controller.domain.read() as ctx:
        return set(ctx.txn.ids("services"))


async def test_a_write_commits_only_while_its_conditions_hold(etcd: EtcdCluster, prefix: str,
                                                              tmp_path: Path) -> None:
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as a:
        claim = f"{prefix}claims/shard-1"
        created = (await client.put(claim, "mine")).header.revision
        mine = Compare(claim, CompareTarget.CREATE, CompareOp.EQUAL, created)
        stale = Compare(claim, CompareTarget.CREATE, CompareOp.EQUAL, created - 1)
        before = service_ids(a)
        outcomes: dict[str, Any] = {}

        async def attempt(label: str, conditions: Sequence[Compare]) -> None:
            try:
                outcomes[label] = await create_service(a, conditions)
            except ConditionFailed as refused:
                outcomes[label] = refused

        async with trio.open_nursery() as nursery:  # in one batch, most likely: each is judged on its own
            nursery.start_soon(attempt, "fenced-out", [stale])
            for index in range(5):
                nursery.start_soon(attempt, f"free-{index}", [])
            nursery.start_soon(attempt, "owner", [mine])
        assert isinstance(outcomes.pop("fenced-out"), ConditionFailed)
        written = {str(row["id"]) for row in outcomes.values()}
        assert service_ids(a) - before == written and len(written) == 6


async def test_every_node_hears_of_every_applied_write(etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    async with node(etcd, prefix, tmp_path, "a") as a, node(etcd, prefix, tmp_path, "b") as b:
        heard: list[AppliedWrite] = []
        local_of(b).subscribe(heard.append)
        remote = await create_service(a)
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        [write] = [w for w in heard if ("services", remote["id"]) in w.rows]
        assert not write.local and write.node == "a" and write.revision > 0
        assert [(c.kind, c.id, c.before, c.after is not None) for c in write.changes
                if c.kind == "services"] == [("services", remote["id"], None, True)]
        own = await create_service(b)
        [write] = [w for w in heard if ("services", own["id"]) in w.rows]
        assert write.local


async def test_batches_split_within_etcd_limits_and_a_mutation_too_large_is_refused(etcd: EtcdCluster,
                                                                                   prefix: str,
                                                                                   tmp_path: Path) -> None:
    """With etcd taking at most 8 operations per txn, 40 creates at once commit (in several chained txns), and a
    mutation writing 20 rows is refused alone, writing nothing."""
    # "b" first: it initialises the network (its first rows take more than 8 operations together).
    async with node(etcd, prefix, tmp_path, "b") as b, node(etcd, prefix, tmp_path, "a", etcd_max_txn_ops=8) as a:
        heard: list[AppliedWrite] = []
        local_of(b).subscribe(heard.append)
        rows: list[dict[str, Any]] = []

        async def create() -> None:
            rows.append(await create_service(a))

        async with trio.open_nursery() as nursery:
            for _ in range(40):
                nursery.start_soon(create)
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        assert {str(row["id"]) for row in rows} <= service_ids(b)
        # Every txn stayed within the limit (its rows and the head's put), so there were at least six of them.
        txns = [sum(kind == "services" for kind, _ in write.rows) for write in heard]
        txns = [count for count in txns if count]
        assert sum(txns) == 40 and max(txns) <= 7 and len(txns) >= 6, txns

        def many_rows(ctx: Any) -> None:
            for index in range(20):
                ctx.txn.put("guess-counters", {"id": f"bulk-{index}", "count": index})

        with pytest.raises(ApiError) as refused:
            await a.domain.write(many_rows)
        assert refused.value.code == "WRITE_TOO_LARGE" and refused.value.status == 413
        with a.domain.read() as ctx:
            assert not ctx.txn.exists("guess-counters", "bulk-0")


@pytest.mark.parametrize("sent", [True, False], ids=["applied", "never-sent"])
async def test_a_write_whose_answer_was_lost_is_settled_by_looking(etcd: EtcdCluster, prefix: str, tmp_path: Path,
                                                                   sent: bool) -> None:
    """The first txn that writes rows raises OutcomeUnknown, after etcd applied it or without sending it: the write
    is answered once, as a success, and its row is there exactly once."""
    async with node(etcd, prefix, tmp_path, "a") as a:
        assert a.cluster is not None
        client = a.cluster.etcd
        real = client.txn
        lost: list[int] = []

        async def losing(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                         failure: Sequence[Op] = ()) -> TxnResult:
            if not lost and any(isinstance(op, Put) and isinstance(op.key, bytes) and b"/d/r/services/" in op.key
                                for op in success):
                lost.append(1)
                if sent:
                    await real(compare, success, failure)
                raise OutcomeUnknown("the answer was lost")
            return await real(compare, success, failure)

        client.txn = losing  # type: ignore[method-assign]
        before = service_ids(a)
        row = await create_service(a)
        assert lost == [1]
        assert service_ids(a) - before == {row["id"]}
        with a.domain.read() as ctx:
            names = [r["name"] for r in ctx.txn.scan("services") if r["id"] not in before]
        assert names == [row["name"]]


def kept(controller: Controller) -> list[tuple[int, bytes]]:
    with controller.store.read() as txn:
        return [(event.id, event.data) for event in kept_events(txn)]


async def test_events_travel_with_their_writes_and_keep_one_order(etcd: EtcdCluster, prefix: str,
                                                                  tmp_path: Path) -> None:
    """Writes on two nodes at once: every node keeps the same events, numbered one after the other with no gap and
    no id twice; a node's event stream shows the other node's events; the log's trim (one range delete) reaches
    every replica."""
    async with node(etcd, prefix, tmp_path, "a", events_keep=1) as a, node(etcd, prefix, tmp_path, "b",
                                                                           events_keep=1) as b:
        created: list[str] = []

        async def create(on: Controller) -> None:
            created.append(str((await create_service(on))["id"]))

        with b.events_hub.subscribe() as streamed:
            async with trio.open_nursery() as nursery:
                for index in range(20):
                    nursery.start_soon(create, a if index % 2 else b)
            with trio.fail_after(10):
                await a.freshness.wait_fresh()
                await b.freshness.wait_fresh()
            seen = kept(a)
            assert seen == kept(b)
            ids = [event_id for event_id, _ in seen]
            assert ids == list(range(ids[0], ids[0] + len(ids)))
            changed = [json.loads(data) for _, data in seen]
            services = [event["entityId"] for event in changed
                        if event.get("entityType") == "services" and event["event_type"] == "created"]
            assert sorted(services) == sorted(created)
            from_a = {event["entityId"] for event in changed if event["event_src_id"] == a.instance_id
                      and event.get("entityType") == "services"}
            assert len(from_a) == 10
            wanted = {event_id for event_id, data in seen if json.loads(data)["event_src_id"] == a.instance_id
                      and json.loads(data).get("entityType") == "services"}
            streamed_ids: set[int] = set()
            with trio.fail_after(10):
                while not wanted <= streamed_ids:
                    streamed_ids |= {event.id for event in await streamed.receive()}

        # 300 events in one write take the log past keep + one trim batch: the write deletes every older row.
        await a.domain.record(*[Event(MFA, "failed", {"identity_id": "x", "api_session_id": "y",
                                                      "operation": "verify", "reason": "MFA_INVALID_TOKEN",
                                                      "locked_out": False}) for _ in range(300)])
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        trimmed = kept(a)
        assert trimmed == kept(b) and trimmed[0][0] > ids[-1] and len(trimmed) == 300


async def test_a_write_that_met_another_nodes_runs_again_and_is_counted(etcd: EtcdCluster, prefix: str,
                                                                        tmp_path: Path) -> None:
    async with node(etcd, prefix, tmp_path, "a", metrics_address="127.0.0.1:0") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        assert a.cluster is not None and a.cluster.commit is not None and a.metrics is not None
        commit = a.cluster.commit
        # a's replica is kept from hearing of b's write until a has tried its own: a's write is guarded on a head
        # that has moved, so it must meet b's, catch up and run again.
        watch = HeldWatch(a)
        theirs = await create_service(b)
        outcome: dict[str, Any] = {}

        async def ours() -> None:
            outcome["row"] = await create_service(a)

        async def conflicted() -> bool:
            return commit.conflicts > 0

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ours)
            await wait_until(conflicted, 10)
            watch.release()
        assert commit.conflicts == 1
        assert {theirs["id"], outcome["row"]["id"]} <= service_ids(a)
        exposition = generate_latest(a.metrics.registry).decode()
        assert "tollgate_cluster_write_conflicts_total 1.0" in exposition
        # Both of a's tries went to etcd as txns, and its read barrier and replica asked for the rest.
        txns = a.cluster.etcd.requests["kv/txn"]
        assert txns >= 2 and f'tollgate_etcd_requests_total{{call="kv/txn"}} {float(txns)}' in exposition


async def test_a_write_txn_answers_the_read_barrier_round_waiting_when_it_was_sent(
        etcd: EtcdCluster, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only a txn may answer the round here, however slow the machine: the barrier's own read would wait a minute.
    monkeypatch.setattr(freshness, "RIDE_WAIT", 60.0)
    monkeypatch.setattr(freshness, "STALE_READ_WAIT", 60.0)
    async with node(etcd, prefix, tmp_path, "a", metrics_address="127.0.0.1:0") as a, \
            node(etcd, prefix, tmp_path, "b") as b:
        assert a.cluster is not None and a.cluster.freshness is not None and a.metrics is not None
        barrier = a.cluster.freshness
        theirs = await create_service(b)
        reads, ridden = a.cluster.etcd.requests.get("kv/range", 0), barrier.ridden
        seen: list[set[str]] = []

        async def request() -> None:
            await a.freshness.wait_fresh()
            seen.append(service_ids(a))

        with barrier.writing():  # as if a's writer were committing a batch when the request arrived
            async with trio.open_nursery() as nursery:
                nursery.start_soon(request)
                await trio.sleep(0.05)  # the request has joined the round
                assert not seen
                ours = await create_service(a)  # its txn takes the round and reads the heads as it commits
        assert seen and {theirs["id"], ours["id"]} <= seen[0]
        assert barrier.ridden == ridden + 1 and a.cluster.etcd.requests.get("kv/range", 0) == reads
        exposition = generate_latest(a.metrics.registry).decode()
        assert f'tollgate_cluster_read_barrier_rounds_total{{answer="write txn"}} {float(barrier.ridden)}' in exposition


def gauges(controller: Controller) -> dict[str, float]:
    """The cluster health gauges of ``controller``'s metrics, by sample name and labels."""
    assert controller.metrics is not None
    found: dict[str, float] = {}
    for line in generate_latest(controller.metrics.registry).decode().splitlines():
        if line.startswith("tollgate_cluster_") and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


async def test_the_metrics_show_the_nodes_online_the_shards_hosted_and_the_replicas_revision(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    async with node(etcd, prefix, tmp_path, "a", metrics_address="127.0.0.1:0") as a:
        assert a.cluster is not None and a.cluster.ownership is not None
        ownership = a.cluster.ownership
        async with node(etcd, prefix, tmp_path, "b") as b:
            a_shards = [shard for shard in range(SHARDS) if desired_owner(shard, ["a", "b"]) == "a"]

            async def shared() -> bool:  # b has claimed its shards from a, and holds them (it releases none)
                return ownership.owned() == a_shards

            await wait_until(shared, 10)
            service = await create_service(b)
            with trio.fail_after(10):
                await a.freshness.wait_fresh()
            before = local_of(a).applied
            seen = gauges(a)
            assert before <= seen["tollgate_cluster_replica_revision"] <= local_of(a).applied  # the watch goes on
            assert seen['tollgate_cluster_nodes{online="true"}'] == 2
            assert seen['tollgate_cluster_nodes{online="false"}'] == 0
            assert seen["tollgate_cluster_shards_hosted"] == len(a_shards)
            row = (await a.cluster.etcd.range(a.cluster.keys.row("services", service["id"]))).kvs[0]
            assert before >= row.mod_revision  # b's write is in a's replica, and counted

        async def alone() -> bool:  # b has gone: a hosts every shard
            return len(ownership.owned()) == SHARDS

        await wait_until(alone, 10)
        seen = gauges(a)
        assert seen['tollgate_cluster_nodes{online="true"}'] == 1
        assert seen['tollgate_cluster_nodes{online="false"}'] == 1  # b is still known, offline
        assert seen["tollgate_cluster_shards_hosted"] == SHARDS
