"""The LMDB environment: one named DB of rows per kind, plus the index DBs derived from each kind's layout.

Rows are dicts keyed by wire names, encoded with msgpack (``storage/rows.py``). Every index a kind's layout
declares (unique, set, ref and composite: ``storage/indexes.py``) is kept in step with every put and delete, so
that no caller maintains them by hand.

Reads open a read transaction inline (microseconds, never blocks) and never keep it across an ``await``. Writes
happen only through :class:`WriteTxn`, which the group-commit writer (``storage/batch.py``, driven by
``controller/data/group_commit.py``) opens; only the writer task ever touches it. This module has no async code at all.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import lmdb

from storage.indexes import Index, layout_indexes, open_indexes
from storage.keys import MAX_KEY_BYTES, check_row_keys, composite_key, is_storable, to_key
from storage.layout import KindLayout
from storage.ownership import StoreInUse, claim, release
from storage.rows import decode, decode_row, encode, projection
from storage.shared_memo import KindMemos, SharedMemo
from storage.write_set import WriteSet

__all__ = ["KindLayout", "ReadTxn", "Reading", "SharedMemo", "Store", "StoreInUse", "UniqueViolation", "WriteSet",
           "WriteTxn"]

def _text(data: bytes | memoryview) -> str:
    return bytes(data).decode()


class UniqueViolation(Exception):
    """A put would give a unique field a value another row already holds."""

    def __init__(self, kind: str, field: str, value: Any) -> None:
        super().__init__(f"duplicate value {value!r} in unique index {kind}.{field}")
        self.kind = kind
        self.field = field
        self.value = value


class _Ended:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("the transaction has ended")


_ENDED: Any = _Ended()


class ReadTxn:
    """Read access to rows and indexes within one consistent snapshot."""

    def __init__(self, store: Store, txn: lmdb.Transaction) -> None:
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
        data = self._txn.get(key, None, self._store._rows[kind])
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
        return 0 < len(key) <= MAX_KEY_BYTES and self._txn.get(key, None, self._store._rows[kind]) is not None

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
        data = self._txn.get(key, None, self._store._rows[kind])
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


class Reading:
    """The context manager :meth:`Store.read` returns: opens the snapshot on entry, ends it on exit. A class rather
    than a generator-based context manager: every actor step opens one, and the generator machinery cost as much as
    the LMDB transaction itself."""

    __slots__ = ("_reader", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._reader: ReadTxn | None = None

    def __enter__(self) -> ReadTxn:
        self._reader = self._store.begin_read()
        return self._reader

    def __exit__(self, *exc: object) -> None:
        reader, self._reader = self._reader, None
        assert reader is not None
        reader.end()


class WriteTxn(ReadTxn):
    """A write transaction: puts and deletes keep every index of the kind in step.

    ``writes`` is the transaction's :class:`~storage.write_set.WriteSet` when it records what it writes (a store
    whose writes are shipped elsewhere, ``Store.record_writes``), else None."""

    def __init__(self, store: Store, txn: lmdb.Transaction, writes: WriteSet | None = None) -> None:
        super().__init__(store, txn)
        self.writes = writes

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
        self._txn.put(key, value, True, True, False, store._rows[kind])
        if self.writes is not None:
            self.writes.rows[(kind, str(row_id))] = bytes(value)

    def delete_raw(self, kind: str, row_id: str) -> bool:
        """Delete a row kept with :meth:`put_raw`; whether there was one."""
        key = str(row_id).encode()
        deleted = 0 < len(key) <= MAX_KEY_BYTES and bool(self._txn.delete(key, b"", self._store._rows[kind]))
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


# The store holds password hashes, TOTP secrets and recovery codes: no other local user may read it.
_DIRECTORY_MODE = 0o700
_FILE_MODE = 0o600


def _private_directory(path: Path) -> None:
    """Create ``path`` (mode 0700) or make an existing one private again, with the files LMDB keeps in it."""
    path.mkdir(mode=_DIRECTORY_MODE, parents=True, exist_ok=True)
    os.chmod(path, _DIRECTORY_MODE)
    for name in ("data.mdb", "lock.mdb"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path / name, _FILE_MODE)


class Store:
    """An LMDB environment holding every kind described by ``layouts``, private to the user running it (the
    directory mode 0700, its files 0600).

    Args:
        path: directory of the environment (created if missing).
        layouts: one layout per kind; their named DBs are opened (and created) up front.
        map_size: the largest the database may grow to (a sparse file; it costs nothing until used).
        durable: fsync on every commit. Only tests and benchmarks of the baseline switch it off.

    Raises:
        StoreInUse: another open store owns ``path`` (``storage/ownership.py``); close that one first.
        storage.indexes.IndexBuildError: a unique index new to this store cannot be built from its rows.
    """

    def __init__(self, path: Path, layouts: Iterable[KindLayout], *, map_size: int = 1 << 35,
                 durable: bool = True) -> None:
        self._layouts = {layout.kind: layout for layout in layouts}
        self.path = path
        _private_directory(path)
        indexes = {kind: layout_indexes(layout) for kind, layout in self._layouts.items()}
        count = sum(1 + len(kind_indexes) for kind_indexes in indexes.values())
        self._owner = claim(path)
        self.env: Any = None
        try:
            self.env = lmdb.open(str(path), max_dbs=count + 8, map_size=map_size, sync=durable,
                                 metasync=durable, readahead=False, mode=_FILE_MODE)
            self._dbs: dict[str, Any] = open_indexes(self.env, indexes)
            self._indexes = {kind: [(index, self._dbs[index.name]) for index in kind_indexes]
                             for kind, kind_indexes in indexes.items()}
            # By kind, looked up on every read: no name to build each time.
            self._rows = {kind: self._dbs[f"r/{kind}"] for kind in self._layouts}
            # The kinds put_raw may write: no index to keep, no shared memo to renew.
            self.raw_kinds = frozenset(kind for kind, layout in self._layouts.items()
                                       if not layout.watched and not indexes[kind])
            self.meta_db = self.env.open_db(b"meta", create=True)
        except BaseException:
            if self.env is not None:
                self.env.close()
            release(self._owner)
            raise
        self.memo = SharedMemo(0)
        self.kind_memos = KindMemos()  # see ReadTxn.kind_memo
        self.writes_held = False  # see held_writes
        # Every outermost write transaction records its write set (storage/write_set.py): set by a replicated store,
        # whose writes are shipped to the other nodes.
        self.record_writes = False

    @contextmanager
    def held_writes(self) -> Iterator[None]:
        """While a writer that keeps LMDB's write lock between commits runs (``controller/data/group_commit.py``). Any
        other write begun on the Trio thread meanwhile would wait for that lock, which only a thread waiting on the Trio
        thread releases: :func:`storage.batch.run_batch` refuses instead, and so does a second writer (RuntimeError)."""
        if self.writes_held:
            raise RuntimeError("a writer already holds this store's writes")
        self.writes_held = True
        try:
            yield
        finally:
            self.writes_held = False

    def memo_token(self) -> object:
        """What identifies the current shared memo's answers: a value derived from the watched kinds and kept
        with this token is current while ``memo_token()`` still returns the same object."""
        return self.memo.entries

    def watched_write(self, txn_id: int) -> None:
        """A write transaction (``txn_id``) touches a watched kind: snapshots from its commit on start a new memo.

        Called before the commit, so no snapshot can see the change while an older memo still claims it."""
        if self.memo.since != txn_id:
            self.memo = SharedMemo(txn_id)

    def write_ended(self) -> None:
        """The writer's transaction committed or aborted. If what touched a watched kind never committed (rolled
        back, or the batch failed), the new memo still describes the last committed data: let snapshots of it
        use the memo instead of waiting for the next write."""
        last = int(self.env.info()["last_txnid"])
        if self.memo.since > last:
            self.memo.since = last
        self.kind_memos.ended(last)

    def layout(self, kind: str) -> KindLayout:
        return self._layouts[kind]

    def kinds(self) -> list[str]:
        """Every kind this store holds."""
        return list(self._layouts)

    def has_kind(self, kind: str) -> bool:
        return kind in self._layouts

    def rows_db(self, kind: str) -> Any:
        return self._rows[kind]

    def index_db(self, prefix: str, kind: str, field: str) -> Any:
        return self._dbs[f"{prefix}/{kind}/{field}"]

    def indexes(self, kind: str) -> list[tuple[Index, Any]]:
        """Every index of ``kind`` with its DB handle (what a put or delete keeps in step, and what a bulk load
        must fill)."""
        return self._indexes[kind]

    def begin_read(self) -> ReadTxn:
        """Open a read snapshot; the caller ends it with :meth:`ReadTxn.end`. Prefer ``with store.read()``."""
        return ReadTxn(self, self.env.begin(write=False))

    def read(self) -> Reading:
        """A read transaction over one consistent snapshot (``with store.read() as txn``); cheap enough to open per
        request and per actor step."""
        return Reading(self)

    def begin_write(self, parent: WriteTxn | None = None, *,
                    record: bool | None = None) -> tuple[WriteTxn, lmdb.Transaction]:
        """Open a write transaction (nested under ``parent`` when given). Only the writer calls this.

        It records its write set when ``record`` says so; by default an outermost one does when the store's
        ``record_writes`` is set, and a nested one when its parent records."""
        if record is None:
            record = self.record_writes if parent is None else parent.writes is not None
        txn = self.env.begin(write=True, parent=parent._txn if parent is not None else None)
        return WriteTxn(self, txn, WriteSet() if record else None), txn

    def adopt(self, other: Store) -> None:
        """Serve from ``other``'s environment from now on, closing this one's: a replica rebuilt elsewhere takes the
        place of the old one while every part keeps its reference to this store. ``other`` holds the same kinds and
        must not be used afterwards.

        Call it with no transaction open on this store (reads never span an ``await``, so between two steps of the
        event loop none is): the shared memos start afresh, since they describe the old data."""
        if other._layouts.keys() != self._layouts.keys():
            raise ValueError("a store can only adopt one holding the same kinds")
        old_env, old_owner = self.env, self._owner
        self.env, self._owner, self.path = other.env, other._owner, other.path
        self._dbs, self._indexes, self._rows = other._dbs, other._indexes, other._rows
        self.raw_kinds, self.meta_db = other.raw_kinds, other.meta_db
        self.memo = SharedMemo(0)
        self.kind_memos = KindMemos()
        old_env.close()
        release(old_owner)

    def close(self) -> None:
        self.env.close()
        release(self._owner)
