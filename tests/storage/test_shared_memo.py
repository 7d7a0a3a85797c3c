"""``SharedMemo``: answers derived from watched kinds are shared by snapshots until a watched kind is written,
and a snapshot older than that write never sees the memo that describes the newer data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.batch import run_batch
from storage.store import KindLayout, SharedMemo, Store, WriteTxn

LAYOUTS = (KindLayout("policies", sets=("roles",), watched=True), KindLayout("rows"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "db", LAYOUTS, durable=False)
    yield opened
    opened.close()


def _put(store: Store, kind: str, row_id: str) -> None:
    [outcome] = run_batch(store, [lambda txn: txn.put(kind, {"id": row_id})])
    outcome.unwrap()


def _delete(store: Store, kind: str, row_id: str) -> None:
    [outcome] = run_batch(store, [lambda txn: txn.delete(kind, row_id)])
    outcome.unwrap()


def test_snapshots_share_the_memo_until_a_watched_kind_is_written(store: Store) -> None:
    with store.read() as txn:
        memo = txn.shared_memo()
        assert memo is not None
        memo["answer"] = 1
    with store.read() as txn:
        assert txn.shared_memo() == {"answer": 1}

    _put(store, "rows", "r1")  # not watched: the answer still holds
    with store.read() as txn:
        assert txn.shared_memo() == {"answer": 1}

    _put(store, "policies", "p1")
    with store.read() as txn:
        assert txn.shared_memo() == {}

    with store.read() as txn:
        memo = txn.shared_memo()
        assert memo is not None
        memo["answer"] = 2
    _delete(store, "policies", "p1")  # a delete invalidates as a put does
    with store.read() as txn:
        assert txn.shared_memo() == {}


def test_a_snapshot_older_than_a_watched_write_gets_no_memo(store: Store) -> None:
    with store.read() as old:
        _put(store, "policies", "p1")
        # The old snapshot does not see p1; the memo now describes data that includes it.
        assert old.get("policies", "p1") is None
        assert old.shared_memo() is None
        with store.read() as new:
            assert new.get("policies", "p1") is not None
            assert new.shared_memo() == {}


def test_a_reader_holding_the_replaced_memo_fills_a_dict_nobody_reads(store: Store) -> None:
    with store.read() as txn:
        stale = txn.shared_memo()
    assert stale is not None
    _put(store, "policies", "p1")
    stale["answer"] = "computed before p1"
    with store.read() as txn:
        assert txn.shared_memo() == {}


def test_the_memo_starts_again_past_its_limit(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SharedMemo, "LIMIT", 2)
    with store.read() as txn:
        memo = txn.shared_memo()
        assert memo is not None
        memo.update(a=1, b=2, c=3)
    with store.read() as txn:
        assert txn.shared_memo() == {}


def test_a_rolled_back_watched_write_leaves_a_usable_memo(store: Store) -> None:
    def fail(txn: WriteTxn) -> None:
        txn.put("policies", {"id": "p1"})
        raise ValueError("refused")

    [outcome] = run_batch(store, [fail])
    assert isinstance(outcome.error, ValueError)
    with store.read() as txn:
        assert txn.get("policies", "p1") is None
        memo = txn.shared_memo()
        assert memo == {}
        memo["answer"] = 3
    with store.read() as txn:
        assert txn.shared_memo() == {"answer": 3}
