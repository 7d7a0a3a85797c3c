"""The memo of answers derived from a store's watched kinds, shared across read snapshots (``storage/store.py``)."""

from __future__ import annotations

from typing import Any

__all__ = ["KindMemos", "SharedMemo"]


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


class KindMemos:
    """A :class:`SharedMemo` per kind: answers derived from the rows of one kind alone (decoded projections, index
    lookups), renewed by every write to that kind and shared by the snapshots that see its last write.

    The writer's thread calls :meth:`ended` while readers on the Trio thread may add a kind's memo.
    """

    __slots__ = ("memos", "since")

    def __init__(self) -> None:
        self.memos: dict[str, SharedMemo] = {}
        self.since = 0  # a kind's memo made on first use is valid from here on

    def entries(self, kind: str, txn_id: int) -> dict[Any, Any] | None:
        """The entries a snapshot ``txn_id`` may read and fill for ``kind``, or None when it predates the kind's
        last write."""
        memo = self.memos.get(kind)
        if memo is None:
            # setdefault: never replace a memo the writer made meanwhile for a write to this kind.
            memo = self.memos.setdefault(kind, SharedMemo(self.since))
        if txn_id < memo.since:
            return None
        if len(memo.entries) > SharedMemo.LIMIT:
            memo.entries = {}
        return memo.entries

    def written(self, kind: str, txn_id: int) -> None:
        """The write transaction ``txn_id`` writes a row of ``kind`` (called before its commit)."""
        memo = self.memos.get(kind)
        if memo is None or memo.since != txn_id:
            self.memos[kind] = SharedMemo(txn_id)

    def all_written(self, txn_id: int) -> None:
        """The write transaction ``txn_id`` writes rows of kinds it does not name: every memo is renewed."""
        self.memos = {}
        self.since = txn_id

    def ended(self, last: int) -> None:
        """The writer's transaction ended and ``last`` is the last committed one: memos renewed for a write that
        never committed describe the committed data again."""
        if self.since > last:
            self.since = last
        for memo in list(self.memos.values()):  # a copy: readers may add a memo meanwhile
            if memo.since > last:
                memo.since = last
