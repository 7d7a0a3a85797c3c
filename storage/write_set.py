"""What a write transaction changed, by key: the write set a replicated store ships elsewhere.

A :class:`~storage.store.WriteTxn` that records (``Store.record_writes``, or a transaction nested under one that
records) notes, for every row it puts or deletes and every meta key it sets, the bytes it stored there (None for a
delete). Only the last write to a key counts: a row put and then deleted in one transaction is a delete. A nested
transaction records into its own set, which its parent takes over when it commits (``storage/batch.py``) and which is
dropped with it when it aborts, so a mutation that failed leaves nothing in its batch's set.

A kind keyed in order may be cleared up to a key in one step (:meth:`WriteSet.clear_through`, the event log's
trim): the set then holds the bound, not every key it removed, and ships as one range delete. Rows a transaction
puts after clearing must lie beyond the bound (their keys keep growing), as the ones it keeps do.
"""

from __future__ import annotations

__all__ = ["RowKey", "WriteSet"]

RowKey = tuple[str, str]
"""A row's place in the store: its kind and its id."""


class WriteSet:
    """The rows (by kind and id) and meta keys a transaction wrote, with the bytes it stored (None: deleted), in
    the order each key was first written."""

    __slots__ = ("cleared", "meta", "rows")

    def __init__(self) -> None:
        self.rows: dict[RowKey, bytes | None] = {}
        self.meta: dict[str, bytes | None] = {}
        self.cleared: dict[str, str] = {}  # by kind: every row whose id is at most this (byte order) is deleted

    def __len__(self) -> int:
        return len(self.rows) + len(self.meta) + len(self.cleared)

    def __bool__(self) -> bool:
        return bool(self.rows or self.meta or self.cleared)

    def clear_through(self, kind: str, last: str) -> None:
        """Record that every row of ``kind`` whose id is at most ``last`` in byte order was deleted: the rows this
        set wrote there go (the range covers them)."""
        bound = last.encode()
        for key in [key for key in self.rows if key[0] == kind and key[1].encode() <= bound]:
            del self.rows[key]
        held = self.cleared.get(kind)
        if held is None or held.encode() < bound:
            self.cleared[kind] = last

    def absorb(self, other: WriteSet) -> None:
        """Take over what ``other`` (a committed nested transaction's set) wrote: its bytes win."""
        for kind, last in other.cleared.items():
            self.clear_through(kind, last)
        self.rows.update(other.rows)
        self.meta.update(other.meta)
