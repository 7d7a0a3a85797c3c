"""Reading the store: :class:`ReadTxn`, one consistent LMDB snapshot of rows and indexes.

A transaction reaches the environment's tables through :class:`Tables`, the part of :class:`storage.store.Store` it
uses. Reads never wait: a snapshot opens inline and ends before the caller's next ``await``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, Protocol

import lmdb

from storage.indexes import Index
from storage.keys import MAX_KEY_BYTES, composite_key, is_storable, to_key
from storage.layout import KindLayout
from storage.rows import decode, decode_row, projection
from storage.shared_memo import KindMemos, SharedMemo

__all__ = ["ReadTxn", "Tables"]


class Tables(Protocol):
    """The store's side of a transaction: its named DBs by kind, its memos, and the watch on written kinds."""

    @property
    def rows_by_kind(self) -> Mapping[str, Any]: ...

    @property
    def raw_kinds(self) -> frozenset[str]: ...

    @property
    def meta_db(self) -> Any: ...

    @property
    def memo(self) -> SharedMemo: ...

    @property
    def kind_memos(self) -> KindMemos: ...

    def layout(self, kind: str) -> KindLayout: ...

    def rows_db(self, kind: str) -> Any: ...

    def index_db(self, prefix: str, kind: str, field: str) -> Any: ...

    def indexes(self, kind: str) -> list[tuple[Index, Any]]: ...

    def watched_write(self, txn_id: int) -> None: ...


def _text(data: bytes | memoryview) -> str:
    return bytes(data).decode()


class _Ended:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("the transaction has ended")


_ENDED: Any = _Ended()


