"""Writing the store: :class:`WriteTxn`, whose puts and deletes keep every index of a kind in step.

Only the group-commit writer opens one (``storage/batch.py``, driven by ``controller/data/group_commit.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lmdb

from storage.keys import MAX_KEY_BYTES, check_row_keys, is_storable, to_key
from storage.layout import KindLayout
from storage.read_txn import ReadTxn, Tables
from storage.rows import encode
from storage.write_set import WriteSet

__all__ = ["UniqueViolation", "WriteTxn"]


class UniqueViolation(Exception):
    """A put would give a unique field a value another row already holds."""

    def __init__(self, kind: str, field: str, value: Any) -> None:
        super().__init__(f"duplicate value {value!r} in unique index {kind}.{field}")
        self.kind = kind
        self.field = field
        self.value = value


class WriteTxn(ReadTxn):
    """A write transaction: puts and deletes keep every index of the kind in step.

    ``writes`` is the transaction's :class:`~storage.write_set.WriteSet` when it records what it writes (a store
    whose writes are shipped elsewhere, ``Store.record_writes``), else None; ``parent`` the transaction it is nested
    in, if any."""

    def __init__(self, store: Tables, txn: lmdb.Transaction, writes: WriteSet | None = None,
                 parent: WriteTxn | None = None) -> None:
        super().__init__(store, txn)
        self.writes = writes
        self.parent = parent

    def batch_wrote(self, kind: str, row_id: str) -> bool:
        """Whether this transaction, or one it is nested in, wrote the row and still holds that write (a nested
        transaction that wrote it and rolled back does not count). Known only while writes are recorded: False
        otherwise."""
        txn: WriteTxn | None = self
        while txn is not None:
            if txn.writes is None:
                return False
            if (kind, row_id) in txn.writes.rows:
                return True
            txn = txn.parent
        return False

    def put(self, kind: str, row: Mapping[str, Any]) -> None:
        """Store ``row`` (replacing the row with its id), updating indexes.

        Raises:
            UniqueViolation: a unique field's value is held by another row.
            storage.keys.UnstorableValue: the id or an indexed value is empty or too long to be a key; nothing
                is written.
        """
        layout = self._store.layout(kind)
        row_id = str(row["id"])
        key = to_key(row_id)
        # Every key the row goes under, made once: checked before anything is written, then put. (No list at all
        # for a kind without indexes: the actors' state is put on every step.)
        indexes = self._store.indexes(kind)
        entries = [(index, db, index.keys(row)) for index, db in indexes] if indexes else ()
        if not is_storable(key) or (entries and not all(is_storable(k) for _i, _db, keys in entries for k in keys)):
            check_row_keys(layout, row)  # raises, naming the field and the value
        if layout.watched:
            self._store.watched_write(self._txn.id())
        self._store.kind_memos.written(kind, self._txn.id())
        data = encode(row)
        if not entries:
            # Nothing to keep in step (the identity actors' state, written on every step): no need to read and
            # decode the row this replaces.
            self._txn.put(key, data, db=self._store.rows_db(kind))
            if self.writes is not None:
                self.writes.rows[(kind, row_id)] = data
            return
        old = self.get(kind, row_id)
        for index, db, keys in entries:
            if not index.unique or not keys:
                continue
            [field] = index.fields
            if old is not None and old.get(field) == row.get(field):
                continue
            holder = self._txn.get(keys[0], db=db)
            if holder is not None and holder != key:
                raise UniqueViolation(kind, field, row.get(field))
        if old is not None:
            self._unindex(layout, old)
        self._txn.put(key, data, db=self._store.rows_db(kind))
        for _index, db, keys in entries:
            for index_key in keys:
                self._txn.put(index_key, key, db=db)
        if self.writes is not None:  # recorded once written: a put refused above leaves no trace
            self.writes.rows[(kind, row_id)] = data

    def put_raw(self, kind: str, row_id: str, value: bytes) -> None:
        """Store ``value`` as the row ``row_id`` of a kind the caller encodes itself (the identity actors' state):
        no index, no decoding of what it replaces; read it back with :meth:`get_raw`.

        Raises:
            ValueError: the kind has indexes or is watched (:meth:`put` keeps those in step).
            storage.keys.UnstorableValue: ``row_id`` cannot be a key.
        """
        store = self._store
        if kind not in store.raw_kinds:
            raise ValueError(f"{kind} keeps indexes: put its rows with put()")
        key = str(row_id).encode()
        if not 0 < len(key) <= MAX_KEY_BYTES:
            check_row_keys(store.layout(kind), {"id": row_id})
        self._txn.put(key, value, True, True, False, store.rows_by_kind[kind])
        if self.writes is not None:
            self.writes.rows[(kind, str(row_id))] = bytes(value)

    def delete_raw(self, kind: str, row_id: str) -> bool:
        """Delete a row kept with :meth:`put_raw`; whether there was one."""
        key = str(row_id).encode()
        deleted = 0 < len(key) <= MAX_KEY_BYTES and bool(self._txn.delete(key, b"", self._store.rows_by_kind[kind]))
        if deleted and self.writes is not None:
            self.writes.rows[(kind, str(row_id))] = None
        return deleted

    def delete_raw_through(self, kind: str, last: str) -> int:
        """Delete every row kept with :meth:`put_raw` whose id is at most ``last`` in byte order (the oldest rows of
        a kind keyed in order), walking one cursor; how many."""
        bound = last.encode()
        deleted = 0
        with self._txn.cursor(db=self._store.rows_db(kind)) as cursor:
            found = cursor.first()
            while found and cursor.key() <= bound:
                found = cursor.delete()  # moves to the next row
                deleted += 1
        if deleted and self.writes is not None:
            self.writes.clear_through(kind, last)
        return deleted

    def delete(self, kind: str, row_id: str, *, stored: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Delete a row and its index entries; returns the deleted row, or None when there was none.

        ``stored``: the row as this transaction holds it now, when the caller has just read it and written nothing
        since (spares decoding it again); its index entries are the ones removed.
        """
        old = self.get(kind, row_id) if stored is None else stored
        if old is None:
            return None
        layout = self._store.layout(kind)
        if layout.watched:
            self._store.watched_write(self._txn.id())
        self._store.kind_memos.written(kind, self._txn.id())
        self._unindex(layout, old)
        self._txn.delete(to_key(row_id), db=self._store.rows_db(kind))
        if self.writes is not None:
            self.writes.rows[(kind, str(row_id))] = None
        return old

    def put_many(self, db: Any, items: list[tuple[bytes, bytes]], *, dupdata: bool) -> int:
        """Bulk-load raw ``(key, value)`` pairs into ``db`` (one of this store's DBs) and return how many were new.

        Keeps no index in step and does not start a new :class:`SharedMemo`: only for seeding kinds that are not
        watched, where the caller writes every index entry itself. An existing key is kept as it is (``dupdata``:
        an existing pair).

        Raises:
            RuntimeError: the transaction records its writes (which DB holds which kind is not known here).
        """
        if self.writes is not None:
            raise RuntimeError("a bulk load cannot be recorded: load a store whose writes are not shipped elsewhere")
        self._store.kind_memos.all_written(self._txn.id())  # which kind ``db`` belongs to is not known here
        with self._txn.cursor(db=db) as cursor:
            _consumed, added = cursor.putmulti(items, dupdata=dupdata, overwrite=dupdata)
        return int(added)

    def set_meta(self, key: str, value: Any, *, local: bool = False) -> None:
        """Set a meta key; ``local``: this store's own bookkeeping, never recorded (``writes``)."""
        data = encode(value)
        self._txn.put(key.encode(), data, db=self._store.meta_db)
        if self.writes is not None and not local:
            self.writes.meta[key] = data

    def delete_meta(self, key: str) -> None:
        """Delete a meta key (recorded as a delete when the transaction records)."""
        self._txn.delete(key.encode(), db=self._store.meta_db)
        if self.writes is not None:
            self.writes.meta[key] = None

    def _unindex(self, layout: KindLayout, row: Mapping[str, Any]) -> None:
        row_id = to_key(row["id"])
        for index, db in self._store.indexes(layout.kind):
            for key in index.keys(row):
                # The value selects the pair in a dupsort DB; a unique DB (one value per key) ignores it.
                self._txn.delete(key, row_id, db=db)
