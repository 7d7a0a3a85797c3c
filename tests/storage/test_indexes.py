"""Composite indexes, and the indexes a store builds when it is opened with a layout that declares new ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

from storage.batch import run_batch
from storage.indexes import IndexBuildError
from storage.keys import MAX_KEY_BYTES, UnstorableValue
from storage.store import KindLayout, Store

PLAIN = KindLayout("things")
INDEXED = KindLayout("things", unique=("name",), sets=("labels",), refs=("ownerId",),
                     composites=(("ownerId", "type"),))
PAIR = ("ownerId", "type")


def _open(path: Path, layout: KindLayout) -> Store:
    return Store(path, (layout,), durable=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = _open(tmp_path / "db", INDEXED)
    yield opened
    opened.close()


def _put(store: Store, *rows: dict[str, Any]) -> None:
    [outcome] = run_batch(store, [lambda txn: [txn.put("things", row) for row in rows]])
    outcome.unwrap()


def _delete(store: Store, row_id: str) -> None:
    [outcome] = run_batch(store, [lambda txn: txn.delete("things", row_id)])
    outcome.unwrap()


def _by_pair(store: Store, owner: Any, kind: Any) -> list[str]:
    with store.read() as txn:
        return sorted(txn.ids_by_fields("things", PAIR, (owner, kind)))


def test_a_composite_index_follows_puts_replacements_and_deletes(store: Store) -> None:
    _put(store, {"id": "t1", "ownerId": "o1", "type": "Dial"}, {"id": "t2", "ownerId": "o1", "type": "Bind"},
         {"id": "t3", "ownerId": "o1", "type": "Dial"}, {"id": "t4", "ownerId": "o2", "type": "Dial"})
    assert _by_pair(store, "o1", "Dial") == ["t1", "t3"]
    assert _by_pair(store, "o1", "Bind") == ["t2"]
    assert _by_pair(store, "o2", "Bind") == []
    _put(store, {"id": "t3", "ownerId": "o2", "type": "Bind"})
    assert _by_pair(store, "o1", "Dial") == ["t1"]
    assert _by_pair(store, "o2", "Bind") == ["t3"]
    _delete(store, "t1")
    assert _by_pair(store, "o1", "Dial") == []
    with store.read() as txn:
        assert txn.ids_by_ref("things", "ownerId", "o1") == ["t2"]


def test_a_row_missing_one_of_the_values_is_not_in_the_composite_index(store: Store) -> None:
    _put(store, {"id": "t1", "ownerId": "o1"}, {"id": "t2", "ownerId": "o1", "type": None})
    assert _by_pair(store, "o1", None) == []
    assert _by_pair(store, "o1", "None") == []
    _put(store, {"id": "t1", "ownerId": "o1", "type": "Dial"})
    assert _by_pair(store, "o1", "Dial") == ["t1"]


def test_composite_keys_never_run_two_combinations_together(store: Store) -> None:
    _put(store, {"id": "t1", "ownerId": "ab", "type": "c"}, {"id": "t2", "ownerId": "a", "type": "bc"},
         {"id": "t3", "ownerId": "a\x00", "type": "\x01c"}, {"id": "t4", "ownerId": "abc", "type": ""})
    assert _by_pair(store, "ab", "c") == ["t1"]
    assert _by_pair(store, "a", "bc") == ["t2"]
    assert _by_pair(store, "a\x00", "\x01c") == ["t3"]
    assert _by_pair(store, "abc", "") == ["t4"]


def test_a_combination_too_long_to_key_is_refused_before_any_write(store: Store) -> None:
    _put(store, {"id": "t1", "ownerId": "o1", "type": "Dial"})
    long_owner = "o" * (MAX_KEY_BYTES - 5)  # storable alone, not with the type and the lengths
    with pytest.raises(UnstorableValue) as caught:
        _put(store, {"id": "t1", "ownerId": long_owner, "type": "Dial"})
    assert (caught.value.kind, caught.value.field) == ("things", "ownerId+type")
    assert _by_pair(store, "o1", "Dial") == ["t1"]
    assert _by_pair(store, long_owner, "Dial") == []


def test_opening_with_new_indexes_builds_them_from_the_stored_rows(tmp_path: Path) -> None:
    rows = [{"id": "t1", "name": "a", "labels": ["red", "blue"], "ownerId": "o1", "type": "Dial"},
            {"id": "t2", "name": "b", "labels": ["red"], "ownerId": "o1", "type": "Bind"},
            {"id": "t3", "labels": [], "ownerId": "o2"}]
    old = _open(tmp_path / "db", PLAIN)
    _put(old, *rows)
    old.close()

    store = _open(tmp_path / "db", INDEXED)
    try:
        with store.read() as txn:
            assert [txn.by_unique("things", "name", n) for n in ("a", "b")] == ["t1", "t2"]
            assert sorted(txn.ids_by_set("things", "labels", "red")) == ["t1", "t2"]
            assert txn.set_elements("things", "labels") == ["blue", "red"]
            assert sorted(txn.ids_by_ref("things", "ownerId", "o1")) == ["t1", "t2"]
            assert txn.ids_by_fields("things", PAIR, ("o1", "Bind")) == ["t2"]
            assert txn.ids_by_fields("things", PAIR, ("o2", None)) == []
        # Built indexes are kept in step from then on, like any other.
        _delete(store, "t2")
        _put(store, {"id": "t3", "name": "c", "ownerId": "o2", "type": "Bind"})
        assert _by_pair(store, "o1", "Bind") == []
        assert _by_pair(store, "o2", "Bind") == ["t3"]
    finally:
        store.close()
    # Built once: a later open finds them as they were left.
    store = _open(tmp_path / "db", INDEXED)
    try:
        assert _by_pair(store, "o2", "Bind") == ["t3"]
        with store.read() as txn:
            assert txn.by_unique("things", "name", "b") is None
    finally:
        store.close()


def test_a_new_unique_index_the_rows_break_fails_the_open_and_creates_nothing(tmp_path: Path) -> None:
    old = _open(tmp_path / "db", PLAIN)
    _put(old, {"id": "t1", "name": "same"}, {"id": "t2", "name": "same"})
    old.close()

    with pytest.raises(IndexBuildError, match=r"u/things/name.*'t1'.*'t2'.*'same'"):
        _open(tmp_path / "db", INDEXED)
    env = lmdb.open(str(tmp_path / "db"), max_dbs=16)
    try:
        with env.begin() as txn:
            names = sorted(bytes(k).decode() for k in txn.cursor().iternext(keys=True, values=False))
    finally:
        env.close()
    assert names == ["meta", "r/things"]
    # The store still opens with the layout its rows satisfy.
    _open(tmp_path / "db", PLAIN).close()
