"""The production writer: mutations on the Trio thread, begin and commit on one pinned thread."""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

import lmdb
import pytest
import trio
import trio.testing

from controller.data.group_commit import MUTATIONS_PER_YIELD, Writer
from storage.batch import run_batch
from storage.store import KindLayout, Store, WriteTxn

LAYOUT = KindLayout("things", unique=("name",))


class _Raw:
    """An outermost write transaction that records the threads that end it, and can fail its commit."""

    def __init__(self, store: _RecordingStore, raw: Any, fail: bool) -> None:
        self._store, self._raw, self._fail = store, raw, fail

    def commit(self) -> None:
        self._store.end_threads.append(threading.get_ident())
        if self._fail:
            self._raw.abort()
            raise lmdb.DiskError("disk full")
        self._raw.commit()

    def abort(self) -> None:
        self._store.end_threads.append(threading.get_ident())
        self._raw.abort()


class _NestedRaw:
    """A nested transaction whose commit fails, as LMDB's would when the map is full."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def commit(self) -> None:
        self._raw.abort()
        raise lmdb.MapFullError("map full")

    def abort(self) -> None:
        self._raw.abort()


class _RecordingStore(Store):
    """Records the threads that begin and end outermost write transactions; can fail the next commits, a nested
    commit, or the begin after a given number of begins."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, [LAYOUT], durable=False)
        self.begin_threads: list[int] = []
        self.end_threads: list[int] = []
        self.failing_commits = 0
        self.failing_nested = 0  # fail the nested commit of the mutation that stores this many-th row
        self.failing_begin = 0  # fail this many-th outermost begin
        self._nested = 0

    def begin_write(self, parent: WriteTxn | None = None) -> tuple[WriteTxn, Any]:
        if parent is not None:
            txn, raw = super().begin_write(parent)
            self._nested += 1
            return (txn, _NestedRaw(raw)) if self._nested == self.failing_nested else (txn, raw)
        if len(self.begin_threads) + 1 == self.failing_begin:
            raise lmdb.ReadersFullError("no more readers")
        txn, raw = super().begin_write(parent)
        self.begin_threads.append(threading.get_ident())
        fail = self.failing_commits > 0
        self.failing_commits -= fail
        return txn, _Raw(self, raw, fail)


def _put(row_id: str, seen: list[Any] | None = None, note: Any = None) -> Any:
    def mutation(txn: WriteTxn) -> str:
        if seen is not None:
            seen.append(note() if callable(note) else threading.get_ident())
        txn.put("things", {"id": row_id, "name": row_id})
        return row_id
    return mutation


async def test_mutations_run_on_the_trio_thread_and_commits_on_one_other(tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "db")
    writer = Writer(store, in_thread=True)
    mutation_threads: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        for round_ in range(3):
            async with trio.open_nursery() as submitters:
                for i in range(5):
                    submitters.start_soon(writer.submit, _put(f"r{round_}n{i}", mutation_threads))
        nursery.cancel_scope.cancel()
    assert set(mutation_threads) == {threading.get_ident()}
    assert writer.commits >= 3
    # Every begin (one ahead of each commit, plus the last, aborted at shutdown) and every end (the commits and
    # that abort) on one thread.
    assert len(store.begin_threads) == len(store.end_threads) == writer.commits + 1
    assert len(set(store.begin_threads + store.end_threads)) == 1
    assert store.begin_threads[0] != threading.get_ident()
    with store.read() as txn:
        assert txn.count("things") == 15
    assert "lmdb-writer" not in {thread.name for thread in threading.enumerate()}
    # The writer gave the store up: this thread can write directly again.
    assert run_batch(store, [_put("after")])[0].value == "after"


async def test_a_failed_commit_fails_its_batch_and_the_writer_goes_on(tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "db")
    writer = Writer(store, in_thread=True)
    store.failing_commits = 2  # the transaction begun at start-up, and the one after it
    failures: list[BaseException] = []

    async def submit(row_id: str) -> None:
        try:
            await writer.submit(_put(row_id))
        except lmdb.DiskError as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        async with trio.open_nursery() as submitters:
            for i in range(4):
                submitters.start_soon(submit, f"lost{i}")
        while writer.commits < 2:  # the second transaction fails too
            await submit("lost-too")
        assert await writer.submit(_put("kept")) == "kept"
        nursery.cancel_scope.cancel()
    assert len(failures) == writer.mutations - 1
    with store.read() as txn:
        assert txn.ids("things") == ["kept"]


class _StepCounter(trio.abc.Instrument):
    """Counts each task's steps: a task's count changes only where it suspended and was scheduled again."""

    def __init__(self) -> None:
        self.steps: collections.Counter[trio.lowlevel.Task] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task] += 1