class ReadTxn:
    """Read access to rows and indexes within one consistent snapshot."""

    def __init__(self, store: Tables, txn: lmdb.Transaction) -> None:
        self._store = store
        self._txn: Any = txn
        self._cursors: list[lmdb.Cursor] = []

    def release(self) -> None:
        """Forget the ended transaction; any later use raises instead of reading a stale snapshot."""
        self._txn = _ENDED

    def end(self) -> None:
        """End a read snapshot: close its scans' cursors, abort it and release it."""
        self.close_cursors()
        self._txn.abort()
        # py-lmdb keeps a read transaction's reader slot while the Transaction object lives, even after abort; a
        # suspended scan or a lingering context must not pin it, so drop our reference now.
        self.release()

    def shared_memo(self) -> dict[Any, Any] | None:
        """The memo of answers derived from the watched kinds that this snapshot may read and fill, or None when
        the snapshot predates the last write to a watched kind (see :class:`SharedMemo`)."""
        memo = self._store.memo
        if self._txn.id() < memo.since:
            return None
        if len(memo.entries) > SharedMemo.LIMIT:
            memo.entries = {}
        return memo.entries

    def kind_memo(self, kind: str) -> dict[Any, Any] | None:
        """The memo of answers derived from the rows of ``kind`` alone that this snapshot may read and fill, or
        None when the snapshot predates the kind's last write (:class:`~storage.shared_memo.KindMemos`)."""
        return self._store.kind_memos.entries(kind, self._txn.id())

    def close_cursors(self) -> None:
        """Close the cursors of unfinished scans; called when the transaction ends."""
        for cursor in self._cursors:
            cursor.close()
        self._cursors.clear()

    # Lookups by a value that no put could have stored (an empty or overlong id or name from a request) find
    # nothing, instead of reaching LMDB, which would raise.

    def get(self, kind: str, row_id: str) -> dict[str, Any] | None:
        key = str(row_id).encode()  # to_key and is_storable, inline: rows are read on every path
        if not 0 < len(key) <= MAX_KEY_BYTES:
            return None
        data = self._txn.get(key, None, self._store.rows_by_kind[kind])
        return None if data is None else decode_row(data)

    def get_many(self, kind: str, ids: Iterable[str], fields: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Rows for the ids that exist, in the order given; only ``fields`` of each when given
        (:func:`storage.rows.projection`)."""
        db = self._store.rows_db(kind)
        decode_data = projection(fields)
        rows = []
        for row_id in ids:
            key = to_key(row_id)
            data = self._txn.get(key, db=db) if is_storable(key) else None
            if data is not None:
                rows.append(decode_data(data))
        return rows

    def exists(self, kind: str, row_id: str) -> bool:
        key = str(row_id).encode()
        return 0 < len(key) <= MAX_KEY_BYTES and self._txn.get(key, None, self._store.rows_by_kind[kind]) is not None

    def scan(self, kind: str, fields: frozenset[str] | None = None) -> Iterator[dict[str, Any]]:
        """Every row of the kind, in id byte order (valid only while the transaction is open); only ``fields`` of
        each when given (:func:`storage.rows.projection`)."""
        decode_data = projection(fields)
        cursor = self._txn.cursor(db=self._store.rows_db(kind))
        # A cursor left open by an unfinished iteration would pin its reader slot after the transaction ends
        # (py-lmdb keeps the slot while any cursor lives), so the transaction closes its cursors when it ends.
        self._cursors.append(cursor)
        with cursor:
            for _key_bytes, data in cursor:
                yield decode_data(data)

    def get_raw(self, kind: str, row_id: str) -> bytes | None:
        """The stored bytes of a row of a kind kept with :meth:`WriteTxn.put_raw`, undecoded (None when absent)."""
        key = str(row_id).encode()
        if not 0 < len(key) <= MAX_KEY_BYTES:
            return None
        data = self._txn.get(key, None, self._store.rows_by_kind[kind])
        return None if data is None else bytes(data)

    def scan_raw(self, kind: str) -> Iterator[tuple[str, bytes]]:
        """Every ``(id, stored bytes)`` of a kind kept with :meth:`WriteTxn.put_raw`, in id byte order (valid only
        while the transaction is open)."""
        cursor = self._txn.cursor(db=self._store.rows_db(kind))
        self._cursors.append(cursor)  # closed when the transaction ends, as scan's
        with cursor:
            for key_bytes, data in cursor:
                yield _text(key_bytes), bytes(data)

    def scan_raw_from(self, kind: str, start: str | None, *, reverse: bool = False) -> Iterator[tuple[str, bytes]]:
        """Every ``(id, stored bytes)`` of a kind kept with :meth:`WriteTxn.put_raw` from ``start`` on, in id byte
        order, or from ``start`` back when ``reverse`` (``start`` itself included when present; None: from the
        first, or the last, id). Valid only while the transaction is open."""
        cursor = self._txn.cursor(db=self._store.rows_db(kind))
        self._cursors.append(cursor)  # closed when the transaction ends, as scan's
        with cursor:
            key = None if start is None else start.encode()
            if key is None:
                found = cursor.last() if reverse else cursor.first()
            elif not reverse:
                found = cursor.set_range(key)
            elif not cursor.set_range(key):  # every key is before start
                found = cursor.last()
            else:  # at the first key at or after start: step back unless it is start itself
                found = True if cursor.key() == key else cursor.prev()
            step = cursor.prev if reverse else cursor.next
            while found:
                yield _text(cursor.key()), bytes(cursor.value())
                found = step()

    def last_raw(self, kind: str) -> tuple[str, bytes] | None:
        """The ``(id, stored bytes)`` of the last row, in id byte order, of a kind kept with :meth:`WriteTxn.put_raw`
        (None: the kind has no row). One cursor step, where a scan would cost a generator and its closing: the event
        log numbers every write's events from its last row."""
        with self._txn.cursor(db=self._store.rows_db(kind)) as cursor:
            if not cursor.last():
                return None
            return _text(cursor.key()), bytes(cursor.value())

    def ids(self, kind: str, offset: int = 0, limit: int | None = None) -> list[str]:
        """The kind's ids in byte order, from the ``offset``-th, at most ``limit`` of them; no row is read."""
        with self._txn.cursor(db=self._store.rows_db(kind)) as cursor:
            keys = islice(cursor.iternext(keys=True, values=False), offset, None if limit is None else offset + limit)
            return [_text(k) for k in keys]

    def count(self, kind: str) -> int:
        return int(self._txn.stat(self._store.rows_db(kind))["entries"])

    def by_unique(self, kind: str, field: str, value: Any) -> str | None:
        key = to_key(value)
        if not is_storable(key):
            return None
        data = self._txn.get(key, db=self._store.index_db("u", kind, field))
        return None if data is None else _text(data)

    def ids_by_set(self, kind: str, field: str, element: str) -> list[str]:
        return self._dups(self._store.index_db("s", kind, field), to_key(element))

    def count_by_set(self, kind: str, field: str, element: str) -> int:
        """How many rows hold ``element`` in the indexed set ``field``, without reading their ids."""
        key = to_key(element)
        if not is_storable(key):
            return 0
        with self._txn.cursor(db=self._store.index_db("s", kind, field)) as cursor:
            return int(cursor.count()) if cursor.set_key(key) else 0

    def ids_by_ref(self, kind: str, field: str, value: str) -> list[str]:
        return self._dups(self._store.index_db("f", kind, field), to_key(value))

    def ids_by_fields(self, kind: str, fields: tuple[str, ...], values: tuple[Any, ...]) -> list[str]:
        """Ids of the rows whose ``fields`` hold ``values`` (a composite index of the kind's layout)."""
        return self._dups(self._store.index_db("c", kind, "+".join(fields)), composite_key(values))

    def set_elements(self, kind: str, field: str) -> list[str]:
        """Distinct elements of an indexed set field across all rows (role attributes in use), sorted."""
        with self._txn.cursor(db=self._store.index_db("s", kind, field)) as cursor:
            return [_text(k) for k in cursor.iternext_nodup(keys=True, values=False)]

    def meta(self, key: str) -> Any:
        data = self._txn.get(key.encode(), db=self._store.meta_db)
        return None if data is None else decode(data)

    def _dups(self, db: Any, key: bytes) -> list[str]:
        if not is_storable(key):
            return []
        with self._txn.cursor(db=db) as cursor:
            if not cursor.set_key(key):
                return []
            return [_text(v) for v in cursor.iternext_dup()]
