"""Event rows shared by the writes of one batch where writes are replicated: each write keeps its own instant and
source, ids stay one apart, every event is published once, and a row shipped again publishes nothing twice."""

from __future__ import annotations

import trio

from controller.insight import EVENTS_KIND, kept_events
from controller.insight.kept import append_segment, encode_row, row_count, row_events
from controller.model.events import MFA, Event
from controller.runtime.composition import Controller


def _failed(index: int) -> tuple[str, str, dict[str, object]]:
    return (MFA, "failed", {"identity_id": f"i{index}", "api_session_id": "a", "operation": "verify",
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
    rows = _rows(controller)
    assert len(rows) < rows_before + 20  # fewer rows than writes
    with controller.store.read() as txn:
        kept = [event for event in kept_events(txn) if event.fields["namespace"] == MFA]
    assert sorted(event.fields["identity_id"] for event in kept) == sorted(f"i{index}" for index in range(20))
    ids = [event.id for event in kept]
    assert ids == list(range(ids[0], ids[0] + 20))
    assert [event.id for event in published if event.fields["namespace"] == MFA] == ids  # each once, in order
    # The last row, shipped again to another node (a batch's later txn puts it again): nothing is published twice.
    with hub.subscribe() as again:
        controller.event_log.replicated([rows[-1]])
        await controller.domain.record(Event(*_failed(99)))
        assert [event.fields["identity_id"] for event in await again.receive()] == ["i99"]
