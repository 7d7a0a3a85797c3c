"""API session lifetime on a virtual clock: sliding expiry, the exact instant of expiry, the timeout floor.

The controller here runs with a 120-second session timeout and a wall clock pinned to a round epoch, so the test can
state the expected instants exactly. Each timed test takes ``autojump_clock`` itself: pytest-trio only runs a test
on a clock passed to the test function.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from controller.clock import Clock, format_time
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_settings, make_user, start_controller
from web.app import create_app

EPOCH = 1_700_000_000.0
TIMEOUT = 120


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery,
                     autojump_clock: MockClock) -> AsyncIterator[Controller]:
    settings = make_settings(tmp_path, session_timeout=TIMEOUT)
    yield await start_controller(settings, nursery, Clock(wall_base=EPOCH))


def wall(controller: Controller) -> float:
    return controller.clock.now()


async def session_id(api: Api) -> str:
    return str((await api.get("/current-api-session")).data["id"])


async def test_login_reports_the_configured_timeout(anon: Api, controller: Controller,
                                                    autojump_clock: MockClock) -> None:
    login_at = wall(controller)
    reply = await anon.post("/authenticate", {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD},
                            query={"method": "password"})
    assert reply.data["expirationSeconds"] == TIMEOUT
    assert reply.headers["expiration-seconds"] == str(TIMEOUT)
    assert reply.data["lastActivityAt"] == format_time(login_at)
    assert reply.data["expiresAt"] == format_time(login_at + TIMEOUT)


async def test_idle_session_ends_exactly_at_the_timeout(admin: Api, controller: Controller,
                                                        autojump_clock: MockClock) -> None:
    start = trio.current_time()
    _, kept = await make_user(admin, "kept")
    expiring = await admin.login("kept", "user-password")
    expiring_id = await session_id(expiring)
    # make_user and login ran at the same virtual instant: both sessions end at start + 120 unless used.
    assert trio.current_time() == start

    await trio.sleep_until(start + TIMEOUT - 0.1)
    assert (await kept.get("/current-identity")).status == 200  # used: now ends at start + 239.9
    still_there = await admin.get(f"/api-sessions/{expiring_id}")  # the admin's use does not touch this one
    assert still_there.status == 200

    await trio.sleep_until(start + TIMEOUT)
    gone = await expiring.get("/current-identity")
    assert gone.status == 401 and gone.error["code"] == "UNAUTHORIZED"
    assert (await admin.get(f"/api-sessions/{expiring_id}")).status == 404
    assert (await kept.get("/current-identity")).status == 200
    assert trio.current_time() == start + TIMEOUT


async def test_each_request_slides_the_expiry(admin: Api, controller: Controller,
                                              autojump_clock: MockClock) -> None:
    start = trio.current_time()
    _, user = await make_user(admin, "slider")
    user_session = await session_id(user)

    await trio.sleep_until(start + 100)
    used_at = wall(controller)
    await admin.get("/current-identity")  # keeps the admin's own session alive for the checks below
    current = await user.get("/current-api-session")
    assert current.data["lastActivityAt"] == format_time(used_at)
    assert current.data["expiresAt"] == format_time(used_at + TIMEOUT)

    await trio.sleep_until(start + 100 + TIMEOUT - 0.1)
    assert (await admin.get(f"/api-sessions/{user_session}")).status == 200
    await trio.sleep_until(start + 100 + TIMEOUT)
    assert (await admin.get(f"/api-sessions/{user_session}")).status == 404
    assert (await user.get("/current-identity")).status == 401


async def test_persisted_activity_follows_the_session(admin: Api, controller: Controller,
                                                      autojump_clock: MockClock) -> None:
    """When the first deadline passes for a session used since, its new lastActivityAt is written to storage."""
    start = trio.current_time()
    _, user = await make_user(admin, "writer")
    user_session = await session_id(user)
    await trio.sleep_until(start + 60)
    used_at = wall(controller)
    await user.get("/current-identity")

    await trio.sleep_until(start + TIMEOUT + 1)
    with controller.store.read() as txn:
        row = txn.get("api-sessions", user_session)
    assert row is not None
    assert row["lastActivityAt"] == format_time(used_at)


@pytest.mark.parametrize(("configured", "effective"), [(59, 1800), (0, 1800), (-5, 1800), (60, 60), (3600, 3600)])
async def test_short_timeouts_fall_back_to_thirty_minutes(tmp_path: Path, nursery: trio.Nursery, configured: int,
                                                           effective: int) -> None:
    controller = await start_controller(make_settings(tmp_path, session_timeout=configured), nursery)
    anon = Api(create_app(controller), controller=controller)
    reply = await anon.post("/authenticate", {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD},
                            query={"method": "password"})
    assert reply.data["expirationSeconds"] == effective
    assert reply.headers["expiration-seconds"] == str(effective)
