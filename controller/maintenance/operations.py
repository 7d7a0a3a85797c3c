"""The database operations of the management API: snapshots of the store, and data-integrity runs in the background.

**Snapshots** (:meth:`DatabaseOperations.snapshot`) are consistent, compacted LMDB copies (LMDB's own copy, which
reads one snapshot of the store while writes go on) written beside the store: the store lives in ``DATA_DIR/db``,
each snapshot in ``DATA_DIR/db-YYYYMMDD-HHMMSS`` (UTC, from the controller's clock; ``-2``, ``-3``... in the rare
case the name is taken), a complete store directory (``data.mdb``) with the store's private modes. To restore one,
stop the controller and put the snapshot's directory in place of ``DATA_DIR/db``. The copy is made under a hidden
name and renamed when complete, so a snapshot directory is never half written. At most one snapshot a minute.

**Integrity runs** (:meth:`DatabaseOperations.start_integrity_run`): a request only records that a run starts and
hands it to the service (:meth:`DatabaseOperations.run`, started in the task tree), which checks the store chunk by
chunk (``controller/maintenance/integrity.py``), each chunk in its own short read transaction with a checkpoint between
them, and, for a fix, repairs each chunk's problems through the group-commit writer before going on. One run at a time;
the results of the latest run (:class:`IntegrityReport`) are kept in memory until the next one starts.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

from controller.clock import format_time
from controller.data.domain import Domain
from controller.errors import ApiError, nested_cause
from controller.maintenance.integrity import Problem, ScanPosition, check_chunk, repair
from storage.batch import Outcome
from storage.store import Store

__all__ = ["MAX_RESULTS", "SNAPSHOT_INTERVAL", "DatabaseOperations", "IntegrityReport", "copy_store"]

log = logging.getLogger("tollgate.database")

MAX_RESULTS = 1000
"""Problems an integrity run keeps; past them it sets ``tooManyErrors``."""
SNAPSHOT_INTERVAL = 60.0
"""Seconds from one snapshot's start before the next may start."""

# The store holds password hashes and secrets: its snapshots are as private as the store itself.
_DIRECTORY_MODE = 0o700
_FILE_MODE = 0o600


@dataclass
class IntegrityReport:
    """The state and findings of the latest integrity run (all empty before the first one).

    Attributes:
        start_time, end_time: wall-clock epoch seconds; ``end_time`` is None while the run goes on.
        in_progress: the run has not ended.
        fixing: the run repairs what it finds.
        too_many_errors: more problems were found than :data:`MAX_RESULTS`; the rest are not listed (a check stops
            there, a fix goes on repairing to the end).
        error: why the run stopped early, if it failed.
        results: ``(description, fixed)`` per problem, in the order found; None before the first run.
    """

    start_time: float | None = None
    end_time: float | None = None
    in_progress: bool = False
    fixing: bool = False
    too_many_errors: bool = False
    error: str | None = None
    results: list[tuple[str, bool]] | None = None

    def details(self) -> dict[str, Any]:
        """The report with the wire names of the management API's integrity results."""
        return {
            "startTime": None if self.start_time is None else format_time(self.start_time),
            "endTime": None if self.end_time is None else format_time(self.end_time),
            "inProgress": self.in_progress,
            "fixingErrors": self.fixing,
            "tooManyErrors": self.too_many_errors,
            "error": self.error,
            "results": None if self.results is None else [
                {"description": description, "fixed": fixed} for description, fixed in self.results],
        }

    def add(self, description: str, fixed: bool) -> None:
        """Record one problem, unless :data:`MAX_RESULTS` are recorded already (then set ``too_many_errors``)."""
        if self.results is None:
            self.results = []
        if len(self.results) < MAX_RESULTS:
            self.results.append((description, fixed))
        else:
            self.too_many_errors = True


