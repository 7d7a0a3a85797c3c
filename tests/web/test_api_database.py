"""The database operations over HTTP, in process: snapshots (a readable copy of the store, at most one a minute on
the controller's clock) and integrity runs in the background (202, one at a time, their results capped).

The controller runs on Trio's virtual clock with a wall clock pinned to a round epoch, so snapshot names and the
rate limit are exact. The database service is started by each fixture, as ``controller.runtime.task_tree`` starts it.
"""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from controller.clock import Clock, format_time
from controller.maintenance import operations as database_ops
from controller.maintenance.operations import MAX_RESULTS
from controller.posture.engine import STATE_KIND
from controller.posture.state import IdentityState, encode_state
from controller.runtime.composition import Controller
from storage.store import Store
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, Reply, make_settings, make_user, start_controller
from web.app import create_app

EPOCH = 1_700_000_000.0  # 2023-11-14T22:13:20Z
RESULTS = "/database/data-integrity-results"
EMPTY: dict[str, Any] = {"data": {}, "meta": {}}


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Controller]:
    # The tests that use it take autojump_clock themselves: pytest-trio runs a test on a clock only when the test
    # function asks for it (tests/conftest.py refuses a clock asked for by a fixture alone).
    started = await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=EPOCH))
    yield started


@pytest.fixture
async def admin(controller: Controller) -> Api:
    return await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)


async def _write(controller: Controller, fn: Any) -> None:
    await controller.domain.write(fn)


async def _orphans(controller: Controller, count: int) -> None:
    """Posture state of ``count`` identities that do not exist (one problem each)."""
    def put(ctx: Any) -> None:
        for n in range(count):
            ctx.txn.put_raw(STATE_KIND, f"ghost-{n:05d}", encode_state(IdentityState(f"ghost-{n:05d}")))
    await _write(controller, put)


def _snapshots(data_dir: Path) -> list[str]:
    """The names of the snapshot directories beside the store, finished or not (sorted)."""
    return sorted(p.name for p in data_dir.iterdir() if p.name.startswith(("db-", ".db-")))


async def _finished(admin: Api) -> Reply:
    """The results once the run has ended (every other task blocked: no virtual time passes meanwhile)."""
    await trio.testing.wait_all_tasks_blocked()
    reply = await admin.get(RESULTS)
    assert reply.status == 200 and reply.data["inProgress"] is False, reply.body
    return reply


async def test_a_snapshot_is_a_readable_private_copy_of_the_store(admin: Api, controller: Controller,
                                                                   tmp_path: Path, autojump_clock: MockClock) -> None:
    reply = await admin.post("/database/snapshot")
    assert (reply.status, reply.body) == (200, EMPTY)
    await admin.create("/services", {"name": "after-the-snapshot", "encryptionRequired": True})

    snapshot = tmp_path / "db-20231114-221320"
    assert _snapshots(tmp_path) == [snapshot.name]
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o700
    assert stat.S_IMODE((snapshot / "data.mdb").stat().st_mode) == 0o600
    copy = Store(snapshot, controller.registry.layouts(), durable=False)
    try:
        with copy.read() as txn:
            admin_id = txn.by_unique("identities", "name", "Default Admin")
            assert admin_id is not None and txn.meta("defaultAdminId") == admin_id
            assert txn.count("api-sessions") == 1
            assert txn.by_unique("services", "name", "after-the-snapshot") is None
    finally:
        copy.close()


async def test_with_worker_threads_the_copy_and_the_repairs_run_off_the_event_loop(tmp_path: Path,
                                                                                   nursery: trio.Nursery) -> None:
    controller = await start_controller(make_settings(tmp_path, worker_threads=True), nursery)
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    await _orphans(controller, 3)

    assert (await admin.post("/database/snapshot")).status == 200
    [name] = _snapshots(tmp_path)
    snapshot = tmp_path / name
    assert (snapshot / "data.mdb").stat().st_size > 0
    assert (await admin.post("/database/fix-data-integrity")).status == 202
    while (done := await admin.get(RESULTS)).data["inProgress"]:
        await controller.writer.submit(lambda txn: None)  # one commit at a time, until the run has ended
    assert [r["fixed"] for r in done.data["results"]] == [True, True, True]


