"""The production writer: mutations on the Trio thread, begin and commit on one pinned thread."""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

import lmdb
import trio
import trio.testing

from controller.writer import MUTATIONS_PER_YIELD, Writer
from storage.store import KindLayout, Store, WriteTxn
from storage.writer import run_batch

LAYOUT = KindLayout("things", unique=("name",))


class _RecordingStore(Store):
    """Records which threads begin and end outermost write transactions; can fail the next commits."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, [LAYOUT], durable=False)
        self.begin_threads: list[int] = []
        self.end_threads: list[int] = []
        self.failing_commits = 0

    def begin_write(self, parent: WriteTxn | None = None) -> tuple[WriteTxn, Any]:
        txn, raw = super().begin_write(parent)
        if parent is not None:
            return txn, raw
        self.begin_threads.append(threading.get_ident())
        if not self.failing_commits:
            return txn, raw
        self.failing_commits -= 1

        class FailingCommit:
            def commit(self) -> None:
                raw.abort()
                raise lmdb.DiskError("disk full")

            def abort(self) -> None:
                raw.abort()

        return txn, FailingCommit()

    def write_ended(self) -> None:
        self.end_threads.append(threading.get_ident())
        super().write_ended()


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
    # Every begin (one ahead of each commit, plus the last, aborted at shutdown) and every end on one thread.
    assert len(store.begin_threads) == writer.commits + 1
    assert len(set(store.begin_threads + store.end_threads)) == 1
    assert store.begin_threads[0] != threading.get_ident()
    with store.read() as txn:
        assert txn.count("things") == 15
    assert "lmdb-writer" not in {thread.name for thread in threading.enumerate()}
    # The lock was released on the thread that took it: this thread can write now.
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
