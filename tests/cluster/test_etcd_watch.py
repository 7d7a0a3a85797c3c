"""Watches against a real etcd: every event from a start revision once and in order, live events as they happen,
and a compacted start revision raising Compacted with the revision to re-read from."""

from __future__ import annotations

import pytest
import trio

from controller.etcd import Compacted, Compare, Delete, EtcdClient, Event, EventType, Put, Watch
from tests.cluster.etcd_cluster import EtcdCluster


async def collect_until(watch: Watch, revision: int) -> list[Event]:
    """Every event the watch delivers until it has delivered everything up to ``revision``."""
    events: list[Event] = []
    async for update in watch:
        events.extend(update.events)
        if update.revision >= revision:
            return events
    raise AssertionError("the watch ended")


async def test_a_watch_from_a_revision_delivers_every_event_in_order(client: EtcdClient, prefix: str) -> None:
    start = (await client.put(f"{prefix}first", "0")).header.revision
    expected: list[tuple[EventType, bytes, int]] = [(EventType.PUT, f"{prefix}first".encode(), start)]
    for i in range(40):
        key = f"{prefix}k{i % 7}"
        if i % 5 == 4:
            deleted = await client.delete_range(key)
            if deleted.deleted:  # deleting a missing key changes nothing, so makes no event
                expected.append((EventType.DELETE, key.encode(), deleted.header.revision))
        else:
            revision = (await client.put(key, str(i))).header.revision
            expected.append((EventType.PUT, key.encode(), revision))
    # One txn: three events at one revision, in the txn's order.
    revision = (await client.put(f"{prefix}k1", "to be deleted")).header.revision
    expected.append((EventType.PUT, f"{prefix}k1".encode(), revision))
    together = await client.txn([], [Put(f"{prefix}t/a", "1"), Put(f"{prefix}t/b", "2"), Delete(f"{prefix}k1")])
    last = together.header.revision
    expected += [(EventType.PUT, f"{prefix}t/a".encode(), last), (EventType.PUT, f"{prefix}t/b".encode(), last),
                 (EventType.DELETE, f"{prefix}k1".encode(), last)]
    await client.put(f"/elsewhere{prefix}", "not watched")

    with trio.fail_after(30):
        async with client.watch(prefix, prefix=True, start_revision=start, prev_kv=True) as watch:
            events = await collect_until(watch, last)
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events] == expected
    updated = [e for e in events if e.type is EventType.PUT and e.kv.version > 1]
    assert updated and all(e.prev_kv is not None and e.prev_kv.key == e.kv.key for e in updated)
    assert all(e.prev_kv is not None for e in events if e.type is EventType.DELETE)


async def test_a_watch_sees_live_changes_and_progress(client: EtcdClient, prefix: str) -> None:
    """A watch from now delivers what is written after it was created, then reports progress past it."""
    async with client.watch(prefix, prefix=True) as watch:
        created_at = watch.cursor.delivered
        written = [(await client.put(f"{prefix}live", str(i))).header.revision for i in range(5)]
        await client.put(f"/elsewhere{prefix}", "moves the store's revision on")
        with trio.fail_after(30):
            events = await collect_until(watch, written[-1])
            # The write elsewhere is reported as progress (etcd sends it after a quiet second).
            async for update in watch:
                if update.is_progress:
                    break
    assert [e.kv.mod_revision for e in events] == written
    assert all(revision > created_at for revision in written)
    assert update.revision > written[-1]
    assert watch.reconnects == 0 and watch.cursor.duplicates == 0


async def test_a_watch_from_a_compacted_revision_raises_compacted(etcd: EtcdCluster, client: EtcdClient,
                                                                  prefix: str) -> None:
    old = (await client.put(f"{prefix}k", "1")).header.revision
    new = (await client.put(f"{prefix}k", "2")).header.revision
    await etcd.compact(new)
    with trio.fail_after(30), pytest.raises(Compacted) as compacted:
        async with client.watch(prefix, prefix=True, start_revision=old) as watch:
            async for update in watch:
                raise AssertionError(f"a compacted history was delivered: {update}")
    assert compacted.value.compact_revision == new
    # As a caller does: re-read, then watch from the revision of that read.
    reread = await client.range(prefix, prefix=True)
    assert [kv.value for kv in reread.kvs] == [b"2"]
    async with client.watch(prefix, prefix=True, start_revision=reread.header.revision + 1) as watch:
        changed = await client.txn([Compare.unchanged(f"{prefix}k", new)], [Put(f"{prefix}k", "3")])
        with trio.fail_after(30):
            events = await collect_until(watch, changed.header.revision)
    assert [e.kv.value for e in events] == [b"3"]
