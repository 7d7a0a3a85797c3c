"""What a write transaction changed, by key: the write set a replicated store ships elsewhere.

A :class:`~storage.store.WriteTxn` that records (``Store.record_writes``, or a transaction nested under one that
records) notes, for every row it puts or deletes and every meta key it sets, the bytes it stored there (None for a
delete). Only the last write to a key counts: a row put and then deleted in one transaction is a delete. A nested
transaction records into its own set, which its parent takes over when it commits (``storage/batch.py``) and which is
dropped with it when it aborts, so a mutation that failed leaves nothing in its batch's set.
"""

from __future__ import annotations

__all__ = ["RowKey", "WriteSet"]

RowKey = tuple[str, str]
"""A row's place in the store: its kind and its id."""


class WriteSet:
    """The rows (by kind and id) and meta keys a transaction wrote, with the bytes it stored (None: deleted), in
    the order each key was first written."""

    __slots__ = ("meta", "rows")

    def __init__(self) -> None:
        self.rows: dict[RowKey, bytes | None] = {}
        self.meta: dict[str, bytes | None] = {}

    def __len__(self) -> int:
        return len(self.rows) + len(self.meta)

    def __bool__(self) -> bool:
        return bool(self.rows or self.meta)

    def absorb(self, other: WriteSet) -> None:
        """Take over what ``other`` (a committed nested transaction's set) wrote: its bytes win."""
        self.rows.update(other.rows)
        self.meta.update(other.meta)

    def payload_bytes(self) -> int:
        """The bytes of every value and key name written (what a shipment of it carries, framing aside)."""
        size = sum(len(kind) + len(row_id) + (len(data) if data else 0) for (kind, row_id), data in self.rows.items())
        return size + sum(len(key) + (len(data) if data else 0) for key, data in self.meta.items())
