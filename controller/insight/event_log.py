"""The event log: every write's events numbered, stored and trimmed in that write's own transaction, and published
to the live subscribers once it has committed.

Events are kept in rows of the internal kind :data:`EVENTS_KIND`, one row per write, keyed by the id of its first
event written as 20 decimal digits (so that key order is id order), holding the write's events as compact facts
(``controller/insight/kept.py``): the write encodes them once, in one call, and readers render each event's JSON.
Where writes are replicated (the store records write sets), the writes of one batch share a row instead: each
appends its events to the row an earlier write of the batch put (up to :data:`SHARED_ROW_BYTES`), so that the batch
ships one event row to etcd, not one per write.
Ids come from the last row, which the same transaction reads (its key and its count of events give the last id,
and trimming never deletes it), so they increase by one with no gap, a write that rolls back takes its ids along,
a restart continues after the last, and replicated rows keep one global order. The log keeps about the last
``keep`` events: a write that takes it :data:`TRIM_BATCH` past them deletes the rows of the older ones (a row partly
older goes whole).

An event is a JSON object: ``event_id`` (the number), ``namespace``, ``event_type``, ``timestamp`` (the write's
instant, RFC 3339 with milliseconds), ``event_src_id`` (the controller process that recorded it), then the fields
of its type (``controller/insight/catalog.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import cast

from controller.clock import format_time
from controller.insight.derive import derive
from controller.insight.hub import EventHub
from controller.insight.kept import KeptEvent, append_segment, encode_row, event_key, row_count, row_events
from controller.model.spec import WriteContext
from storage.store import KindLayout, ReadTxn

__all__ = ["EVENTS_KIND", "LAYOUTS", "EventLog", "kept_events", "latest_id", "oldest_id", "read_after"]

EVENTS_KIND = "events"
LAYOUTS = (KindLayout(EVENTS_KIND),)
"""The storage layouts of the log's kinds (no index: rows are put raw)."""
TRIM_BATCH = 256
"""The store keeps the last ``keep`` events, and at most this many older ones until the next trim."""
SHARED_ROW_BYTES = 16 * 1024
"""The largest row the writes of one batch share: each write puts the row again whole (and its write set keeps a
copy until the batch ships), so a batch with more events starts further rows."""


class EventLog:
    """Keeps the last ``keep`` events in the store (the domain's :class:`~controller.data.domain.Journal`).

    Args:
        hub: where committed events are published.
        keep: how many events the store keeps (at least 1).
        source_id: ``event_src_id`` of every event this process records.
    """

    def __init__(self, hub: EventHub, *, keep: int, source_id: str) -> None:
        if keep < 1:
            raise ValueError("the event log keeps at least one event")
        self.hub = hub
        self.keep = keep
        self.source_id = source_id
        self._published = 0  # the last event id published to subscribers

    def record(self, ctx: WriteContext) -> tuple[int, bytes] | None:
        """Number and store the write's events (``controller/insight/derive.py``) in its transaction: one row for
        all of them, keyed by the first one's id; returns that id and the row (None: the write has no event)."""
        derived = derive(ctx)
        if not derived:
            return None
        txn, keep = ctx.txn, self.keep
        newest = txn.last_raw(EVENTS_KIND)
        before = _last_id_of(newest)
        last = before + len(derived)
        row = encode_row(format_time(ctx.now), self.source_id, derived)
        if (newest is not None and len(newest[1]) + len(row) <= SHARED_ROW_BYTES
                and txn.batch_wrote(EVENTS_KIND, newest[0])):
            own = int(newest[0])  # an earlier write of this batch put the last row: its events join it
            txn.put_raw(EVENTS_KIND, newest[0], append_segment(newest[1], row))
        else:
            own = before + 1
            txn.put_raw(EVENTS_KIND, event_key(own), row)
        # Trimmed a batch at a time, in the write whose events take the log past keep + TRIM_BATCH: one cursor walk
        # per batch costs a fraction of a delete per event.
        if last > keep and (before - keep) // TRIM_BATCH != (last - keep) // TRIM_BATCH:
            # Never this write's own row: the last row is what the next write numbers from.
            txn.delete_raw_through(EVENTS_KIND, event_key(min(last - keep, own - 1)))
        return before + 1, row

    def committed(self, recorded: object) -> None:
        """Publish what :meth:`record` stored, now durable (read back from the row only for subscribers)."""
        if self.hub.subscribers:
            first, row = cast(tuple[int, bytes], recorded)
            events = row_events(first, row)
            self._published = max(self._published, events[-1].id)
            self.hub.publish(events)

    def replicated(self, rows: Iterable[tuple[str, bytes]]) -> None:
        """Publish the events of rows another node stored (``(row id, data)``), now in this node's store: a
        cluster's event streams show every node's events, in id order."""
        if self.hub.subscribers:
            # A row a batch's later txn put again (its writes share the row) brings its earlier events again.
            events = [event for key, data in sorted(rows) for event in row_events(int(key), data)
                      if event.id > self._published]
            if events:
                self._published = max(self._published, events[-1].id)
                self.hub.publish(events)

    def trim(self, ctx: WriteContext) -> int:
        """Delete the rows of events beyond the last ``keep`` (after a start with a smaller ``keep``); how many."""
        newest = ctx.txn.last_raw(EVENTS_KIND)
        if newest is None:
            return 0
        last = _last_id_of(newest)
        bound = min(last - self.keep, int(newest[0]) - 1)  # never the last row: ids go on from it
        return ctx.txn.delete_raw_through(EVENTS_KIND, event_key(bound)) if bound > 0 else 0


def latest_id(txn: ReadTxn) -> int:
    """The id of the last event ever recorded (0 before the first): the last row's first id plus its other events.
    One row always stays, so no counter of its own is written (each write dirties one page less)."""
    return _last_id_of(txn.last_raw(EVENTS_KIND))


def _last_id_of(row: tuple[str, bytes] | None) -> int:
    """The id of the last event of the row ``(key, data)`` (0 for no row)."""
    return 0 if row is None else int(row[0]) + row_count(row[1]) - 1


def oldest_id(txn: ReadTxn) -> int | None:
    """The id of the oldest event the store still keeps (None: it keeps none)."""
    for key, _ in txn.scan_raw_from(EVENTS_KIND, None):
        return int(key)
    return None


def kept_events(txn: ReadTxn, start: int | None = None, *, reverse: bool = False) -> Iterator[KeptEvent]:
    """The kept events from id ``start`` (included) on, or back from it when ``reverse`` (None: from the oldest,
    or the newest); valid while ``txn`` is open."""
    if start is None:
        rows = txn.scan_raw_from(EVENTS_KIND, None, reverse=reverse)
    else:
        # The row holding ``start`` is the last one keyed at or before it.
        holding = next(iter(txn.scan_raw_from(EVENTS_KIND, event_key(max(start, 0)), reverse=True)), None)
        origin = holding[0] if holding is not None else event_key(max(start, 0))
        rows = txn.scan_raw_from(EVENTS_KIND, origin, reverse=reverse)
    for key, data in rows:
        events = row_events(int(key), data)
        for event in reversed(events) if reverse else events:
            if start is None or (event.id <= start if reverse else event.id >= start):
                yield event


def read_after(txn: ReadTxn, last: int, limit: int) -> list[KeptEvent]:
    """At most ``limit`` kept events after id ``last``, oldest first (a reader catching up, a batch at a time)."""
    found: list[KeptEvent] = []
    for event in kept_events(txn, last + 1):
        found.append(event)
        if len(found) == limit:
            break
    return found
