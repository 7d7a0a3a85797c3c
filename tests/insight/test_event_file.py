"""The event log across restarts, and the JSON-lines event file written behind it: every event once, in order,
across restarts (a line cut short by a crash included), rotated by size, caught up from the store after a time
without the file."""

from __future__ import annotations

from pathlib import Path

import msgspec
from trio.testing import MockClock, wait_all_tasks_blocked

from controller.insight import EVENTS_KIND, kept_events
from controller.insight.event_log import TRIM_BATCH
from controller.insight.file_sink import EventFile
from controller.insight.kept import event_key
from controller.runtime.composition import Controller
from tests.insight.events_support import mark, since
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, running
from web.app import create_app


async def _services(controller: Controller, prefix: str, count: int) -> None:
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    for n in range(count):
        await admin.create("/services", {"name": f"{prefix}-{n}", "encryptionRequired": True})


def _kept(controller: Controller) -> list[int]:
    with controller.store.read() as txn:
        return [event.id for event in kept_events(txn)]


def _ids(*paths: Path) -> list[int]:
    ids: list[int] = []
    for path in paths:
        if path.exists():
            ids += [msgspec.json.decode(line)["event_id"] for line in path.read_bytes().splitlines()]
    return ids


async def test_ids_go_on_after_a_restart_and_the_store_keeps_the_last_n(tmp_path: Path,
                                                                         autojump_clock: MockClock) -> None:
    async with running(tmp_path, events_keep=50) as controller:
        await _services(controller, "a", 50 + TRIM_BATCH)
        first = mark(controller)
        assert first > 50 + TRIM_BATCH  # the log went past keep + a trim batch: the oldest rows went
        assert 50 <= len(_kept(controller)) <= 50 + TRIM_BATCH
        assert [e["event_id"] for e in since(controller, first - 5)] == list(range(first - 4, first + 1))
    async with running(tmp_path, events_keep=10) as controller:  # a smaller keep trims at the start
        assert len(_kept(controller)) <= 10 + TRIM_BATCH
        await _services(controller, "b", 1)
        last = mark(controller)
        assert last == first + 2  # a login and a service: the count went on from the stored counter
        assert [e["event_id"] for e in since(controller, last - 3)] == [last - 2, last - 1, last]


async def test_the_event_file_resumes_after_a_restart_without_duplicates_or_gaps(tmp_path: Path,
                                                                               autojump_clock: MockClock) -> None:
    path = tmp_path / "log" / "events.jsonl"
    data = tmp_path / "data"
    async with running(data, events_file=path) as controller:
        await _services(controller, "a", 3)
        await wait_all_tasks_blocked()
        written = _ids(path)
        assert written == list(range(1, mark(controller) + 1))
    # Events while the file is not written (no --events-file): caught up from the store on the next start.
    async with running(data) as controller:
        await _services(controller, "b", 2)
    # A crash in the middle of a line: the cut line goes, and the event is written again whole.
    path.write_bytes(path.read_bytes() + b'{"event_id": ' + str(written[-1] + 1).encode() + b', "namespace": "ent')
    async with running(data, events_file=path) as controller:
        await wait_all_tasks_blocked()
        await _services(controller, "c", 2)
        await wait_all_tasks_blocked()
        assert _ids(path) == list(range(1, mark(controller) + 1))
        with controller.store.read() as txn:
            stored = {event.id: event.data for event in kept_events(txn)}
        assert all(stored[msgspec.json.decode(line)["event_id"]] == line for line in path.read_bytes().splitlines())


async def test_the_event_file_rotates_by_size_and_keeps_its_backups(tmp_path: Path,
                                                                    autojump_clock: MockClock) -> None:
    path = tmp_path / "events.jsonl"
    async with running(tmp_path / "data", events_file=path, events_file_max_bytes=2000,
                       events_file_backups=2) as controller:
        await _services(controller, "s", 20)
        await wait_all_tasks_blocked()
        last = mark(controller)
    files = [path.with_name("events.jsonl.2"), path.with_name("events.jsonl.1"), path]
    assert all(f.exists() and 0 < f.stat().st_size <= 2000 for f in files)
    assert not path.with_name("events.jsonl.3").exists()
    kept = _ids(*files)
    assert kept == list(range(kept[0], last + 1)) and kept[0] > 1  # the oldest went with the third rotation


def test_the_last_id_comes_from_the_newest_file_that_has_one(tmp_path: Path) -> None:
    file = EventFile(tmp_path / "e.jsonl", max_bytes=100, backups=1)
    assert file.last_written() == 0
    file.rotated(1).write_bytes(b'{"event_id":7}\n{"event_id":8}\n')
    (tmp_path / "e.jsonl").write_bytes(b'{"event_id":9')  # nothing whole in the current file
    assert file.last_written() == 8
    assert (tmp_path / "e.jsonl").read_bytes() == b""


async def test_a_write_with_more_events_than_kept_keeps_its_row_and_the_count(tmp_path: Path,
                                                                               autojump_clock: MockClock) -> None:
    async with running(tmp_path, events_keep=1) as controller:  # bootstrap alone records more than one
        first = mark(controller)
        assert first > 1 and _kept(controller)[-1] == first
        await _services(controller, "a", 3)
        assert mark(controller) == first + 4
    async with running(tmp_path, events_keep=1) as controller:
        await _services(controller, "b", 1)
        assert mark(controller) == first + 6


async def test_rows_stored_as_json_lines_are_read_and_numbered_from(tmp_path: Path, autojump_clock: MockClock) -> None:
    """A store whose last row holds events as JSON lines (as they were once stored): they read back as they were,
    and the next write numbers on from them."""
    async with running(tmp_path) as controller:
        last = mark(controller)
    old = [{"event_id": last + n, "namespace": "mfa", "event_type": "enrolled", "timestamp": "2026-01-01T00:00:00.000Z",
            "event_src_id": "old", "identity_id": f"i{n}", "api_session_id": None} for n in (1, 2)]
    async with running(tmp_path) as controller:
        row = b"\n".join(msgspec.json.encode(e) for e in old)
        await controller.domain.write(lambda ctx: ctx.txn.put_raw(EVENTS_KIND, event_key(last + 1), row))
        assert since(controller, last) == old
        await _services(controller, "c", 1)
        assert mark(controller) > last + 2 and since(controller, last)[:2] == old