async def test_a_long_batch_lets_other_tasks_run_between_mutations(tmp_path: Path) -> None:
    store = Store(tmp_path / "db", [LAYOUT], durable=False)
    writer = Writer(store, in_thread=True)
    counter = _StepCounter()
    seen: list[int] = []
    queued = 3 * MUTATIONS_PER_YIELD
    trio.lowlevel.add_instrument(counter)
    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as submitters:
            for i in range(queued):
                submitters.start_soon(writer.submit,
                                      _put(f"n{i}", seen, lambda: counter.steps[trio.lowlevel.current_task()]))
            await trio.testing.wait_all_tasks_blocked()  # all queued before the writer takes the first
            await nursery.start(writer.run)
        nursery.cancel_scope.cancel()
    trio.lowlevel.remove_instrument(counter)
    assert writer.commits == 1
    # The writer suspended (and other tasks could run) exactly after every MUTATIONS_PER_YIELD mutations.
    boundaries = [i for i in range(1, queued) if seen[i] != seen[i - 1]]
    assert boundaries == [MUTATIONS_PER_YIELD, 2 * MUTATIONS_PER_YIELD]


async def test_a_batch_taken_from_the_queue_is_committed_and_answered_even_when_the_writer_is_cancelled(
        tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "db")
    writer = Writer(store, in_thread=True)
    queued = 3 * MUTATIONS_PER_YIELD
    results: dict[int, str] = {}

    async def submit(i: int, mutation: Any) -> None:
        results[i] = await writer.submit(mutation)

    with trio.fail_after(30):  # a caller left unanswered would hang: fail instead
        async with trio.open_nursery() as submitters, trio.open_nursery() as services:

            def cancel_writer(txn: WriteTxn) -> str:
                services.cancel_scope.cancel()  # the writer is asked to stop in the middle of its batch
                return _put("n0")(txn)

            submitters.start_soon(submit, 0, cancel_writer)
            await trio.testing.wait_all_tasks_blocked()  # queued first: the stop is asked before the first yield
            for i in range(1, queued):
                submitters.start_soon(submit, i, _put(f"n{i}"))
            await trio.testing.wait_all_tasks_blocked()
            await services.start(writer.run)
    assert results == {0: "n0"} | {i: f"n{i}" for i in range(1, queued)}
    assert writer.commits == 1
    with store.read() as txn:
        assert txn.count("things") == queued
    assert len(store.begin_threads) == len(store.end_threads) == 2  # the next, begun after the commit, aborted


async def test_a_broken_nested_commit_fails_the_whole_batch_and_the_writer_goes_on(tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "db")
    store.failing_nested = 2  # the second mutation's own writes cannot be committed into the batch
    writer = Writer(store, in_thread=True)
    outcomes: dict[str, Any] = {}

    async def submit(row_id: str) -> None:
        try:
            outcomes[row_id] = await writer.submit(_put(row_id))
        except lmdb.Error as exc:
            outcomes[row_id] = exc

    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as submitters:
            for row_id in ("a", "b", "c"):
                submitters.start_soon(submit, row_id)
            await trio.testing.wait_all_tasks_blocked()
            await nursery.start(writer.run)
        assert await writer.submit(_put("d")) == "d"
        nursery.cancel_scope.cancel()
    # "a" was applied before the break and "c" never ran; none of the three is on disk, and each caller hears so.
    assert all(isinstance(outcomes[row_id], lmdb.MapFullError) for row_id in ("a", "b", "c"))
    with store.read() as txn:
        assert txn.ids("things") == ["d"]


async def test_a_failed_begin_after_a_commit_answers_that_batch_and_stops_the_writer(tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "db")
    store.failing_begin = 2  # the begin that follows the first commit
    writer = Writer(store, in_thread=True)
    answered: list[str] = []

    async def submit() -> None:
        answered.append(await writer.submit(_put("a")))

    with trio.fail_after(30):
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(writer.run)
                nursery.start_soon(submit)
        except ExceptionGroup as group:
            assert group.subgroup(lmdb.ReadersFullError) is not None
        else:
            raise AssertionError("the writer went on without a transaction")
    assert answered == ["a"]
    with store.read() as txn:
        assert txn.ids("things") == ["a"]
    assert not store.writes_held
    store.failing_begin = 0
    assert run_batch(store, [_put("b")])[0].value == "b"  # the lock was given back


class _Stop(BaseException):
    """Not an Exception: a mutation that raises it stops the writer (as an interrupt would)."""


async def test_a_base_exception_in_a_mutation_aborts_the_batch_on_the_pinned_thread(tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "db")
    writer = Writer(store, in_thread=True)

    def stop(txn: WriteTxn) -> None:
        txn.put("things", {"id": "half", "name": "half"})
        raise _Stop

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(writer.run)
            nursery.start_soon(writer.submit, stop)
    except BaseExceptionGroup as group:
        assert group.subgroup(_Stop) is not None
    else:
        raise AssertionError("the writer swallowed a BaseException")
    with store.read() as txn:
        assert txn.count("things") == 0
    assert len(set(store.begin_threads + store.end_threads)) == 1
    assert store.begin_threads[0] != threading.get_ident()


async def test_no_other_write_while_the_writer_holds_the_lock(tmp_path: Path) -> None:
    """A direct write or a second writer on the Trio thread would wait forever for the held lock: both are refused."""
    store = Store(tmp_path / "db", [LAYOUT], durable=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(Writer(store, in_thread=True).run)
        with pytest.raises(RuntimeError, match="writer holds its write lock"):
            run_batch(store, [_put("direct")])
        with pytest.raises(RuntimeError, match="already holds"):
            await Writer(store, in_thread=True).run()
        nursery.cancel_scope.cancel()
    assert run_batch(store, [_put("after")])[0].value == "after"
