"""Event rows shared by the writes of one batch where writes are replicated: each write keeps its own instant and
source, ids stay one apart, every event is published once, and a row shipped again publishes nothing twice."""

from __future__ import annotations

import trio

from controller.insight import EVENTS_KIND, kept_events
from controller.insight.event_log import SHARED_ROW_BYTES
from controller.insight.kept import append_segment, encode_row, event_key, row_count, row_events
from controller.model.events import MFA, Event
from controller.runtime.composition import Controller


def _failed(index: int, padding: str = "") -> tuple[str, str, dict[str, object]]:
    return (MFA, "failed", {"identity_id": f"i{index}{padding}", "api_session_id": "a", "operation": "verify",
                            "reason": "MFA_INVALID_TOKEN", "locked_out": False})


def test_a_row_of_several_writes_keeps_each_writes_instant_and_source() -> None:
    first = encode_row("2026-01-01T00:00:00.000Z", "node-a", [_failed(0), _failed(1)])
    second = encode_row("2026-01-01T00:00:01.000Z", "node-a", [_failed(2)])
    third = encode_row("2026-01-01T00:00:02.000Z", "node-b", [_failed(3), _failed(4)])
    row = append_segment(append_segment(first, second), third)
    assert row_count(first) == 2 and row_count(row) == 5
    events = [dict(event.fields) for event in row_events(41, row)]
    assert [event["event_id"] for event in events] == [41, 42, 43, 44, 45]
    assert [event["identity_id"] for event in events] == ["i0", "i1", "i2", "i3", "i4"]
    assert [event["timestamp"][17:19] for event in events] == ["00", "00", "01", "02", "02"]
    assert [event["event_src_id"] for event in events] == ["node-a", "node-a", "node-a", "node-b", "node-b"]
    # A row of one write is read as before.
    assert [event.fields["identity_id"] for event in row_events(7, first)] == ["i0", "i1"]


def _rows(controller: Controller) -> list[tuple[str, bytes]]:
    with controller.store.read() as txn:
        return list(txn.scan_raw_from(EVENTS_KIND, None))


async def test_the_writes_of_one_batch_share_a_row_where_writes_are_recorded(controller: Controller) -> None:
    controller.store.record_writes = True  # as a cluster node's replica does
    assert controller.event_log is not None
    hub = controller.event_log.hub
    rows_before = len(_rows(controller))
    with hub.subscribe() as subscription:
        async with trio.open_nursery() as nursery:  # queued together: one group commit
            for index in range(20):
                nursery.start_soon(controller.domain.record, Event(*_failed(index)))
        published = await subscription.receive()
    assert len(_rows(controller)) < rows_before + 20  # fewer rows than writes
    with controller.store.read() as txn:
        kept = [event for event in kept_events(txn) if event.fields["namespace"] == MFA]
    assert sorted(event.fields["identity_id"] for event in kept) == sorted(f"i{index}" for index in range(20))
    ids = [event.id for event in kept]
    assert ids == list(range(ids[0], ids[0] + 20))
    assert [event.id for event in published if event.fields["namespace"] == MFA] == ids  # each once, in order
    # Another node's row, then the same row again, longer (its batch's later txn put it again): each event once.
    first = ids[-1] + 1
    stamp = "2026-01-01T00:00:00.000Z"
    shorter = encode_row(stamp, "other-node", [_failed(100), _failed(101)])
    longer = append_segment(shorter, encode_row(stamp, "other-node", [_failed(102)]))
    with hub.subscribe() as again:
        controller.event_log.replicated([(event_key(first), shorter)])
        controller.event_log.replicated([(event_key(first), longer)])
        received = await again.receive()
    assert [(event.id, event.fields["identity_id"]) for event in received] == [
        (first, "i100"), (first + 1, "i101"), (first + 2, "i102")]


async def test_a_batch_with_more_events_than_a_shared_row_holds_starts_further_rows(controller: Controller) -> None:
    controller.store.record_writes = True
    padding = "x" * 1000
    before = {key for key, _ in _rows(controller)}
    async with trio.open_nursery() as nursery:  # one group commit of about 40 KB of events
        for index in range(40):
            nursery.start_soon(controller.domain.record, Event(*_failed(index, padding)))
    new = [(key, data) for key, data in _rows(controller) if key not in before]
    assert len(new) >= 3 and all(len(data) <= SHARED_ROW_BYTES for _, data in new)
    with controller.store.read() as txn:
        kept = [event for event in kept_events(txn) if event.fields["namespace"] == MFA]
    ids = [event.id for event in kept]
    assert ids == list(range(ids[0], ids[0] + 40))
    assert sorted(str(event.fields["identity_id"]) for event in kept) == sorted(f"i{i}{padding}" for i in range(40))
