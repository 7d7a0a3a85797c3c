"""The LMDB store: rows, the three index kinds kept in step with every write, key limits, and the batch commit of
``storage.batch.run_batch`` (each mutation in its own nested transaction)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

from storage.batch import Outcome, run_batch
from storage.keys import MAX_KEY_BYTES, UnstorableValue
from storage.rows import UnencodableValue
from storage.store import KindLayout, Store, StoreInUse, UniqueViolation, WriteTxn

THINGS = KindLayout("things", unique=("name", "code"), sets=("labels",), refs=("ownerId",))
LAYOUTS = (THINGS, KindLayout("owners"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "db", LAYOUTS, durable=False)
    yield opened
    opened.close()


def _write(store: Store, fn: Callable[[WriteTxn], Any]) -> Any:
    """Run one mutation in its own batch and return its value (re-raising what it raised)."""
    [outcome] = run_batch(store, [fn])
    return outcome.unwrap()


def _put(store: Store, row: dict[str, Any]) -> None:
    _write(store, lambda txn: txn.put("things", row))


def _indexes(store: Store) -> dict[str, Any]:
    """Everything the indexes say about the test rows."""
    with store.read() as txn:
        return {
            "names": {n: txn.by_unique("things", "name", n) for n in ("a", "b", "c")},
            "codes": {c: txn.by_unique("things", "code", c) for c in ("x", "y")},
            "labels": {label: sorted(txn.ids_by_set("things", "labels", label)) for label in ("red", "blue", "green")},
            "owners": {o: sorted(txn.ids_by_ref("things", "ownerId", o)) for o in ("o1", "o2")},
            "elements": txn.set_elements("things", "labels"),
        }


def test_put_indexes_every_kind_of_field(store: Store) -> None:
    _put(store, {"id": "t1", "name": "a", "code": "x", "labels": ["red", "blue", "red"], "ownerId": "o1"})
    _put(store, {"id": "t2", "name": "b", "code": None, "labels": ["red"], "ownerId": "o1"})
    assert _indexes(store) == {
        "names": {"a": "t1", "b": "t2", "c": None},
        "codes": {"x": "t1", "y": None},
        "labels": {"red": ["t1", "t2"], "blue": ["t1"], "green": []},
        "owners": {"o1": ["t1", "t2"], "o2": []},
        "elements": ["blue", "red"],
    }
    with store.read() as txn:
        assert txn.get("things", "t1") == {"id": "t1", "name": "a", "code": "x", "labels": ["red", "blue", "red"],
                                           "ownerId": "o1"}
        assert txn.count("things") == 2
        assert txn.ids("things") == ["t1", "t2"]


def test_replace_moves_every_index_entry(store: Store) -> None:
    _put(store, {"id": "t1", "name": "a", "code": "x", "labels": ["red", "blue"], "ownerId": "o1"})
    _put(store, {"id": "t1", "name": "c", "code": None, "labels": ["green", "blue"], "ownerId": "o2"})
    assert _indexes(store) == {
        "names": {"a": None, "b": None, "c": "t1"},
        "codes": {"x": None, "y": None},
        "labels": {"red": [], "blue": ["t1"], "green": ["t1"]},
        "owners": {"o1": [], "o2": ["t1"]},
        "elements": ["blue", "green"],
    }
    # The freed values can be taken by another row.
    _put(store, {"id": "t2", "name": "a", "code": "x"})
    assert _indexes(store)["names"]["a"] == "t2"


@pytest.mark.parametrize("given_stored", [False, True], ids=["read-by-the-store", "given-by-the-caller"])
def test_delete_removes_the_row_and_its_index_entries(store: Store, given_stored: bool) -> None:
    row = {"id": "t1", "name": "a", "code": "x", "labels": ["red"], "ownerId": "o1"}
    _put(store, row)
    _put(store, {"id": "t2", "name": "b", "labels": ["red"], "ownerId": "o1"})

    def delete(txn: WriteTxn) -> Any:
        # A caller that has just read the row may hand it over (``stored``); the store then does not read it again.
        return txn.delete("things", "t1", stored=txn.get("things", "t1") if given_stored else None)

    assert _write(store, delete) == row
    assert _write(store, delete) is None
    assert _indexes(store) == {
        "names": {"a": None, "b": "t2", "c": None},
        "codes": {"x": None, "y": None},
        "labels": {"red": ["t2"], "blue": [], "green": []},
        "owners": {"o1": ["t2"], "o2": []},
        "elements": ["red"],
    }
    with store.read() as txn:
        assert txn.get("things", "t1") is None
        assert not txn.exists("things", "t1")


def test_a_kind_without_indexes_is_replaced_and_deleted(store: Store) -> None:
    _write(store, lambda txn: txn.put("owners", {"id": "o1", "name": "first"}))
    _write(store, lambda txn: txn.put("owners", {"id": "o1", "name": "second", "extra": [1, 2]}))
    with store.read() as txn:
        assert txn.get("owners", "o1") == {"id": "o1", "name": "second", "extra": [1, 2]}
        assert txn.count("owners") == 1
    assert _write(store, lambda txn: txn.delete("owners", "o1")) == {"id": "o1", "name": "second", "extra": [1, 2]}
    with store.read() as txn:
        assert txn.get("owners", "o1") is None


def test_unique_violation_names_the_field_and_writes_nothing(store: Store) -> None:
    _put(store, {"id": "t1", "name": "a", "code": "x"})
    with pytest.raises(UniqueViolation) as caught:
        _put(store, {"id": "t2", "name": "b", "code": "x"})
    assert (caught.value.kind, caught.value.field, caught.value.value) == ("things", "code", "x")
    with pytest.raises(UniqueViolation):
        _put(store, {"id": "t2", "name": "a"})
    with store.read() as txn:
        assert txn.get("things", "t2") is None
        assert txn.by_unique("things", "name", "b") is None
    # A row may keep its own value, and missing values never collide.
    _put(store, {"id": "t1", "name": "a", "code": "x", "labels": ["new"]})
    _put(store, {"id": "t3", "name": None})
    _put(store, {"id": "t4"})
    assert _indexes(store)["names"]["a"] == "t1"


@pytest.mark.parametrize(("row", "field"), [
    ({"id": "t1", "name": ""}, "name"),
    ({"id": "t1", "name": "n" * (MAX_KEY_BYTES + 1)}, "name"),
    ({"id": "t1", "name": "é" * 256}, "name"),  # 512 bytes in UTF-8: the limit is on bytes
    ({"id": "t1", "labels": ["ok", ""]}, "labels"),
    ({"id": "t1", "labels": ["l" * 600]}, "labels"),
    ({"id": "t1", "ownerId": ""}, "ownerId"),
    ({"id": ""}, "id"),
    ({"id": "i" * 600}, "id"),
])
def test_values_lmdb_cannot_key_are_refused_before_any_write(store: Store, row: dict[str, Any],
                                                             field: str) -> None:
    _put(store, {"id": "t1", "name": "kept", "labels": ["kept"]})
    with pytest.raises(UnstorableValue) as caught:
        _put(store, row)
    assert caught.value.field == field
    assert caught.value.kind == "things"
    with store.read() as txn:
        assert txn.get("things", "t1") == {"id": "t1", "name": "kept", "labels": ["kept"]}
        assert txn.by_unique("things", "name", "kept") == "t1"
        assert txn.ids_by_set("things", "labels", "kept") == ["t1"]


@pytest.mark.parametrize(("kind", "data", "path", "value"), [
    ("things", {"n": 2**64}, "data.n", 2**64),
    ("things", {"a": [0, {"b": -(2**63) - 1}]}, "data.a[1].b", -(2**63) - 1),
    ("owners", [1, [2, 3**50]], "data[1][1]", 3**50),
])
def test_integers_msgpack_cannot_hold_are_refused_with_their_path(store: Store, kind: str, data: Any, path: str,
                                                                  value: int) -> None:
    kept = {"id": "t1", "name": "kept", "labels": ["kept"], "data": {"n": 2**64 - 1, "m": -(2**63)}}
    _write(store, lambda txn: txn.put(kind, kept))
    with pytest.raises(UnencodableValue) as caught:
        _write(store, lambda txn: txn.put(kind, {"id": "t1", "name": "new", "labels": ["new"], "data": data}))
    assert (caught.value.path, caught.value.value) == (path, value)
    with store.read() as txn:
        assert txn.get(kind, "t1") == kept
        if kind == "things":
            assert (txn.by_unique("things", "name", "kept"), txn.by_unique("things", "name", "new")) == ("t1", None)
            assert txn.ids_by_set("things", "labels", "kept") == ["t1"]


def test_the_longest_storable_value_is_accepted(store: Store) -> None:
    name = "n" * MAX_KEY_BYTES
    _put(store, {"id": "t1", "name": name, "labels": [name]})
    with store.read() as txn:
        assert txn.by_unique("things", "name", name) == "t1"
        assert txn.ids_by_set("things", "labels", name) == ["t1"]


@pytest.mark.parametrize("key", ["", "k" * 600])
def test_lookups_by_unstorable_keys_find_nothing(store: Store, key: str) -> None:
    _put(store, {"id": "t1", "name": "a"})
    with store.read() as txn:
        assert txn.get("things", key) is None
        assert not txn.exists("things", key)
        assert txn.get_many("things", [key, "t1"]) == [{"id": "t1", "name": "a"}]
        assert txn.by_unique("things", "name", key) is None
        assert txn.ids_by_set("things", "labels", key) == []
        assert txn.ids_by_ref("things", "ownerId", key) == []
    assert _write(store, lambda txn: txn.delete("things", key)) is None


def test_scan_is_in_id_byte_order_and_get_many_keeps_the_given_order(store: Store) -> None:
    for row_id in ("b", "B", "a", "aa", "Z"):
        _put(store, {"id": row_id})
    with store.read() as txn:
        assert [row["id"] for row in txn.scan("things")] == ["B", "Z", "a", "aa", "b"]
        assert [row["id"] for row in txn.get_many("things", ["b", "missing", "B"])] == ["b", "B"]


def test_a_read_snapshot_does_not_see_later_writes(store: Store) -> None:
    _put(store, {"id": "t1", "name": "a"})
    with store.read() as before:
        _put(store, {"id": "t1", "name": "b"})
        _put(store, {"id": "t2", "name": "c"})
        assert before.get("things", "t1") == {"id": "t1", "name": "a"}
        assert before.by_unique("things", "name", "c") is None
    with store.read() as after:
        assert after.get("things", "t1") == {"id": "t1", "name": "b"}


def test_meta_values_and_reopening(tmp_path: Path) -> None:
    store = Store(tmp_path / "db", LAYOUTS, durable=False)
    _write(store, lambda txn: txn.set_meta("schema", {"version": 3}))
    _put(store, {"id": "t1", "name": "a", "labels": ["red"]})
    store.close()
    reopened = Store(tmp_path / "db", LAYOUTS, durable=False)
    with reopened.read() as txn:
        assert txn.meta("schema") == {"version": 3}
        assert txn.meta("missing") is None
        assert txn.get("things", "t1") == {"id": "t1", "name": "a", "labels": ["red"]}
        assert txn.ids_by_set("things", "labels", "red") == ["t1"]
    reopened.close()


# run_batch ------------------------------------------------------------------------------------------------------


def test_a_failing_mutation_is_rolled_back_alone(store: Store) -> None:
    def first(txn: WriteTxn) -> str:
        txn.put("things", {"id": "t1", "name": "a"})
        return "first"

    def failing(txn: WriteTxn) -> None:
        txn.put("things", {"id": "t2", "name": "b", "labels": ["red"]})
        txn.put("owners", {"id": "o1"})
        raise ValueError("refused")

    def duplicate(txn: WriteTxn) -> None:
        txn.put("things", {"id": "t3", "name": "a"})  # taken by the first mutation of this batch

    def sees_earlier(txn: WriteTxn) -> Any:
        txn.put("things", {"id": "t4", "name": "d"})
        return txn.get("things", "t1"), txn.get("things", "t2")

    outcomes = run_batch(store, [first, failing, duplicate, sees_earlier])
    assert [o.value for o in outcomes] == ["first", None, None, ({"id": "t1", "name": "a"}, None)]
    assert isinstance(outcomes[1].error, ValueError)
    assert isinstance(outcomes[2].error, UniqueViolation)
    assert outcomes[0].error is None and outcomes[3].error is None
    with store.read() as txn:
        assert txn.ids("things") == ["t1", "t4"]
        assert txn.ids("owners") == []
        assert txn.ids_by_set("things", "labels", "red") == []
        assert txn.by_unique("things", "name", "b") is None


def test_outcome_unwrap() -> None:
    assert Outcome(value=3).unwrap() == 3
    with pytest.raises(KeyError):
        Outcome(error=KeyError("k")).unwrap()


class _FailingCommitStore(Store):
    """A store whose outermost transaction fails to commit (a full disk, say)."""

    def begin_write(self, parent: WriteTxn | None = None) -> tuple[WriteTxn, Any]:
        txn, raw = super().begin_write(parent)
        if parent is not None:
            return txn, raw

        class Raw:
            def commit(self) -> None:
                raise lmdb.DiskError("disk full")

            def abort(self) -> None:
                raw.abort()

        return txn, Raw()


def test_a_failed_commit_fails_every_mutation(tmp_path: Path) -> None:
    store = _FailingCommitStore(tmp_path / "db", LAYOUTS, durable=False)
    outcomes = run_batch(store, [lambda txn: txn.put("things", {"id": "t1"}), lambda txn: 5])
    assert all(isinstance(o.error, lmdb.DiskError) for o in outcomes)
    with store.read() as txn:
        assert txn.count("things") == 0
    store.close()


def test_a_base_exception_aborts_the_whole_batch(store: Store) -> None:
    def interrupted(txn: WriteTxn) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(store, [lambda txn: txn.put("things", {"id": "t1"}), interrupted])
    with store.read() as txn:
        assert txn.count("things") == 0


def test_one_open_store_per_directory(tmp_path: Path) -> None:
    first = Store(tmp_path / "db", LAYOUTS, durable=False)
    with pytest.raises(StoreInUse, match="in use by another controller"):
        Store(tmp_path / "db", LAYOUTS, durable=False)
    first.close()
    second = Store(tmp_path / "db", LAYOUTS, durable=False)  # closing gave the directory up
    second.close()