async def test_snapshots_are_at_most_one_a_minute(admin: Api, autojump_clock: MockClock, tmp_path: Path) -> None:
    start = trio.current_time()
    assert (await admin.post("/database/snapshot")).status == 200

    await trio.sleep_until(start + 59.5)
    refused = await admin.post("/database/snapshot")
    assert refused.status == 429 and refused.error["code"] == "RATE_LIMITED"
    assert refused.headers["Retry-After"] == "1"

    await trio.sleep_until(start + 60)
    assert (await admin.post("/database/snapshot")).status == 200
    assert _snapshots(tmp_path) == ["db-20231114-221320", "db-20231114-221420"]


async def test_results_before_any_run_are_empty(admin: Api, autojump_clock: MockClock) -> None:
    reply = await admin.get(RESULTS)
    assert reply.status == 200
    assert reply.body == {
        "data": {"startTime": None, "endTime": None, "inProgress": False, "fixingErrors": False,
                 "tooManyErrors": False, "error": None, "results": None},
        "meta": {"pagination": {"limit": -1, "offset": 0, "totalCount": 0}, "filterableFields": []}}


async def test_a_check_of_a_sound_store_finds_nothing(admin: Api, controller: Controller,
                                                      autojump_clock: MockClock) -> None:
    before = format_time(controller.clock.now())
    reply = await admin.post("/database/check-data-integrity")
    assert (reply.status, reply.body) == (202, EMPTY)
    done = await _finished(admin)
    after = format_time(controller.clock.now())
    assert before <= done.data["startTime"] <= done.data["endTime"] <= after
    assert done.data == {"startTime": done.data["startTime"], "endTime": done.data["endTime"], "inProgress": False,
                         "fixingErrors": False, "tooManyErrors": False, "error": None, "results": []}


async def test_a_fix_repairs_what_a_check_reports(admin: Api, controller: Controller,
                                                  autojump_clock: MockClock) -> None:
    def damage(ctx: Any) -> None:
        ctx.txn.put("sessions", {"id": "lost", "apiSessionId": "ended", "identityId": "nobody", "serviceId": "none",
                                 "type": "Dial", "token": "t", "servicePolicies": [], "tags": {}})
        ctx.txn.put_raw(STATE_KIND, "ghost", encode_state(IdentityState("ghost")))

    await _write(controller, damage)
    found = {
        "sessions row lost: apiSessionId names api-sessions row ended, which does not exist",
        "sessions row lost: identityId names identities row nobody, which does not exist",
        "sessions row lost: serviceId names services row none, which does not exist",
        "posture-state row ghost belongs to identities row ghost, which does not exist",
    }

    assert (await admin.post("/database/check-data-integrity")).status == 202
    checked = await _finished(admin)
    assert {r["description"] for r in checked.data["results"]} == found
    assert not any(r["fixed"] for r in checked.data["results"])
    assert checked.body["meta"]["pagination"]["totalCount"] == len(found)

    assert (await admin.post("/database/fix-data-integrity")).status == 202
    fixed = await _finished(admin)
    assert fixed.data["fixingErrors"] is True
    assert {(r["description"], r["fixed"]) for r in fixed.data["results"]} == {(d, True) for d in found}
    with controller.store.read() as txn:
        assert not txn.exists("sessions", "lost") and txn.get_raw(STATE_KIND, "ghost") is None

    assert (await admin.post("/database/check-data-integrity")).status == 202
    assert (await _finished(admin)).data["results"] == []


async def test_one_run_at_a_time(tmp_path: Path, nursery: trio.Nursery, autojump_clock: MockClock) -> None:
    # The database service is not started yet: the requested run stays in progress until it is.
    controller = await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=EPOCH))
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    assert (await admin.post("/database/fix-data-integrity")).status == 202
    running = await admin.get(RESULTS)
    assert running.data == {"startTime": running.data["startTime"], "endTime": None, "inProgress": True,
                            "fixingErrors": True, "tooManyErrors": False, "error": None, "results": []}
    assert running.data["startTime"] <= format_time(controller.clock.now())
    for path in ("/database/check-data-integrity", "/database/fix-data-integrity"):
        refused = await admin.post(path)
        assert refused.status == 429 and refused.error["code"] == "RATE_LIMITED", path

    done = await _finished(admin)
    assert done.data["fixingErrors"] is True and done.data["results"] == []
    assert (await admin.post("/database/check-data-integrity")).status == 202
    assert (await _finished(admin)).data["fixingErrors"] is False


