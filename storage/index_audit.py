"""The store's own consistency: index entries against the rows they are derived from, checked in bounded chunks and
repaired one entry at a time.

:meth:`storage.store.WriteTxn.put` and :meth:`~storage.store.WriteTxn.delete` keep every index in step with its
rows, so a disagreement means the data was damaged (a disk fault, a bug in an earlier version, a hand edit). Two
kinds of damage are found here:

* a **missing entry**: a row holds a value its layout indexes, but the index lacks the pair (key, row id), so
  lookups by that value (unique names, role attributes, back-references) miss the row;
* a **stray entry**: an index holds a pair whose row does not exist or no longer holds the value, so lookups find a
  row that is not there or does not match.

Every function reads or writes inside the transaction it is given and never keeps a cursor past its return, so a
caller can check a large store in chunks, each in its own short read transaction. Each repair re-checks the damage
in its own write transaction first: a chunk checked in an older snapshot may have been repaired (or changed) since.

This module is part of the store: it reads the raw LMDB transaction and the index handles of
:class:`~storage.store.ReadTxn`, which no caller outside ``storage`` touches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from storage.indexes import Index
from storage.keys import is_storable, to_key
from storage.store import ReadTxn, WriteTxn

__all__ = [
    "IndexEntry",
    "IndexPosition",
    "index_names",
    "missing_entries",
    "remove_entry",
    "restore_entry",
    "rows_after",
    "stray_entries",
    "unique_rival",
]

# Where a scan of one index DB stopped: the last (key, row id) pair it looked at.
IndexPosition = tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One pair of an index DB: ``key`` (an indexed value, as stored) maps to the row ``row_id`` of ``kind``."""

    index: str
    kind: str
    key: bytes
    row_id: str

    @property
    def value_text(self) -> str:
        """The indexed value for a person to read: a composite key's values joined by ``+``."""
        if self.index.startswith("c/"):
            parts, rest = [], self.key
            while len(rest) >= 2:
                size = int.from_bytes(rest[:2], "big")
                parts.append(rest[2:2 + size].decode(errors="replace"))
                rest = rest[2 + size:]
            return "+".join(parts)
        return self.key.decode(errors="replace")


def _raw(txn: ReadTxn) -> Any:
    return txn._txn


def _index(txn: ReadTxn, kind: str, name: str) -> tuple[Index, Any]:
    for index, db in txn._store.indexes(kind):
        if index.name == name:
            return index, db
    raise KeyError(f"{kind} has no index {name}")


def index_names(txn: ReadTxn, kind: str) -> tuple[str, ...]:
    """The names of every index DB of ``kind`` (``u/<kind>/<field>``, ...), in its layout's order."""
    return tuple(index.name for index, _db in txn._store.indexes(kind))


