"""The index DBs of a store: what each kind's layout declares, the keys a row puts in each, and building an index
that a store written before it was declared does not have yet.

Four kinds of index, each a named DB whose values are row ids:

* unique ``u/<kind>/<field>``: value -> id (names, external ids);
* set ``s/<kind>/<field>`` (dupsort): element -> ids (role attributes);
* ref ``f/<kind>/<field>`` (dupsort): value -> ids (back-references such as a config's ``configTypeId``);
* composite ``c/<kind>/<field>+<field>...`` (dupsort): several values together -> ids (a lookup by a combination,
  such as a session's API session, service and type), indexed only when none of the values is missing.

:func:`open_indexes` opens every DB a layout needs. One that does not exist yet (a new store, or a store written by
a version that did not declare it) is created and filled from the kind's rows in the same write transaction, so an
index is never seen half-built: after a crash during the build, neither the DB nor any of its entries exists and
the next open builds it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import lmdb

from storage.keys import composite_key, to_key
from storage.layout import KindLayout
from storage.rows import decode_row

__all__ = ["Index", "IndexBuildError", "index_name", "layout_indexes", "open_indexes"]

class IndexBuildError(Exception):
    """A newly declared unique index cannot be built: two stored rows hold the same value. Nothing was written."""


@dataclass(frozen=True, slots=True)
class Index:
    """One index DB of a kind: ``keys(row)`` are the keys under which the row's id is stored in it; ``fields``
    the row fields they are made from."""

    name: str
    kind: str
    unique: bool
    keys: Callable[[Mapping[str, Any]], list[bytes]]
    fields: tuple[str, ...]


def index_name(prefix: str, kind: str, fields: Iterable[str]) -> str:
    """The DB name of an index: ``u``, ``s``, ``f`` or ``c``, the kind, and its field (``+``-joined fields)."""
    return f"{prefix}/{kind}/{'+'.join(fields)}"


def _value_keys(field: str) -> Callable[[Mapping[str, Any]], list[bytes]]:
    def keys(row: Mapping[str, Any]) -> list[bytes]:
        value = row.get(field)
        return [] if value is None else [to_key(value)]
    return keys


def _element_keys(field: str) -> Callable[[Mapping[str, Any]], list[bytes]]:
    def keys(row: Mapping[str, Any]) -> list[bytes]:
        return [to_key(element) for element in set(row.get(field) or ())]
    return keys


def _composite_keys(fields: tuple[str, ...]) -> Callable[[Mapping[str, Any]], list[bytes]]:
    def keys(row: Mapping[str, Any]) -> list[bytes]:
        values = tuple(row.get(field) for field in fields)
        return [] if None in values else [composite_key(values)]
    return keys


def layout_indexes(layout: KindLayout) -> tuple[Index, ...]:
    """Every index the layout declares, in a fixed order (unique, set, ref, composite)."""
    kind = layout.kind
    return (*(Index(index_name("u", kind, (f,)), kind, True, _value_keys(f), (f,)) for f in layout.unique),
            *(Index(index_name("s", kind, (f,)), kind, False, _element_keys(f), (f,)) for f in layout.sets),
            *(Index(index_name("f", kind, (f,)), kind, False, _value_keys(f), (f,)) for f in layout.refs),
            *(Index(index_name("c", kind, fs), kind, False, _composite_keys(fs), fs) for fs in layout.composites))


def open_indexes(env: Any, indexes: Mapping[str, Sequence[Index]]) -> dict[str, Any]:
    """Open (creating where missing) the rows DB of every kind in ``indexes`` and each of its index DBs, by name
    (``r/<kind>`` and the index names). A missing index DB is built from the stored rows of its kind before anything
    can read it.

    Raises:
        IndexBuildError: a missing unique index would map one value to two rows; nothing was created.
    """
    with env.begin() as txn:
        existing = {bytes(name).decode() for name in txn.cursor().iternext(keys=True, values=False)}
    dbs: dict[str, Any] = {}
    missing: list[Index] = []
    for kind, kind_indexes in indexes.items():
        name = f"r/{kind}"
        dbs[name] = env.open_db(name.encode(), create=True)
        for index in kind_indexes:
            if index.name in existing:
                dbs[index.name] = env.open_db(index.name.encode(), dupsort=not index.unique, create=False)
            else:
                missing.append(index)
    if missing:
        with env.begin(write=True) as txn:  # aborted, with every DB it created, if a build raises
            for index in missing:
                db = env.open_db(index.name.encode(), txn=txn, dupsort=not index.unique, create=True)
                _build(txn, index, dbs[f"r/{index.kind}"], db)
                dbs[index.name] = db
    return dbs


def _build(txn: lmdb.Transaction, index: Index, rows_db: Any, db: Any) -> None:
    with txn.cursor(db=rows_db) as cursor:
        for row_id, data in cursor:
            row = decode_row(data)
            for key in index.keys(row):
                if not txn.put(key, row_id, db=db, overwrite=not index.unique):
                    holder = bytes(txn.get(key, db=db) or b"").decode()
                    raise IndexBuildError(f"cannot build the unique index {index.name}: rows {holder!r} and "
                                          f"{bytes(row_id).decode()!r} hold the same value {key.decode()!r}")
