"""``POST /identities/{id}/disable`` and ``/enable`` (behaviour note §9.2, deliberate difference #6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from controller.clock import Clock, format_time
from controller.errors import ApiError
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_settings, make_user, start_controller
from web.app import create_app

EMPTY = {"data": {}, "meta": {}}


async def _login(api: Api, username: str, password: str = "user-password") -> int:
    reply = await api.with_token(None).post("/authenticate", {"username": username, "password": password},
                                            query={"method": "password"})
    if reply.status != 200:
        assert reply.error["code"] == "INVALID_AUTH"
        assert "zt-session" not in reply.headers
    return reply.status


@pytest.mark.parametrize("minutes", [0, -10])
async def test_indefinite_disable_ends_sessions_and_blocks_login(admin: Api, controller: Controller,
                                                                 minutes: int) -> None:
    identity_id, user = await make_user(admin, "mallory")
    second = await admin.login("mallory", "user-password")

    before = format_time(controller.clock.now())
    reply = await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": minutes})
    after = format_time(controller.clock.now())

    assert reply.status == 200
    assert reply.body == EMPTY
    for client in (user, second):
        gone = await client.get("/current-identity")
        assert gone.status == 401 and gone.error["code"] == "UNAUTHORIZED"
    assert (await admin.get("/api-sessions", query={"filter": f'identityId = "{identity_id}"'})).data == []
    detail = (await admin.get(f"/identities/{identity_id}")).data
    assert detail["disabled"] is True
    assert before <= detail["disabledAt"] <= after
    assert detail["disabledUntil"] is None
    assert detail["hasApiSession"] is False
    assert await _login(admin, "mallory") == 401

    enabled = await admin.post(f"/identities/{identity_id}/enable")
    assert enabled.status == 200 and enabled.body == EMPTY
    detail = (await admin.get(f"/identities/{identity_id}")).data
    assert (detail["disabled"], detail["disabledAt"], detail["disabledUntil"]) == (False, None, None)
    assert await _login(admin, "mallory") == 200


async def test_timed_disable_lapses_by_itself(tmp_path: Path, nursery: trio.Nursery,
                                              autojump_clock: trio.testing.MockClock) -> None:
    controller = await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=1_700_000_000.0))
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    identity_id, _ = await make_user(admin, "trudy")
    start = trio.current_time()
    disabled_at = controller.clock.now()

    assert (await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": 1})).status == 200
    detail = (await admin.get(f"/identities/{identity_id}")).data
    assert detail["disabledAt"] == format_time(disabled_at)
    assert detail["disabledUntil"] == format_time(disabled_at + 60)
    assert detail["disabled"] is True

    await trio.sleep_until(start + 59)
    assert await _login(admin, "trudy") == 401
    assert (await admin.get(f"/identities/{identity_id}")).data["disabled"] is True

    await trio.sleep_until(start + 60)
    assert await _login(admin, "trudy") == 200
    detail = (await admin.get(f"/identities/{identity_id}")).data
    assert detail["disabled"] is False
    assert detail["disabledUntil"] == format_time(disabled_at + 60)  # the record stays; it is simply in the past


@pytest.mark.parametrize(("body", "field"), [
    (None, "disable"),
    ({}, "durationMinutes"),
    ({"durationMinutes": "5"}, "durationMinutes"),
    ({"durationMinutes": True}, "durationMinutes"),
    ({"durationMinutes": 1.5}, "durationMinutes"),
    ({"durationMinutes": None}, "durationMinutes"),
    ([1], "(root)"),
])
async def test_bad_disable_bodies_change_nothing(admin: Api, body: Any, field: str) -> None:
    identity_id, user = await make_user(admin, "oscar")

    reply = await admin.post(f"/identities/{identity_id}/disable", body)

    assert reply.status == 400
    assert reply.error["code"] == "COULD_NOT_VALIDATE"
    assert reply.error["cause"]["field"] == field
    assert (await admin.get(f"/identities/{identity_id}")).data["disabledAt"] is None
    assert (await user.get("/current-identity")).status == 200


async def test_huge_durations_are_accepted(admin: Api) -> None:
    identity_id, _ = await make_user(admin, "peggy")
    reply = await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": 10**30})
    assert reply.status == 200
    assert (await admin.get(f"/identities/{identity_id}")).data["disabled"] is True


@pytest.mark.parametrize("action", ["disable", "enable"])
async def test_unknown_identity_is_404(admin: Api, action: str) -> None:
    reply = await admin.post(f"/identities/nope/{action}", {"durationMinutes": 5} if action == "disable" else None)
    assert reply.status == 404
    assert reply.error["code"] == "NOT_FOUND"
    assert reply.error["cause"]["message"] == "identity with id nope not found"


async def test_the_default_admin_cannot_be_disabled(admin: Api, controller: Controller) -> None:
    with controller.store.read() as txn:
        admin_id = txn.meta("defaultAdminId")

    reply = await admin.post(f"/identities/{admin_id}/disable", {"durationMinutes": 0})

    assert reply.status == 400
    assert reply.error["code"] == "COULD_NOT_VALIDATE"
    assert reply.error["cause"]["field"] == "id"
    assert (await admin.get("/current-identity")).data["disabled"] is False
    assert await _login(admin, ADMIN_USERNAME, ADMIN_PASSWORD) == 200


async def test_enable_of_an_enabled_identity_is_a_no_op(admin: Api) -> None:
    identity_id, _ = await make_user(admin, "victor")
    before = (await admin.get(f"/identities/{identity_id}")).data
    assert (await admin.post(f"/identities/{identity_id}/enable")).body == EMPTY
    assert (await admin.get(f"/identities/{identity_id}")).data["updatedAt"] == before["updatedAt"]


async def test_a_login_racing_a_disable_gets_no_session(admin: Api, controller: Controller) -> None:
    """A login that verified the password before the disable committed still creates no session afterwards."""
    identity_id, _ = await make_user(admin, "walter")
    with controller.store.read() as txn:
        authenticator_id = txn.by_unique("authenticators", "username", "walter")
    assert authenticator_id is not None
    assert (await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": 0})).status == 200

    with pytest.raises(ApiError) as raised:
        await controller.sessions.create(identity_id, authenticator_id, "127.0.0.1", {})
    assert raised.value.code == "INVALID_AUTH"
    assert controller.sessions.sessions_of(identity_id) == []