async def test_results_are_capped_and_a_fix_still_repairs_everything(admin: Api, controller: Controller,
                                                                     autojump_clock: MockClock) -> None:
    await _orphans(controller, MAX_RESULTS + 5)

    assert (await admin.post("/database/check-data-integrity")).status == 202
    checked = await _finished(admin)
    assert checked.data["tooManyErrors"] is True
    assert len(checked.data["results"]) == MAX_RESULTS
    assert checked.body["meta"]["pagination"]["totalCount"] == MAX_RESULTS
    assert checked.data["results"][0] == {
        "description": "posture-state row ghost-00000 belongs to identities row ghost-00000, which does not exist",
        "fixed": False}

    assert (await admin.post("/database/fix-data-integrity")).status == 202
    fixed = await _finished(admin)
    assert fixed.data["tooManyErrors"] is True and len(fixed.data["results"]) == MAX_RESULTS
    assert all(r["fixed"] for r in fixed.data["results"])
    with controller.store.read() as txn:
        # The five beyond the cap were repaired too; what is left is the admin's own state.
        assert [key for key, _ in txn.scan_raw(STATE_KIND) if key.startswith("ghost-")] == []


async def test_an_unreadable_row_is_reported_and_the_check_goes_on(admin: Api, controller: Controller,
                                                                   autojump_clock: MockClock) -> None:
    store = controller.store
    with store.env.begin(write=True) as txn:  # below the store: a row that is not msgpack
        txn.put(b"garbled", b"\xc1", db=store.rows_db("services"))
    await _orphans(controller, 1)

    assert (await admin.post("/database/fix-data-integrity")).status == 202
    done = await _finished(admin)
    assert done.data["error"] is None
    [unreadable, orphan] = done.data["results"]
    assert unreadable["description"].startswith("services row garbled cannot be decoded (")
    assert unreadable["fixed"] is False
    assert orphan["fixed"] is True


async def test_a_run_that_fails_says_why(admin: Api, monkeypatch: pytest.MonkeyPatch,
                                         autojump_clock: MockClock) -> None:
    def broken(*args: Any) -> Any:
        raise OSError("the disk is on fire")

    monkeypatch.setattr(database_ops, "check_chunk", broken)
    assert (await admin.post("/database/check-data-integrity")).status == 202
    failed = await _finished(admin)
    assert failed.data["error"] == "OSError: the disk is on fire"
    assert failed.data["endTime"] is not None and failed.data["results"] == []
    assert (await admin.post("/database/check-data-integrity")).status == 202  # the service goes on
    assert (await _finished(admin)).data["error"] == "OSError: the disk is on fire"


async def test_only_admins_may_call_the_database_operations(admin: Api, tmp_path: Path,
                                                            autojump_clock: MockClock) -> None:
    _, user = await make_user(admin, "operator")
    for method, path in (("POST", "/database/snapshot"), ("POST", "/database/check-data-integrity"),
                         ("POST", "/database/fix-data-integrity"), ("GET", RESULTS)):
        for caller in (user, admin.with_token(None)):
            reply = await caller.request(method, path)
            assert reply.status == 401 and reply.error["code"] == "UNAUTHORIZED", (method, path)
    assert _snapshots(tmp_path) == []
    assert (await admin.get(RESULTS)).data["startTime"] is None


async def test_the_operations_are_in_our_openapi_document(admin: Api, autojump_clock: MockClock) -> None:
    document = (await admin.get("/specs/edge-management/spec")).body
    operations = {(path, method): op["operationId"] for path, item in document["paths"].items()
                  if path.startswith("/database/") for method, op in item.items()}
    assert operations == {("/database/snapshot", "post"): "createDatabaseSnapshot",
                          ("/database/check-data-integrity", "post"): "checkDataIntegrity",
                          ("/database/fix-data-integrity", "post"): "fixDataIntegrity",
                          ("/database/data-integrity-results", "get"): "dataIntegrityResults"}
    snapshot = document["paths"]["/database/snapshot"]["post"]["responses"]
    assert {"200", "401", "429"} <= snapshot.keys()
    assert "202" in document["paths"]["/database/check-data-integrity"]["post"]["responses"]
