"""The etcd client while members fail: a killed or paused member under a watch, a dead member in the rotation, and a
lost and regained quorum. Each test asserts what must hold whatever the timing: every acknowledged write seen once
and in order, errors of the right type within a bound, service back without a new client."""

from __future__ import annotations

import pytest
import trio

from controller.etcd import EtcdClient, Unavailable
from tests.cluster.etcd_cluster import EtcdCluster

WRITES = 150


async def follower(etcd: EtcdCluster) -> int:
    leader = await etcd.leader()
    return next(index for index in range(len(etcd.members)) if index != leader)


async def watch_through_a_fault(etcd: EtcdCluster, prefix: str, victim: int, fault: str) -> None:
    """Write WRITES keys through the members other than ``victim`` while a watch that began on ``victim`` reads
    them; ``fault`` the victim (kill or pause) once the watch has seen a third of them. The watch must deliver every
    acknowledged write exactly once, in order, from another member."""
    endpoints = etcd.endpoints
    others = [endpoint for index, endpoint in enumerate(endpoints) if index != victim]
    acknowledged: list[int] = []
    seen: list[int] = []
    async with EtcdClient([endpoints[victim], *others]) as watcher, EtcdClient(others) as writer:
        start = (await writer.put(f"{prefix}start", "")).header.revision

        async def write() -> None:
            for i in range(WRITES):
                acknowledged.append((await writer.put(f"{prefix}k{i % 10}", str(i))).header.revision)

        with trio.fail_after(60):
            async with watcher.watch(prefix, prefix=True, start_revision=start + 1, idle_timeout=3) as watch:
                assert watch.endpoint == endpoints[victim]
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write)
                    async for update in watch:
                        seen.extend(event.kv.mod_revision for event in update.events)
                        if len(seen) >= WRITES // 3 and etcd.members[victim].running \
                                and not etcd.members[victim].paused:
                            getattr(etcd, fault)(victim)
                        # Every write seen, or (should one be missing) all acknowledged and the watch past them.
                        if len(seen) >= WRITES or (len(acknowledged) == WRITES
                                                   and update.revision >= acknowledged[-1]):
                            break
    assert seen == acknowledged
    assert watch.reconnects >= 1
    assert watch.endpoint in others


async def test_a_watch_resumes_on_another_member_when_its_member_is_killed(etcd: EtcdCluster, prefix: str) -> None:
    victim = await follower(etcd)
    await watch_through_a_fault(etcd, prefix, victim, "kill")
    assert not etcd.members[victim].running


async def test_a_watch_on_a_paused_member_moves_on_once_it_stays_silent(etcd: EtcdCluster, prefix: str) -> None:
    """A paused member keeps its connections open and says nothing, as a lost host does: the watch notices by the
    missing progress notifications and moves on."""
    victim = await follower(etcd)
    await watch_through_a_fault(etcd, prefix, victim, "pause")
    assert etcd.members[victim].paused


async def test_requests_move_on_from_a_dead_member(etcd: EtcdCluster, prefix: str) -> None:
    """The first member of the client's list is dead (connections refused): calls and watches go to the next."""
    victim = await follower(etcd)
    etcd.kill(victim)
    dead = etcd.endpoints[victim]
    async with EtcdClient([dead, *(e for e in etcd.endpoints if e != dead)]) as client:
        with trio.fail_after(30):
            written = await client.put(f"{prefix}k", "v")
            assert client.current_endpoint != dead
            found = await client.get(f"{prefix}k")
            assert found is not None and found.mod_revision == written.header.revision
        async with EtcdClient([dead, *(e for e in etcd.endpoints if e != dead)]) as watcher:
            with trio.fail_after(30):
                async with watcher.watch(prefix, prefix=True, start_revision=written.header.revision) as watch:
                    assert watch.endpoint != dead
                    update = await anext(watch)
    assert [e.kv.value for e in update.events] == [b"v"]


async def test_without_quorum_writes_fail_and_serializable_reads_answer_until_it_returns(etcd: EtcdCluster,
                                                                                        prefix: str) -> None:
    """Two of three members paused (the leader among them): a write raises Unavailable (OutcomeUnknown when it
    reached a paused member, which may apply it once resumed) within the client's request timeout, a linearizable
    read too, and a serializable read answers from the member left. Once they are resumed the same client writes
    again."""
    key = f"{prefix}k"
    async with EtcdClient(etcd.endpoints, request_timeout=2) as client:
        await client.put(key, "before")
        leader = await etcd.leader()
        paused = [leader, (leader + 1) % 3]
        for index in paused:
            etcd.pause(index)

        with trio.fail_after(10):  # the client's own bound is 2 s for each
            with pytest.raises(Unavailable):
                await client.put(key, "during")
            with pytest.raises(Unavailable):
                await client.get(key)
            stale = await client.get(key, serializable=True)
        assert stale is not None and stale.value == b"before"

        for index in paused:
            etcd.resume(index)
        await etcd.wait_healthy()
        with trio.fail_after(30):
            after = await client.put(key, "after")
            found = await client.get(key)
    assert found is not None and found.value == b"after" and found.mod_revision == after.header.revision
