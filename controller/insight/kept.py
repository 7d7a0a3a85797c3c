"""The stored form of the event log: one row per write holding its events as compact facts, and the events read
back from it (:class:`KeptEvent`), rendered as JSON objects only when a reader asks.

A row is a 4-byte big-endian count of its events, then one msgpack array: the write's instant (RFC 3339 text), the
recording process (``event_src_id``) and the events, each ``[namespace, event_type, values]``. A row that holds the
events of several writes (:func:`append_segment`: the writes of one replicated batch share a row, shipped as one
key) has the count's top bit set, and then each write's array prefixed by its 4-byte length. ``values`` is either
a map of the event's fields (what producers record with ``Event``) or, for the commonest events, an array of their
values in the order :data:`POSITIONAL` names them (no field names stored or built on the engine's path). Inside
them, a posture failure's cause and failing checks may be compact arrays too
(:func:`controller.posture.step_events.expand_cause`, :func:`controller.posture.causes.expand_check`). Rows
written as JSON lines (one event's JSON text per line) are read as well.

Every reader (``GET /events``, the stream, the file sink, the CLI through the API) sees the same JSON object for
an event: the envelope (``event_id``, ``namespace``, ``event_type``, ``timestamp``, ``event_src_id``), then the
fields of its type, then, for an entity change, ``eventId``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from controller.model.events import ACCESS, ENTITY_CHANGE, SESSIONS
from controller.posture.causes import expand_check
from controller.posture.step_events import expand_cause

__all__ = ["POSITIONAL", "KeptEvent", "Values", "append_segment", "encode_row", "event_key", "row_count",
           "row_events"]

Values = Mapping[str, Any] | tuple[Any, ...]
"""An event's fields as a write records them: a map, or the values :data:`POSITIONAL` names for its type."""
POSITIONAL: dict[tuple[str, str], tuple[str, ...]] = {
    (ACCESS, "revoked"): ("identity_id", "session_id", "api_session_id", "service_id", "session_type", "cause"),
    (SESSIONS, "created"): ("id", "session_type", "provider", "api_session_id", "identity_id", "service_id",
                            "service_policy_ids"),
}
"""The fields of the event types recorded as arrays of values, in their order."""
_COUNT_BYTES = 4
_SEGMENTED = 1 << 31  # in the count: the row holds several writes' arrays, each prefixed by its length
_msgpack = msgspec.msgpack.Encoder()
_unpack = msgspec.msgpack.Decoder()
_json = msgspec.json.Encoder()
_from_json = msgspec.json.Decoder(dict[str, Any])


def event_key(event_id: int) -> str:
    """The row id of event ``event_id``: fixed-width, so that key order is id order."""
    return f"{event_id:020d}"


def encode_row(stamp: str, source_id: str, events: list[tuple[str, str, Values]]) -> bytes:
    """The row of a write's ``events`` (at least one; maps must be dicts), recorded at ``stamp`` by ``source_id``."""
    return len(events).to_bytes(_COUNT_BYTES, "big") + _msgpack.encode((stamp, source_id, events))


def append_segment(row: bytes, segment: bytes) -> bytes:
    """The row holding ``row``'s events and then ``segment``'s (a row :func:`encode_row` made for the next
    write)."""
    total = (row_count(row) + row_count(segment)) | _SEGMENTED
    head = total.to_bytes(_COUNT_BYTES, "big")
    array = memoryview(segment)[_COUNT_BYTES:]
    size = len(array).to_bytes(_COUNT_BYTES, "big")
    if int.from_bytes(row[:_COUNT_BYTES], "big") & _SEGMENTED:  # the arrays so far stay as they are
        return b"".join((head, memoryview(row)[_COUNT_BYTES:], size, array))
    first = memoryview(row)[_COUNT_BYTES:]
    return b"".join((head, len(first).to_bytes(_COUNT_BYTES, "big"), first, size, array))


def _arrays(row: bytes) -> list[memoryview]:
    """The msgpack arrays of a binary row, one per write."""
    view = memoryview(row)
    if not int.from_bytes(view[:_COUNT_BYTES], "big") & _SEGMENTED:
        return [view[_COUNT_BYTES:]]
    arrays, at = [], _COUNT_BYTES
    while at < len(view):
        size = int.from_bytes(view[at:at + _COUNT_BYTES], "big")
        at += _COUNT_BYTES
        arrays.append(view[at:at + size])
        at += size
    return arrays


def _is_json_lines(data: bytes) -> bool:
    return data[:1] == b"{"


def row_count(data: bytes) -> int:
    """How many events a row holds, without decoding it."""
    if _is_json_lines(data):
        return data.count(b"\n") + 1
    return int.from_bytes(data[:_COUNT_BYTES], "big") & ~_SEGMENTED


def row_events(first_id: int, data: bytes) -> list[KeptEvent]:
    """The events of the row whose first event is ``first_id``, in order."""
    if _is_json_lines(data):
        return [KeptEvent(first_id + index, line) for index, line in enumerate(data.split(b"\n"))]
    kept: list[KeptEvent] = []
    for array in _arrays(data):
        stamp, source, events = _unpack.decode(array)
        start = first_id + len(kept)
        kept += [KeptEvent(start + index, None, (stamp, source, event)) for index, event in enumerate(events)]
    return kept


def _render(event_id: int, stamp: str, source: str, event: list[Any]) -> dict[str, Any]:
    namespace, event_type, values = event
    body: dict[str, Any] = {"event_id": event_id, "namespace": namespace, "event_type": event_type,
                            "timestamp": stamp, "event_src_id": source}
    if type(values) is dict:
        body.update(values)
    else:
        body.update(zip(POSITIONAL[(namespace, event_type)], values, strict=True))
    cause = body.get("cause")
    if type(cause) is list:
        body["cause"] = expand_cause(cause)
    checks = body.get("checks")
    if type(checks) is list:
        body["checks"] = [expand_check(check) if type(check) is list else check for check in checks]
    if namespace == ENTITY_CHANGE:
        body["eventId"] = str(event_id)  # OpenZiti's name for the id of an entity change
    return body


class KeptEvent:
    """A stored event: its id, its JSON object (:attr:`fields`) and its JSON text (:attr:`data`: what the file
    sink writes and the stream sends), both made on first use from the row's facts."""

    __slots__ = ("_data", "_fields", "_record", "id")

    def __init__(self, event_id: int, data: bytes | None,
                 record: tuple[str, str, list[Any]] | None = None) -> None:
        """Args:
            event_id: its number.
            data: its JSON text, when it was stored as such (else None).
            record: else the row's instant and source and the event's stored array.
        """
        self.id = event_id
        self._data = data
        self._record = record
        self._fields: dict[str, Any] | None = None

    @property
    def fields(self) -> Mapping[str, Any]:
        """The whole event as a JSON object (do not mutate it: it may be shared)."""
        if self._fields is None:
            if self._record is not None:
                self._fields = _render(self.id, *self._record)
            else:
                assert self._data is not None
                self._fields = _from_json.decode(self._data)
        return self._fields

    @property
    def data(self) -> bytes:
        """The event's JSON text."""
        if self._data is None:
            self._data = _json.encode(self.fields)
        return self._data
