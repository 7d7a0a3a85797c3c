"""The async group-commit writer: concurrent submits share commits, and each caller gets its own outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from controller.data.group_commit import INLINE_BATCH, THREAD_BATCH, Writer
from storage.store import KindLayout, Store, UniqueViolation, WriteTxn

LAYOUT = KindLayout("things", unique=("name",))


@pytest.fixture(params=[False, True], ids=["inline", "in-thread"])
async def writer(request: pytest.FixtureRequest, tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Writer]:
    store = Store(tmp_path / "db", [LAYOUT], durable=False)
    started = Writer(store, in_thread=request.param)
    await nursery.start(started.run)
    yield started
    nursery.cancel_scope.cancel()


def _store(writer: Writer) -> Store:
    store: Store = writer._store
    return store


def _put(row_id: str, fail: bool = False, name: str | None = None) -> Any:
    def mutation(txn: WriteTxn) -> str:
        txn.put("things", {"id": row_id, "name": name or row_id})
        if fail:
            raise ValueError(row_id)
        return f"stored {row_id}"
    return mutation


async def _submit_into(results: dict[int, str], writer: Writer, i: int) -> None:
    results[i] = await writer.submit(_put(f"n{i:02}"))


async def test_concurrent_submits_share_commits(writer: Writer) -> None:
    results: dict[int, str] = {}
    async with trio.open_nursery() as nursery:
        for i in range(50):
            nursery.start_soon(_submit_into, results, writer, i)
    assert results == {i: f"stored n{i:02}" for i in range(50)}
    assert writer.mutations == 50
    assert 1 <= writer.commits < 50
    with _store(writer).read() as txn:
        assert txn.count("things") == 50


async def test_each_caller_gets_its_own_result_or_exception(writer: Writer) -> None:
    await writer.submit(_put("taken"))
    outcomes: dict[int, Any] = {}

    async def submit(i: int) -> None:
        if i % 5 == 0:
            mutation = _put(f"bad{i}", fail=True)
        elif i % 7 == 0:
            mutation = _put(f"dup{i}", name="taken")  # a unique violation against an earlier commit
        else:
            mutation = _put(f"ok{i}")
        try:
            outcomes[i] = await writer.submit(mutation)
        except (ValueError, UniqueViolation) as exc:
            outcomes[i] = exc

    async with trio.open_nursery() as nursery:
        for i in range(1, 31):
            nursery.start_soon(submit, i)
    for i, outcome in outcomes.items():
        if i % 5 == 0:
            assert isinstance(outcome, ValueError) and outcome.args == (f"bad{i}",)
        elif i % 7 == 0:
            assert isinstance(outcome, UniqueViolation) and outcome.value == "taken"
        else:
            assert outcome == f"stored ok{i}"
    with _store(writer).read() as txn:
        names = set(txn.ids("things"))
    assert names == {"taken"} | {f"ok{i}" for i in range(1, 31) if i % 5 and i % 7}


async def test_a_write_is_visible_once_submit_returns(writer: Writer) -> None:
    assert await writer.submit(_put("a")) == "stored a"
    with _store(writer).read() as txn:
        assert txn.get("things", "a") == {"id": "a", "name": "a"}
    assert writer.commits == 1


async def test_batches_are_bounded(tmp_path: Path, nursery: trio.Nursery) -> None:
    store = Store(tmp_path / "db", [LAYOUT], durable=False)
    writer = Writer(store, in_thread=False, max_batch=4)
    await nursery.start(writer.run)
    async with trio.open_nursery() as submitters:
        for i in range(10):
            submitters.start_soon(writer.submit, _put(f"n{i}"))
    assert writer.mutations == 10
    assert writer.commits >= 3  # at most 4 mutations per transaction
    nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("in_thread", "cap"), [(False, INLINE_BATCH), (True, THREAD_BATCH)])
async def test_default_batch_bound_depends_on_where_commits_run(tmp_path: Path, nursery: trio.Nursery,
                                                                in_thread: bool, cap: int) -> None:
    """Inline, a commit holds the event loop, so fewer mutations share one; a thread may take many more."""
    store = Store(tmp_path / "db", [LAYOUT], durable=False)
    writer = Writer(store, in_thread=in_thread)
    queued = 2 * INLINE_BATCH + 3
    async with trio.open_nursery() as submitters:
        for i in range(queued):
            submitters.start_soon(writer.submit, _put(f"n{i}"))
        await trio.testing.wait_all_tasks_blocked()  # every submit is queued before the writer starts
        await nursery.start(writer.run)
    assert writer.mutations == queued
    assert writer.commits == -(-queued // cap)
    nursery.cancel_scope.cancel()


@pytest.mark.parametrize("in_thread", [False, True], ids=["inline", "in-thread"])
async def test_a_full_queue_makes_submitters_wait_and_answers_each(tmp_path: Path, nursery: trio.Nursery,
                                                                   in_thread: bool) -> None:
    store = Store(tmp_path / "db", [LAYOUT], durable=False)
    writer = Writer(store, in_thread=in_thread, max_batch=1)  # room for 4 queued writes
    results: dict[int, str] = {}
    async with trio.open_nursery() as submitters:
        for i in range(12):
            submitters.start_soon(_submit_into, results, writer, i)
        await trio.testing.wait_all_tasks_blocked()  # 4 queued, 8 waiting for room, before the writer starts
        await nursery.start(writer.run)
    assert results == {i: f"stored n{i:02}" for i in range(12)}
    assert writer.commits == 12
    nursery.cancel_scope.cancel()


async def test_a_cancelled_caller_does_not_stop_its_queued_write_or_its_commit_hook(writer: Writer) -> None:
    committed: list[str] = []
    scope = trio.CancelScope()

    def cancel_then_put(txn: WriteTxn) -> str:
        scope.cancel()  # the caller gives up while its write is in the batch
        return str(_put("gone")(txn))

    with scope:
        await writer.submit(cancel_then_put, on_commit=lambda: committed.append("gone"))
    assert scope.cancelled_caught
    assert await writer.submit(_put("next"), on_commit=lambda: committed.append("next")) == "stored next"
    assert committed == ["gone", "next"]
    with _store(writer).read() as txn:
        assert txn.exists("things", "gone")


async def test_a_failing_commit_hook_fails_only_its_caller(writer: Writer) -> None:
    def broken() -> None:
        raise RuntimeError("listener")

    async def other() -> str:
        result: str = await writer.submit(_put("b"))
        return result

    with pytest.raises(RuntimeError, match="listener"):
        await writer.submit(_put("a"), on_commit=broken)
    assert await other() == "stored b"
    with _store(writer).read() as txn:
        assert txn.exists("things", "a")  # committed: only the caller's answer carries the hook's failure
