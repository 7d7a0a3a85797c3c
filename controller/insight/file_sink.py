"""The JSON-lines event file (``tollgate serve --events-file PATH``): one event per line, written behind the log by a
service of its own, rotated by size.

The service subscribes to the hub, then catches up from the events the store keeps after the last id the file
holds, then writes each committed batch as it comes: the engine never waits for it. A restart reads the last id
in the file (a line cut short by a crash is cut off first) and resumes after it, so the file holds every event once,
in order, as long as the sink never falls further behind than the store keeps (``--events-keep``); if it does, the
events it could not read any more are named in a warning.

Rotation: when the next line would take ``PATH`` past ``max_bytes``, ``PATH`` becomes ``PATH.1`` (``PATH.1``
becomes ``PATH.2``, and so on; ``PATH.<backups>`` is deleted) and a new ``PATH`` starts.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec
import trio

from controller.insight.event_log import read_after
from controller.insight.hub import EventHub, Lagged
from controller.insight.kept import KeptEvent
from storage.store import Store

__all__ = ["EventFile", "write_events_behind"]

log = logging.getLogger("tollgate.events")
_CATCH_UP_BATCH = 1000
_TAIL = 65536


class EventFile:
    """The event file and its rotated predecessors. Synchronous: the service calls it from a thread (or inline)."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups

    def rotated(self, index: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{index}")

    def last_written(self) -> int:
        """The id of the last event in the file (or, when it is empty, in the newest rotated one); 0 for none. A
        last line cut short (no newline) is removed from ``PATH`` first."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            _cut_partial_line(self.path)
        for candidate in (self.path, self.rotated(1)):
            if candidate.exists():
                found = _last_id(candidate)
                if found is not None:
                    return found
        return 0

    def append(self, events: list[KeptEvent]) -> None:
        """Write ``events`` as lines, rotating whenever the next line would pass ``max_bytes``."""
        size = self.path.stat().st_size if self.path.exists() else 0
        chunk: list[bytes] = []
        for event in events:
            line = event.data + b"\n"
            if size and size + len(line) > self.max_bytes:
                self._write(chunk)
                chunk = []
                self._rotate()
                size = 0
            chunk.append(line)
            size += len(line)
        self._write(chunk)

    def _write(self, lines: list[bytes]) -> None:
        if not lines:
            return
        with open(self.path, "ab") as out:
            out.write(b"".join(lines))

    def _rotate(self) -> None:
        oldest = self.rotated(self.backups)
        if oldest.exists():
            oldest.unlink()
        for index in range(self.backups - 1, 0, -1):
            if self.rotated(index).exists():
                os.replace(self.rotated(index), self.rotated(index + 1))
        if self.backups > 0:
            os.replace(self.path, self.rotated(1))
        else:
            self.path.unlink()


def _cut_partial_line(path: Path) -> None:
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb+") as file:
        file.seek(size - 1)
        if file.read(1) == b"\n":
            return
        end = size
        while end > 0:
            start = max(0, end - _TAIL)
            file.seek(start)
            block = file.read(end - start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                file.truncate(start + newline + 1)
                return
            end = start
        file.truncate(0)


def _last_id(path: Path) -> int | None:
    """The ``event_id`` of the last line of ``path`` that holds one (None: no such line)."""
    with open(path, "rb") as file:
        end = file.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - _TAIL)
            file.seek(start)
            tail = file.read(end - start) + tail
            end = start
            lines = tail.split(b"\n")
            complete = lines if start == 0 else lines[1:]  # the first may be cut by the block's start
            for line in reversed(complete):
                if line.strip():
                    try:
                        event_id = msgspec.json.decode(line).get("event_id")
                    except (msgspec.DecodeError, AttributeError):
                        continue
                    if isinstance(event_id, int):
                        return event_id
            if start > 0:
                tail = lines[0]
    return None


async def write_events_behind(file: EventFile, store: Store, hub: EventHub, *, in_thread: bool,
                              task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The file sink service: see the module docstring. Runs until cancelled; ``in_thread`` writes from a worker
    thread (production), else inline (tests on a virtual clock)."""

    async def write(events: list[KeptEvent]) -> None:
        if in_thread:
            await trio.to_thread.run_sync(file.append, events)
        else:
            file.append(events)

    async def catch_up(last: int) -> int:
        while True:
            with store.read() as txn:
                batch = read_after(txn, last, _CATCH_UP_BATCH)
            if not batch:
                return last
            if batch[0].id != last + 1:
                log.warning("events missing from the event file: the store no longer keeps them",
                            extra={"firstMissing": last + 1, "lastMissing": batch[0].id - 1})
            await write(batch)
            last = batch[-1].id

    last = file.last_written()
    with hub.subscribe(ends_on_close=False) as subscription:
        task_status.started()
        last = await catch_up(last)
        while True:
            try:
                batch = await subscription.receive()
            except Lagged:
                last = await catch_up(last)
                continue
            fresh = [event for event in batch if event.id > last]
            if fresh and fresh[0].id != last + 1:
                # Committed before the catch-up read: the store has what came between.
                last = await catch_up(last)
                fresh = [event for event in fresh if event.id > last]
            if fresh:
                await write(fresh)
                last = fresh[-1].id
