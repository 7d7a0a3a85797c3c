"""The LMDB environment: one named DB of rows per kind, plus the index DBs derived from each kind's layout.

Rows are dicts keyed by wire names, encoded with msgpack. Three kinds of index are kept in step with every put
and delete, so that no caller maintains them by hand:

* unique: ``u/<kind>/<field>``: value -> id (names, external ids);
* set: ``s/<kind>/<field>`` (dupsort): element -> ids (role attributes);
* ref: ``f/<kind>/<field>`` (dupsort): value -> ids (back-references such as a config's ``configTypeId``).

Reads open a read transaction inline (microseconds, never blocks). Writes happen only through :class:`WriteTxn`,
which the group-commit writer (``storage/writer.py``) opens in a worker thread. No transaction spans an ``await``:
this module has no async code at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
import msgspec

__all__ = ["KindLayout", "ReadTxn", "Store", "UniqueViolation", "WriteTxn"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def encode(value: Any) -> bytes:
    return _encoder.encode(value)


def decode(data: bytes | memoryview) -> Any:
    return _decoder.decode(data)


def _text(data: bytes | memoryview) -> str:
    return bytes(data).decode()


@dataclass(frozen=True, slots=True)
class KindLayout:
    """Storage layout of one kind: which fields are indexed and how."""

    kind: str
    unique: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()


class UniqueViolation(Exception):
    """A put would give a unique field a value another row already holds."""

    def __init__(self, kind: str, field: str, value: Any) -> None:
        super().__init__(f"duplicate value {value!r} in unique index {kind}.{field}")
        self.kind = kind
        self.field = field
        self.value = value


def _key(value: Any) -> bytes:
    return str(value).encode()


class ReadTxn:
    """Read access to rows and indexes within one consistent snapshot."""

    def __init__(self, store: Store, txn: lmdb.Transaction) -> None:
        self._store = store
        self._txn = txn

    def get(self, kind: str, row_id: str) -> dict[str, Any] | None:
        data = self._txn.get(_key(row_id), db=self._store.rows_db(kind))
        return None if data is None else dict(decode(data))

    def get_many(self, kind: str, ids: Iterable[str]) -> list[dict[str, Any]]:
        """Rows for the ids that exist, in the order given."""
        db = self._store.rows_db(kind)
        rows = []
        for row_id in ids:
            data = self._txn.get(_key(row_id), db=db)
            if data is not None:
                rows.append(dict(decode(data)))
        return rows

    def exists(self, kind: str, row_id: str) -> bool:
        return self._txn.get(_key(row_id), db=self._store.rows_db(kind)) is not None

    def scan(self, kind: str) -> Iterator[dict[str, Any]]:
        """Every row of the kind, in id byte order."""
        with self._txn.cursor(db=self._store.rows_db(kind)) as cursor:
            for _key_bytes, data in cursor:
                yield dict(decode(data))

    def ids(self, kind: str) -> list[str]:
        with self._txn.cursor(db=self._store.rows_db(kind)) as cursor:
            return [_text(k) for k in cursor.iternext(keys=True, values=False)]

    def count(self, kind: str) -> int:
        return int(self._txn.stat(self._store.rows_db(kind))["entries"])

    def by_unique(self, kind: str, field: str, value: Any) -> str | None:
        data = self._txn.get(_key(value), db=self._store.index_db("u", kind, field))
        return None if data is None else _text(data)

    def ids_by_set(self, kind: str, field: str, element: str) -> list[str]:
        return self._dups(self._store.index_db("s", kind, field), element)

    def ids_by_ref(self, kind: str, field: str, value: str) -> list[str]:
        return self._dups(self._store.index_db("f", kind, field), value)

    def set_elements(self, kind: str, field: str) -> list[str]:
        """Distinct elements of an indexed set field across all rows (role attributes in use), sorted."""
        with self._txn.cursor(db=self._store.index_db("s", kind, field)) as cursor:
            return [_text(k) for k in cursor.iternext_nodup(keys=True, values=False)]

    def meta(self, key: str) -> Any:
        data = self._txn.get(key.encode(), db=self._store.meta_db)
        return None if data is None else decode(data)

    def _dups(self, db: Any, value: Any) -> list[str]:
        with self._txn.cursor(db=db) as cursor:
            if not cursor.set_key(_key(value)):
                return []
            return [_text(v) for v in cursor.iternext_dup()]


class WriteTxn(ReadTxn):
    """A write transaction: puts and deletes keep every index of the kind in step."""

    def put(self, kind: str, row: Mapping[str, Any]) -> None:
        """Store ``row`` (replacing the row with its id), updating indexes; raises :class:`UniqueViolation`."""
        layout = self._store.layout(kind)
        row_id = str(row["id"])
        old = self.get(kind, row_id)
        for field in layout.unique:
            value = row.get(field)
            if value is None or (old is not None and old.get(field) == value):
                continue
            holder = self.by_unique(kind, field, value)
            if holder is not None and holder != row_id:
                raise UniqueViolation(kind, field, value)
        if old is not None:
            self._unindex(layout, old)
        self._txn.put(_key(row_id), encode(row), db=self._store.rows_db(kind))
        self._index(layout, row)

    def delete(self, kind: str, row_id: str) -> dict[str, Any] | None:
        """Delete a row and its index entries; returns the deleted row, or None when there was none."""
        old = self.get(kind, row_id)
        if old is None:
            return None
        self._unindex(self._store.layout(kind), old)
        self._txn.delete(_key(row_id), db=self._store.rows_db(kind))
        return old

    def set_meta(self, key: str, value: Any) -> None:
        self._txn.put(key.encode(), encode(value), db=self._store.meta_db)

    def _index(self, layout: KindLayout, row: Mapping[str, Any]) -> None:
        row_id = _key(row["id"])
        for field in layout.unique:
            if row.get(field) is not None:
                self._txn.put(_key(row[field]), row_id, db=self._store.index_db("u", layout.kind, field))
        for field in layout.sets:
            db = self._store.index_db("s", layout.kind, field)
            for element in set(row.get(field) or ()):
                self._txn.put(_key(element), row_id, db=db, dupdata=True)
        for field in layout.refs:
            if row.get(field) is not None:
                self._txn.put(_key(row[field]), row_id, db=self._store.index_db("f", layout.kind, field), dupdata=True)

    def _unindex(self, layout: KindLayout, row: Mapping[str, Any]) -> None:
        row_id = _key(row["id"])
        for field in layout.unique:
            if row.get(field) is not None:
                self._txn.delete(_key(row[field]), db=self._store.index_db("u", layout.kind, field))
        for field in layout.sets:
            db = self._store.index_db("s", layout.kind, field)
            for element in set(row.get(field) or ()):
                self._txn.delete(_key(element), row_id, db=db)
        for field in layout.refs:
            if row.get(field) is not None:
                self._txn.delete(_key(row[field]), row_id, db=self._store.index_db("f", layout.kind, field))


class Store:
    """An LMDB environment holding every kind described by ``layouts``.

    Args:
        path: directory of the environment (created if missing).
        layouts: one layout per kind; their named DBs are opened (and created) up front.
        map_size: the largest the database may grow to (a sparse file; it costs nothing until used).
        durable: fsync on every commit. Only tests and benchmarks of the baseline switch it off.
    """

    def __init__(self, path: Path, layouts: Iterable[KindLayout], *, map_size: int = 1 << 35,
                 durable: bool = True) -> None:
        self._layouts = {layout.kind: layout for layout in layouts}
        path.mkdir(parents=True, exist_ok=True)
        names = [f"r/{kind}" for kind in self._layouts]
        for layout in self._layouts.values():
            names += [f"u/{layout.kind}/{f}" for f in layout.unique]
            names += [f"s/{layout.kind}/{f}" for f in layout.sets]
            names += [f"f/{layout.kind}/{f}" for f in layout.refs]
        self.env = lmdb.open(str(path), max_dbs=len(names) + 8, map_size=map_size, sync=durable,
                             metasync=durable, readahead=False)
        self._dbs: dict[str, Any] = {}
        for name in names:
            dupsort = name[0] in "sf"
            self._dbs[name] = self.env.open_db(name.encode(), dupsort=dupsort, create=True)
        self.meta_db = self.env.open_db(b"meta", create=True)

    def layout(self, kind: str) -> KindLayout:
        return self._layouts[kind]

    def rows_db(self, kind: str) -> Any:
        return self._dbs[f"r/{kind}"]

    def index_db(self, prefix: str, kind: str, field: str) -> Any:
        return self._dbs[f"{prefix}/{kind}/{field}"]

    @contextmanager
    def read(self) -> Iterator[ReadTxn]:
        """A read transaction over one consistent snapshot; cheap enough to open per request."""
        txn = self.env.begin(write=False)
        try:
            yield ReadTxn(self, txn)
        finally:
            txn.abort()

    def begin_write(self, parent: WriteTxn | None = None) -> tuple[WriteTxn, lmdb.Transaction]:
        """Open a write transaction (nested under ``parent`` when given). Only the writer calls this."""
        txn = self.env.begin(write=True, parent=parent._txn if parent is not None else None)
        return WriteTxn(self, txn), txn

    def close(self) -> None:
        self.env.close()