class DatabaseOperations:
    """Snapshots and integrity runs of one controller's store.

    Args:
        domain: reads the store, and writes the repairs through its writer.
        store_path: the store's directory; snapshots are written beside it.
        in_thread: copy snapshots in a worker thread (production). Tests on Trio's virtual clock pass False, so
            that virtual time cannot jump while a copy runs.
    """

    def __init__(self, domain: Domain, store_path: Path, *, in_thread: bool = True) -> None:
        self._domain = domain
        self._store_path = store_path
        self._in_thread = in_thread
        self.report = IntegrityReport()
        # A run is marked in progress before it is queued, so at most one is ever queued.
        self._runs, self._queued = trio.open_memory_channel[bool](1)
        self._last_snapshot: float | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Carry out the integrity runs requested, one after the other, until cancelled."""
        task_status.started()
        async for fix in self._queued:
            await self._integrity_run(self.report, fix=fix)

    def start_integrity_run(self, *, fix: bool) -> None:
        """Start a check (``fix`` False) or a fix of the store's integrity in the background: a new report replaces
        the last one, marked in progress from now on.

        Raises:
            ApiError: 429 RATE_LIMITED while a run is in progress.
        """
        if self.report.in_progress:
            raise ApiError("RATE_LIMITED", nested_cause("a data integrity run is already in progress",
                                                        "RATE_LIMITED"), headers={"Retry-After": "1"})
        self.report = IntegrityReport(start_time=self._domain.clock.now(), in_progress=True, fixing=fix, results=[])
        self._runs.send_nowait(fix)

    async def snapshot(self) -> Path:
        """Write a compacted, consistent copy of the store beside it (see the module docstring); returns its
        directory once complete.

        Raises:
            ApiError: 429 RATE_LIMITED (with ``Retry-After``) within :data:`SNAPSHOT_INTERVAL` of the previous
                snapshot's start.
            OSError: the copy could not be written (nothing is left behind).
        """
        now = self._domain.clock.now()
        if self._last_snapshot is not None and now < self._last_snapshot + SNAPSHOT_INTERVAL:
            wait = max(1, math.ceil(self._last_snapshot + SNAPSHOT_INTERVAL - now))
            raise ApiError("RATE_LIMITED", nested_cause(f"a snapshot was started less than {SNAPSHOT_INTERVAL:.0f} s "
                                                        f"ago; try again in {wait} s", "RATE_LIMITED"),
                           headers={"Retry-After": str(wait)})
        # Taken before the copy: a second request during a long copy is refused too, and a failed copy still counts.
        self._last_snapshot = now
        target = _snapshot_path(self._store_path, now)
        store = self._domain.store
        if self._in_thread:
            # Not abandoned on cancellation: the store must outlive the copy (the controller closes it only once
            # every request, this one included, has returned).
            await trio.to_thread.run_sync(copy_store, store, target)
        else:
            copy_store(store, target)
        log.info("database snapshot written", extra={"path": str(target)})
        return target

    async def _integrity_run(self, report: IntegrityReport, *, fix: bool) -> None:
        try:
            position: ScanPosition | None = None
            while True:
                with self._domain.read() as ctx:
                    problems, position = check_chunk(ctx, position)
                fixed = await self._repair(problems) if fix else [False] * len(problems)
                for problem, done in zip(problems, fixed, strict=True):
                    report.add(problem.description, done)
                if position is None or (report.too_many_errors and not fix):
                    break
                await trio.lowlevel.checkpoint()
        except Exception as exc:
            # This service is the boundary of a run, as an actor is of its identity: a run that fails says why in
            # its report instead of stopping the controller.
            log.exception("data integrity run failed")
            report.error = f"{type(exc).__name__}: {exc}"
        finally:
            report.end_time = self._domain.clock.now()
            report.in_progress = False

    async def _repair(self, problems: list[Problem]) -> list[bool]:
        """Repair each problem in its own mutation of the next group commit (one refused repair rolls back alone);
        returns whether each one is fixed, once all of them are durable."""
        fixed = [False] * len(problems)
        waiting = [index for index, problem in enumerate(problems) if problem.repair is not None]
        if not waiting:
            return fixed
        done = trio.Event()
        left = len(waiting)

        def finished(index: int, outcome: Outcome) -> None:
            nonlocal left
            if outcome.error is None:
                fixed[index] = bool(outcome.value)
            else:
                log.warning("data integrity repair failed", extra={"problem": problems[index].description,
                                                                    "error": repr(outcome.error)})
            left -= 1
            if left == 0:
                done.set()

        for index in waiting:
            self._domain.post_write(functools.partial(repair, problem=problems[index]),
                                    functools.partial(finished, index))
        await done.wait()
        return fixed


def _snapshot_path(store_path: Path, now: float) -> Path:
    """``<store>-YYYYMMDD-HHMMSS`` beside the store, with ``-2``, ``-3``... when that name is taken."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M%S")
    base = store_path.with_name(f"{store_path.name}-{stamp}")
    target, number = base, 1
    while target.exists():
        number += 1
        target = base.with_name(f"{base.name}-{number}")
    return target


def copy_store(store: Store, target: Path) -> None:
    """Write a compacted, consistent copy of ``store`` as the store directory ``target`` (which must not exist):
    copied under a hidden name first and renamed when complete, the directory mode 0700 and ``data.mdb`` 0600.

    LMDB's copy reads one snapshot of the store in a read transaction of its own, from start to end; writes go on
    meanwhile. Safe to call from a worker thread.

    Raises:
        OSError, lmdb.Error: the copy could not be written; nothing is left behind.
    """
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # what a crash during an earlier copy left
    partial.mkdir(mode=_DIRECTORY_MODE)
    try:
        os.chmod(partial, _DIRECTORY_MODE)  # mkdir's mode is masked by the umask
        store.env.copy(str(partial), compact=True)
        os.chmod(partial / "data.mdb", _FILE_MODE)
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
