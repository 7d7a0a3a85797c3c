"""A stored event as the log, the hub and the sinks pass it around: its id and its JSON text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["KeptEvent", "event_key"]

_decoder = msgspec.json.Decoder(dict[str, Any])


def event_key(event_id: int) -> str:
    """The row id of event ``event_id``: fixed-width, so that key order is id order."""
    return f"{event_id:020d}"


class KeptEvent:
    """A stored event: its id, its JSON text (what the file sink writes and the stream sends), and its fields,
    decoded on first use."""

    __slots__ = ("_fields", "data", "id")

    def __init__(self, event_id: int, data: bytes, fields: Mapping[str, Any] | None = None) -> None:
        self.id = event_id
        self.data = data
        self._fields = fields

    @property
    def fields(self) -> Mapping[str, Any]:
        """The whole event as a JSON object (do not mutate it: it may be shared)."""
        if self._fields is None:
            self._fields = _decoder.decode(self.data)
        return self._fields