def rows_after(txn: ReadTxn, kind: str, after: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
    """At most ``limit`` rows of ``kind`` as ``(key, stored bytes)``, the first one after the key ``after`` (from
    the first row when None), in key byte order. Keys are raw bytes, so that a scan resumes exactly where it
    stopped whatever a damaged key holds."""
    found: list[tuple[bytes, bytes]] = []
    with _raw(txn).cursor(db=txn._store.rows_db(kind)) as cursor:
        if after is None:
            positioned = cursor.first()
        else:
            positioned = cursor.set_range(after)
            if positioned and cursor.key() == after:
                positioned = cursor.next()
        while positioned and len(found) < limit:
            found.append((bytes(cursor.key()), bytes(cursor.value())))
            positioned = cursor.next()
    return found


def _has_pair(raw: Any, index: Index, db: Any, key: bytes, row_key: bytes) -> bool:
    if index.unique:
        return bool(raw.get(key, db=db) == row_key)
    with raw.cursor(db=db) as cursor:
        return bool(cursor.set_key_dup(key, row_key))


def missing_entries(txn: ReadTxn, kind: str, row_id: str, row: Mapping[str, Any]) -> list[IndexEntry]:
    """The entries of ``row`` (the stored row ``row_id`` of ``kind``) that its indexes lack. A key LMDB could not
    hold is not expected in any index (a put refuses such a row), so it is skipped."""
    raw, row_key = _raw(txn), to_key(row_id)
    missing = []
    for index, db in txn._store.indexes(kind):
        for key in index.keys(row):
            if is_storable(key) and not _has_pair(raw, index, db, key, row_key):
                missing.append(IndexEntry(index.name, kind, key, row_id))
    return missing


def unique_rival(txn: ReadTxn, entry: IndexEntry) -> str | None:
    """For an entry of a unique index that its row lacks: the other row the key maps to when that row holds the
    value too (two rows share a value that must be unique); None when there is no such row (always None for other
    indexes, where a key maps to many ids)."""
    index, db = _index(txn, entry.kind, entry.index)
    if not index.unique:
        return None
    holder = _raw(txn).get(entry.key, db=db)
    if holder is None:
        return None
    holder_id = bytes(holder).decode()
    return holder_id if holder_id != entry.row_id and _holds(txn, index, entry.kind, holder_id, entry.key) else None


def _holds(txn: ReadTxn, index: Index, kind: str, row_id: str, key: bytes) -> bool:
    """Whether the row ``row_id`` exists and holds the value ``key`` stands for. A row that cannot be decoded
    counts as holding it: what it holds is unknown, and the row itself is the damage to report."""
    try:
        row = txn.get(kind, row_id)
    except msgspec.DecodeError:
        return True
    return row is not None and key in index.keys(row)


def stray_entries(txn: ReadTxn, kind: str, name: str, after: IndexPosition | None,
                  limit: int) -> tuple[list[IndexEntry], IndexPosition | None]:
    """Look at most ``limit`` pairs of the index ``name`` of ``kind``, the first one after ``after`` (from the start
    when None), in (key, id) byte order.

    Returns:
        The pairs whose row is missing or no longer holds the value, and where to go on from (None once the index
        is done).
    """
    index, db = _index(txn, kind, name)
    stray: list[IndexEntry] = []
    last: IndexPosition | None = None
    seen = 0
    with _raw(txn).cursor(db=db) as cursor:
        positioned = _seek_after(cursor, after, dupsort=not index.unique)
        while positioned and seen < limit:
            key, row_key = bytes(cursor.key()), bytes(cursor.value())
            row_id = row_key.decode(errors="replace")
            if not _holds(txn, index, kind, row_id, key):
                stray.append(IndexEntry(name, kind, key, row_id))
            last = (key, row_key)
            seen += 1
            positioned = cursor.next()
    return stray, (last if positioned else None)


def _seek_after(cursor: Any, after: IndexPosition | None, *, dupsort: bool) -> bool:
    """Put ``cursor`` on the first pair after ``after``; whether there is one."""
    if after is None:
        return bool(cursor.first())
    key, value = after
    if dupsort and cursor.set_range_dup(key, value):
        return bool(cursor.next()) if cursor.value() == value else True
    # The key is gone, or it has no id at or after ``value``: go on from the next key.
    if not cursor.set_range(key):
        return False
    if cursor.key() == key:
        return bool(cursor.next_nodup()) if dupsort else bool(cursor.next())
    return True


def restore_entry(txn: WriteTxn, entry: IndexEntry) -> bool:
    """Put a missing entry back, if its row still holds the value and still lacks the entry.

    An entry of a unique index replaces the id its key maps to only when that id's row does not hold the value
    (a stray entry); when it does, two rows hold one unique value and neither can be chosen here.

    Returns:
        Whether the entry is as its row requires now (put back, or no longer missing); False for two rows holding
        one unique value.
    """
    index, db = _index(txn, entry.kind, entry.index)
    raw, row_key = _raw(txn), to_key(entry.row_id)
    if not _holds(txn, index, entry.kind, entry.row_id, entry.key) or _has_pair(raw, index, db, entry.key, row_key):
        return True
    if unique_rival(txn, entry) is not None:
        return False
    _written(txn, entry.kind)
    raw.put(entry.key, row_key, db=db)
    return True


def remove_entry(txn: WriteTxn, entry: IndexEntry) -> None:
    """Delete a stray entry, if its row is still missing or still does not hold the value. Afterwards the entry is
    gone or its row holds the value again: either way nothing is stray."""
    index, db = _index(txn, entry.kind, entry.index)
    raw, row_key = _raw(txn), to_key(entry.row_id)
    if _has_pair(raw, index, db, entry.key, row_key) and not _holds(txn, index, entry.kind, entry.row_id, entry.key):
        _written(txn, entry.kind)
        # The value selects the pair in a dupsort DB; a unique DB (one value per key) ignores it.
        raw.delete(entry.key, row_key, db=db)


def _written(txn: WriteTxn, kind: str) -> None:
    """An index of ``kind`` is about to change: the memos of answers derived from the kind (``SharedMemo``) are
    stale from this commit on, as after any put or delete of its rows."""
    store, txn_id = txn._store, _raw(txn).id()
    if store.layout(kind).watched:
        store.watched_write(txn_id)
    store.kind_memos.written(kind, txn_id)
