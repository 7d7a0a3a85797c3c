"""Shard ownership and forwarding when something fails under them, with cluster nodes in this process on the
worker's etcd: a link that broke under a live owner (before the call left, and after), a shard its node takes back
(while its view of the holders lags, too), a release whose delete failed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from controller.cluster import forwarding
from controller.cluster.channel import Unanswered
from controller.data.commit_step import ConditionFailed
from controller.errors import ApiError
from controller.etcd import Compare, Delete, Op, TxnResult, Unavailable, WatchUpdate
from controller.etcd.watch import Watch
from controller.runtime.composition import Controller
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.test_cluster_shards import node, settled


async def forwarding_node(a: Controller, b: Controller, name: str) -> tuple[Controller, str]:
    """An identity created on ``a``, and the node of the two that does not host it (whose calls are forwarded)."""
    created = await a.domain.create("identities", {"name": name, "type": "User", "isAdmin": False})
    identity = str(created["id"])
    with trio.fail_after(10):
        await b.freshness.wait_fresh()
    other = b if a.cluster is not None and a.cluster.ownership is not None \
        and a.cluster.ownership.owns(identity) else a
    return other, identity


async def test_a_call_that_never_left_under_a_live_owner_is_sent_again_at_once(etcd: EtcdCluster, prefix: str,
                                                                                tmp_path: Path) -> None:
    """The owner is alive and keeps the shard, but the link broke before the call left: the call goes again over a
    new link at once, instead of waiting for the shard to change hands."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _), node(etcd, prefix, tmp_path, "b") as (b, _):
        await settled({"a": a, "b": b})
        other, identity = await forwarding_node(a, b, "broken-link")
        assert other.cluster is not None and other.cluster.router is not None and other.cluster.ownership is not None
        router, changes = other.cluster.router, other.cluster.ownership.changed
        real_send, real_park = router._send, changes.park
        broken: list[str] = []
        parked: list[int] = []

        async def breaking(node_name: str, address: str, call: Any) -> tuple[int, bytes] | Unanswered:
            if not broken:
                broken.append(node_name)
                return Unanswered.NOT_SENT  # as a link that broke before the call left
            return await real_send(node_name, address, call)

        async def park() -> None:
            parked.append(1)
            await real_park()

        router._send = breaking  # type: ignore[method-assign]
        changes.park = park  # type: ignore[method-assign]
        with trio.fail_after(30):
            state = await other.posture.state(identity)
        assert state.identity_id == identity and len(broken) == 1 and router.forwarded == 1
        assert parked == []  # it never waited for the shard to change hands


async def test_a_call_the_owner_may_have_run_is_not_sent_to_it_again(etcd: EtcdCluster, prefix: str,
                                                                     tmp_path: Path) -> None:
    """The call left, and the link broke before the answer, under an owner that lives on and keeps the shard: it may
    have run there, so it is not sent there again; at the end of its wait it answers 503 ``applied: unknown``."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _), node(etcd, prefix, tmp_path, "b") as (b, _):
        await settled({"a": a, "b": b})
        other, identity = await forwarding_node(a, b, "lost-answer")
        assert other.cluster is not None and other.cluster.router is not None
        router = other.cluster.router
        router.within = 1.0
        real_send = router._send
        sent: list[str] = []

        async def answer_lost(node_name: str, address: str, call: Any) -> tuple[int, bytes] | Unanswered:
            sent.append(node_name)
            await real_send(node_name, address, call)  # it ran there
            return Unanswered.LOST

        router._send = answer_lost  # type: ignore[method-assign]
        with trio.fail_after(30), pytest.raises(ApiError) as unavailable:
            await other.posture.state(identity)
        assert unavailable.value.code == "CLUSTER_UNAVAILABLE" and unavailable.value.cause is not None
        assert unavailable.value.cause["data"] == {"applied": "unknown"} and len(sent) == 1


async def test_a_call_the_owner_may_have_run_goes_to_its_next_claim(etcd: EtcdCluster, prefix: str,
                                                                    tmp_path: Path) -> None:
    """The call left and its answer was lost; the owner then let its shards go and took them back (new actors, new
    claims, as after a late lease renewal): the call goes to the owner under its new claim, at once."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _), node(etcd, prefix, tmp_path, "b") as (b, _):
        await settled({"a": a, "b": b})
        other, identity = await forwarding_node(a, b, "next-claim")
        owner = a if other is b else b
        assert other.cluster is not None and other.cluster.router is not None
        assert owner.cluster is not None and owner.cluster.ownership is not None
        router, ownership = other.cluster.router, owner.cluster.ownership
        router.within = 5.0
        real_send = router._send
        sent: list[str] = []
        ran: list[int] = []

        async def answer_lost_once(node_name: str, address: str, call: Any) -> tuple[int, bytes] | Unanswered:
            sent.append(node_name)
            reply = await real_send(node_name, address, call)
            if len(sent) > 1:
                if isinstance(reply, tuple) and reply[0] != forwarding._MOVED:
                    ran.append(reply[0])  # not a "moved": it ran
                return reply
            ownership._drop(sorted(ownership.holdings()), "the test stops acting for them")
            ownership._rerun.mark()  # it takes them back, with new claims
            return Unanswered.LOST

        router._send = answer_lost_once  # type: ignore[method-assign]
        with trio.fail_after(30):
            state = await other.posture.state(identity)
        # Sent twice: lost, then run under the new claim, which the owner adopts before it answers (no "moved").
        assert state.identity_id == identity and sent == [owner.cluster.ownership.name] * 2 and ran == [200]


