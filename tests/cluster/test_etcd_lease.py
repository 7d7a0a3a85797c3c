"""Leases against a real etcd: keys on a lease vanish once it expires and stay while it is kept alive; a keeper that
cannot reach etcd gives up before the lease could expire.

Timing is asserted as properties that hold however slow the machine is: a key never vanishes before its lease's TTL
has passed since the grant was sent, and every wait is bounded generously."""

from __future__ import annotations

import pytest
import trio

from controller.etcd import EtcdClient, EventType, LeaseExpired, LeaseKeeper, LeaseNotFound
from tests.cluster.etcd_cluster import EtcdCluster

TTL = 2


async def test_keys_vanish_when_their_lease_expires_and_stay_while_it_is_kept_alive(client: EtcdClient,
                                                                                    prefix: str) -> None:
    granted_at = trio.current_time()
    left = await client.lease_grant(TTL)
    kept = await LeaseKeeper.grant(client, TTL)
    assert left.ttl >= TTL and kept.lease.ttl >= TTL
    await client.put(f"{prefix}left", "x", lease=left.id)
    start = await client.put(f"{prefix}kept", "x", lease=kept.lease_id)

    async with trio.open_nursery() as nursery:
        await nursery.start(kept.run)
        with trio.fail_after(30):
            async with client.watch(prefix, prefix=True, start_revision=start.header.revision + 1) as watch:
                async for update in watch:
                    if any(e.type is EventType.DELETE for e in update.events):
                        break
        vanished_at = trio.current_time()
        assert [e.kv.key for e in update.events] == [f"{prefix}left".encode()]
        assert vanished_at - granted_at >= left.ttl
        with pytest.raises(LeaseNotFound):
            await client.lease_time_to_live(left.id)

        # Kept alive past twice its TTL, the other lease still holds its key.
        await trio.sleep_until(granted_at + 2 * kept.lease.ttl + 0.5)
        assert kept.renewals >= 2
        assert kept.remaining(trio.current_time()) > 0
        info = await client.lease_time_to_live(kept.lease_id, keys=True)
        assert info.keys == (f"{prefix}kept".encode(),)
        assert await client.get(f"{prefix}kept") is not None
        nursery.cancel_scope.cancel()
    await client.lease_revoke(kept.lease_id)
    assert await client.get(f"{prefix}kept") is None


async def test_a_revoked_or_unknown_lease_is_not_found(client: EtcdClient, prefix: str) -> None:
    lease = await client.lease_grant(60)
    await client.put(f"{prefix}k", "x", lease=lease.id)
    await client.lease_revoke(lease.id)
    assert await client.get(f"{prefix}k") is None
    for call in (client.lease_keepalive, client.lease_revoke, client.lease_time_to_live):
        with pytest.raises(LeaseNotFound):
            await call(lease.id)
    with pytest.raises(LeaseNotFound):
        await client.put(f"{prefix}k", "x", lease=lease.id)
    assert await client.get(f"{prefix}k") is None


async def test_a_keeper_that_cannot_renew_gives_up_before_the_lease_can_expire(etcd: EtcdCluster,
                                                                               prefix: str) -> None:
    """Keepalives sent to no member at all fail; the keeper raises LeaseExpired once its ``valid_until`` has
    passed, and etcd does not expire the lease before that time (its key's deletion is seen after it)."""
    async with EtcdClient(etcd.endpoints) as client:
        keeper = await LeaseKeeper.grant(client, TTL)
        start = await client.put(f"{prefix}k", "x", lease=keeper.lease_id)
        async with client.watch(prefix, prefix=True, start_revision=start.header.revision + 1) as watch:
            async with EtcdClient(["http://127.0.0.1:9"]) as nowhere:  # the discard port: nothing listens here
                stranded = LeaseKeeper(nowhere, keeper.lease, valid_until=keeper.valid_until)
                with trio.fail_after(30), pytest.raises(LeaseExpired):
                    await stranded.run()
                gave_up_at = trio.current_time()
            with trio.fail_after(30):
                update = await anext(watch)
                while not update.events:  # a progress notification (the revision moved on elsewhere in etcd)
                    update = await anext(watch)
                deleted_at = trio.current_time()
    assert [e.type for e in update.events] == [EventType.DELETE]
    assert stranded.renewals == 0
    assert gave_up_at >= keeper.valid_until
    assert deleted_at >= keeper.valid_until


async def test_a_keeper_whose_lease_etcd_revoked_is_not_alive_from_then(client: EtcdClient) -> None:
    """etcd revokes the lease long before its TTL (an old leader may): the keeper's next renewal learns it, and from
    then its lease is not surely alive, whatever the last renewal promised, for the holders that act under it."""
    keeper = await LeaseKeeper.grant(client, 60, interval=0.1)
    await client.lease_revoke(keeper.lease_id)
    with trio.fail_after(10), pytest.raises(LeaseNotFound):
        await keeper.run()
    assert keeper.remaining(trio.current_time()) <= 0
