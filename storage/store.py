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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from storage.indexes import Index, layout_indexes, open_indexes
from storage.layout import KindLayout
from storage.ownership import StoreInUse, claim, release
from storage.read_txn import ReadTxn
from storage.shared_memo import KindMemos, SharedMemo
from storage.write_set import WriteSet
from storage.write_txn import UniqueViolation, WriteTxn

__all__ = ["KindLayout", "ReadTxn", "Reading", "SharedMemo", "Store", "StoreInUse", "UniqueViolation", "WriteSet",
           "WriteTxn"]


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
        sync_meta: with ``durable``, fsync the meta page too (LMDB's second flush of a commit). Off, a crash of the
            operating system may undo the last commits but leaves the store whole (LMDB's ``metasync=False``): for
            a copy whose commits can be applied again from elsewhere, such as a cluster node's replica.

    Raises:
        StoreInUse: another open store owns ``path`` (``storage/ownership.py``); close that one first.
        storage.indexes.IndexBuildError: a unique index new to this store cannot be built from its rows.
    """

    def __init__(self, path: Path, layouts: Iterable[KindLayout], *, map_size: int = 1 << 35,
                 durable: bool = True, sync_meta: bool = True) -> None:
        self._layouts = {layout.kind: layout for layout in layouts}
        self.path = path
        _private_directory(path)
        indexes = {kind: layout_indexes(layout) for kind, layout in self._layouts.items()}
        count = sum(1 + len(kind_indexes) for kind_indexes in indexes.values())
        self._owner = claim(path)
        self.env: Any = None
        try:
            self.env = lmdb.open(str(path), max_dbs=count + 8, map_size=map_size, sync=durable,
                                 metasync=durable and sync_meta, readahead=False, mode=_FILE_MODE)
            self._dbs: dict[str, Any] = open_indexes(self.env, indexes)
            self._indexes = {kind: [(index, self._dbs[index.name]) for index in kind_indexes]
                             for kind, kind_indexes in indexes.items()}
            # By kind, looked up on every read: no name to build each time.
            self.rows_by_kind = {kind: self._dbs[f"r/{kind}"] for kind in self._layouts}
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
        self.synced = durable  # a commit returns once the data is on disk

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
        return self.rows_by_kind[kind]

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
        return WriteTxn(self, txn, WriteSet() if record else None, parent), txn

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
        self._dbs, self._indexes, self.rows_by_kind = other._dbs, other._indexes, other.rows_by_kind
        self.raw_kinds, self.meta_db = other.raw_kinds, other.meta_db
        self.synced = other.synced
        self.memo = SharedMemo(0)
        self.kind_memos = KindMemos()
        old_env.close()
        release(old_owner)

    def close(self) -> None:
        self.env.close()
        release(self._owner)