async def test_a_shard_its_node_takes_back_gets_a_new_key_and_the_old_fence_fails(etcd: EtcdCluster, prefix: str,
                                                                                 tmp_path: Path) -> None:
    """The node stopped acting for its shards (as its watchdog does when a renewal is late) and its lease survived:
    it takes them back with their keys created anew, so a write its stopped actors still had queued, fenced by the
    old key, fails instead of committing behind the new actors' backs."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _):
        await settled({"a": a})
        assert a.cluster is not None and a.cluster.ownership is not None
        ownership = a.cluster.ownership
        lease = a.cluster.membership.lease_id
        before = ownership.holdings()
        ownership._drop(sorted(before), "the test stops acting for them")
        ownership._rerun.mark()
        await settled({"a": a})
        after = ownership.holdings()
        assert a.cluster.membership.lease_id == lease and after.keys() == before.keys()
        assert all(after[shard] != before[shard] for shard in before)
        write = a.domain.validated_create("services", {"name": "behind-their-backs", "encryptionRequired": True})
        with pytest.raises(ConditionFailed):
            await a.domain.write(write, conditions=[before[0]])


async def test_a_key_left_by_a_release_that_failed_is_deleted_and_its_shard_claimed(etcd: EtcdCluster, prefix: str,
                                                                                    tmp_path: Path) -> None:
    """b joins; a stops acting for b's shards but etcd fails the deletes of their keys. a deletes them at its next
    turn all the same, and b claims them: no shard is left held by a node that does not host it."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _):
        await settled({"a": a})
        assert a.cluster is not None
        client = a.cluster.etcd
        real = client.txn
        failed: list[bytes] = []

        async def failing_once(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                               failure: Sequence[Op] = ()) -> TxnResult:
            deletes = [op.key for op in success if isinstance(op, Delete) and b"/owners/" in bytes(op.key)]
            if deletes and not failed:
                failed.extend(deletes)
                raise Unavailable("etcd did not take the delete (test)")
            return await real(compare, success, failure)

        client.txn = failing_once  # type: ignore[method-assign]
        async with node(etcd, prefix, tmp_path, "b") as (b, _):
            await settled({"a": a, "b": b})
        assert len(failed) == 1


class HeldOwnersWatch:
    """Holds every update of the watches over the shards' keys (their ownership view) until released: a lagging
    watch. Counts the revision up to which the held updates were then delivered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owners: bytes) -> None:
        self.holding = True
        self.released = trio.Event()
        self.delivered = 0
        real_next = Watch.__anext__

        async def next_update(watch: Watch) -> WatchUpdate:
            update = await real_next(watch)
            if bytes(watch._request.key) == owners:
                if self.holding:
                    await self.released.wait()
                self.delivered = max(self.delivered, update.revision)
            return update

        monkeypatch.setattr(Watch, "__anext__", next_update)

    def release(self) -> None:
        self.holding = False
        self.released.set()


async def test_a_shard_taken_back_stays_when_a_lagging_watch_brings_the_old_keys_delete(
        etcd: EtcdCluster, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node takes its shards back with new keys while its view of the holders lags; when the view brings the old
    keys' deletes, after the new claims, the node keeps the shards on the keys it claimed last."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _):
        await settled({"a": a})
        assert a.cluster is not None and a.cluster.ownership is not None
        ownership = a.cluster.ownership
        watch = HeldOwnersWatch(monkeypatch, f"{prefix}owners/".encode())
        before = ownership.holdings()
        ownership._drop(sorted(before), "the test stops acting for them")
        ownership._rerun.mark()
        await settled({"a": a})
        after = ownership.holdings()
        assert all(after[shard] != before[shard] for shard in before)
        last_claim = max(fence.operand for fence in after.values() if isinstance(fence, Compare))
        watch.release()
        with trio.fail_after(10):
            while watch.delivered < last_claim:  # noqa: ASYNC110  # the watch's own progress: no event says when
                await trio.sleep(0.05)
        await settled({"a": a})
        assert ownership.holdings() == after
