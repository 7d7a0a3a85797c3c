"""The memo of answers derived from a store's watched kinds, shared across read snapshots (``storage/store.py``)."""

from __future__ import annotations

from typing import Any

__all__ = ["SharedMemo"]


class SharedMemo:
    """Answers derived only from the store's watched kinds, shared by every snapshot that sees its last change.

    ``since`` is the id of the write transaction that last touched a watched kind; a snapshot older than that
    must not use ``entries``. Replaced (never cleared in place) when a watched kind is written, so a reader that
    still holds the old one only ever fills a dict nobody will read again.
    """

    __slots__ = ("entries", "since")

    # Derived answers are keyed by ids and role combinations; a pathological number of distinct combinations must
    # not grow the memo without end: past this many entries it starts again empty.
    LIMIT = 200_000

    def __init__(self, since: int) -> None:
        self.since = since
        self.entries: dict[Any, Any] = {}
