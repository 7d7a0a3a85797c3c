"""One OS thread that runs the calls handed to it, in order, while the caller's Trio task waits.

``trio.to_thread.run_sync`` may run each call on a different cached thread. LMDB binds a write transaction's
lock (a process-shared robust mutex on Linux) to the thread that began it, so the group-commit writer begins and
commits every transaction on this one thread instead, and applies the mutations on the Trio thread in between.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["PinnedThread"]

T = TypeVar("T")


class PinnedThread:
    """A worker thread for one owner; use as ``with PinnedThread(name) as thread: await thread.call(fn)``.

    A call cannot be cancelled once handed over (like ``trio.to_thread.run_sync``'s default): the caller wakes
    only when the thread is done with it, so nothing it touches is ever used from two threads at once.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def __enter__(self) -> PinnedThread:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Every call has returned by now (calls are not cancellable), so the thread is idle and stops at once.
        self._jobs.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    # Protected from KeyboardInterrupt: between handing over the job and waiting for its result, an interrupt would
    # leave a job that later wakes a task no longer waiting for it.
    @trio.lowlevel.enable_ki_protection
    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the thread and return its result, or raise what it raised."""
        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()

        def job() -> None:
            result = outcome.capture(fn, *args)
            # If the run is over, nobody waits for this result; the thread must live on to be stopped.
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)

        self._jobs.put(job)

        def refuse_abort(_: Any) -> trio.lowlevel.Abort:
            return trio.lowlevel.Abort.FAILED

        value: T = await trio.lowlevel.wait_task_rescheduled(refuse_abort)
        return value
