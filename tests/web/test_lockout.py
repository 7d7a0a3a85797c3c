"""Auth-policy lockout (``controller/authentication/lockout.py``): consecutive wrong passwords beyond ``maxAttempts``
disable the identity for ``lockoutDurationMinutes``; timings on Trio's virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from controller.authentication.lockout import FailedLogins, lockout_minutes
from controller.authentication.throttle import GuessThrottles
from controller.clock import Clock, format_time, parse_time
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_settings, make_user, start_controller
from web.app import create_app

WALL = 1_700_000_000.0


def _policy(max_attempts: int, minutes: int) -> dict[str, Any]:
    return {"name": f"lockout-{max_attempts}-{minutes}",
            "primary": {"cert": {"allowed": True, "allowExpiredCerts": True},
                        "extJwt": {"allowed": True, "allowedSigners": []},
                        "updb": {"allowed": True, "minPasswordLength": 5, "requireSpecialChar": False,
                                 "requireNumberChar": False, "requireMixedCase": False,
                                 "maxAttempts": max_attempts, "lockoutDurationMinutes": minutes}},
            "secondary": {"requireTotp": False, "requireExtJwtSigner": None}}


async def _login(api: Api, username: str, password: str = "user-password", *, client: bool = False) -> int:
    target = api.with_token(None).as_client() if client else api.with_token(None)
    reply = await target.post("/authenticate", {"username": username, "password": password},
                              query={"method": "password"})
    if reply.status != 200:
        assert reply.error["code"] == "INVALID_AUTH"
        assert "zt-session" not in reply.headers
    return reply.status


@pytest.fixture(autouse=True)
def no_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count wrong passwords against the auth policy's lockout: the throttle on guessing, which refuses
    a sixth wrong password in a row for a while (tests/web/test_guessing.py), would stop them first."""
    monkeypatch.setattr(GuessThrottles, "check_password", lambda self, username, address: None)


async def _user_under(admin: Api, name: str, max_attempts: int, minutes: int) -> tuple[str, Api]:
    policy_id = await admin.create("/auth-policies", _policy(max_attempts, minutes))
    return await make_user(admin, name, authPolicyId=policy_id)


async def _detail(admin: Api, identity_id: str) -> dict[str, Any]:
    return dict((await admin.get(f"/identities/{identity_id}")).data)


@pytest.fixture
async def timed(tmp_path: Path, nursery: trio.Nursery) -> Api:
    """An admin client of a controller on a known wall clock; the tests using it run on Trio's virtual clock (they
    request ``autojump_clock`` themselves: pytest-trio takes the clock only from the test's own arguments)."""
    controller = await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=WALL))
    return await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)


async def test_the_attempt_after_max_attempts_locks_for_the_duration(timed: Api,
                                                                   autojump_clock: trio.testing.MockClock) -> None:
    admin = timed
    identity_id, session = await _user_under(admin, "lena", max_attempts=3, minutes=10)
    start = trio.current_time()
    for _ in range(3):
        assert await _login(admin, "lena", "wrong-password") == 401
    assert (await _detail(admin, identity_id))["disabled"] is False
    assert (await session.get("/current-identity")).status == 200

    await trio.sleep(5)
    before = format_time(WALL + trio.current_time() - start)
    assert await _login(admin, "lena", "wrong-password", client=True) == 401  # the fourth, on the Client API
    detail = await _detail(admin, identity_id)
    assert detail["disabled"] is True
    assert detail["disabledAt"] >= before
    locked_at = parse_time(detail["disabledAt"])
    assert detail["disabledUntil"] == format_time(locked_at + 600)
    assert detail["hasApiSession"] is False
    assert (await session.get("/current-identity")).status == 401  # its API sessions ended with the lockout

    await trio.sleep_until(start + locked_at - WALL + 599)
    assert await _login(admin, "lena") == 401  # the right password too, while locked
    await trio.sleep_until(start + locked_at - WALL + 600)
    assert await _login(admin, "lena") == 200


async def test_a_successful_login_starts_the_count_again(timed: Api, autojump_clock: trio.testing.MockClock) -> None:
    admin = timed
    identity_id, _ = await _user_under(admin, "omarr", max_attempts=2, minutes=5)
    for _ in range(5):
        assert await _login(admin, "omarr", "wrong-password") == 401
        assert await _login(admin, "omarr", "wrong-password") == 401
        assert await _login(admin, "omarr") == 200
    assert (await _detail(admin, identity_id))["disabled"] is False
    assert await _login(admin, "omarr", "wrong-password") == 401
    assert await _login(admin, "omarr", "wrong-password") == 401
    assert await _login(admin, "omarr", "wrong-password") == 401
    assert (await _detail(admin, identity_id))["disabled"] is True


@pytest.mark.parametrize("minutes", [0, -5])
async def test_zero_duration_locks_until_enabled_and_enabling_gives_fresh_attempts(
        timed: Api, minutes: int, autojump_clock: trio.testing.MockClock) -> None:
    admin = timed
    identity_id, _ = await _user_under(admin, "piaf", max_attempts=1, minutes=minutes)
    assert await _login(admin, "piaf", "wrong-password") == 401
    assert await _login(admin, "piaf", "wrong-password") == 401
    detail = await _detail(admin, identity_id)
    assert detail["disabled"] is True and detail["disabledUntil"] is None

    await trio.sleep(10 * 365 * 86400)
    admin = await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)  # the admin's own session expired meanwhile
    assert await _login(admin, "piaf") == 401
    # Wrong passwords while locked neither lift nor move the lockout.
    assert await _login(admin, "piaf", "wrong-password") == 401
    assert await _login(admin, "piaf", "wrong-password") == 401
    assert (await _detail(admin, identity_id))["disabledAt"] == detail["disabledAt"]

    assert (await admin.post(f"/identities/{identity_id}/enable")).status == 200
    assert await _login(admin, "piaf", "wrong-password") == 401  # one fresh attempt within the limit
    assert await _login(admin, "piaf") == 200


@pytest.mark.parametrize("max_attempts", [0, -1])
async def test_no_limit_never_locks(admin: Api, max_attempts: int) -> None:
    identity_id, _ = await _user_under(admin, "quinn", max_attempts=max_attempts, minutes=10)
    for _ in range(12):
        assert await _login(admin, "quinn", "wrong-password") == 401
    assert (await _detail(admin, identity_id))["disabled"] is False
    assert await _login(admin, "quinn") == 200


async def test_the_default_admin_is_never_locked_out(admin: Api) -> None:
    # Every identity without a policy of its own, the default admin included, falls under "default".
    updated = _policy(1, 0) | {"name": "Default"}
    assert (await admin.put("/auth-policies/default", updated)).status == 200
    identity_id, _ = await make_user(admin, "rosa")
    for _ in range(4):
        assert await _login(admin, ADMIN_USERNAME, "wrong-password") == 401
    assert await _login(admin, ADMIN_USERNAME, ADMIN_PASSWORD) == 200
    # The same policy does lock an ordinary identity.
    assert await _login(admin, "rosa", "wrong-password") == 401
    assert await _login(admin, "rosa", "wrong-password") == 401
    assert (await _detail(admin, identity_id))["disabled"] is True


async def test_unknown_usernames_are_not_counted(admin: Api) -> None:
    controller = admin.controller
    assert controller is not None
    for n in range(20):
        assert await _login(admin, f"nobody-{n}", "wrong-password") == 401
    assert controller.sessions.failed_logins.count("nobody-0") == 0
    identity_id, _ = await make_user(admin, "sven")
    assert (await _detail(admin, identity_id))["disabled"] is False


def test_lockout_rules() -> None:
    policy = _policy(3, 15)
    assert [lockout_minutes(policy, n) for n in (1, 2, 3, 4, 9)] == [None, None, None, 15, 15]
    assert lockout_minutes(_policy(3, -1), 4) == 0
    assert lockout_minutes(_policy(0, 15), 100) is None
    assert lockout_minutes(None, 100) is None
    assert lockout_minutes({"primary": {}}, 100) is None
    failures = FailedLogins()
    assert [failures.failed("a"), failures.failed("a"), failures.failed("b")] == [1, 2, 1]
    failures.clear("a")
    assert (failures.count("a"), failures.count("b"), failures.failed("a")) == (0, 1, 1)


async def test_an_identity_deleted_during_the_failing_login_still_gets_401(admin: Api,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    controller = admin.controller
    assert controller is not None
    identity_id, _ = await _user_under(admin, "tomas", max_attempts=1, minutes=5)
    assert await _login(admin, "tomas", "wrong-password") == 401
    verify = controller.hashing.verify

    async def deleting_verify(password: str, stored: str | None) -> bool:
        # The identity goes while its password is being checked: the lockout finds nothing to disable.
        assert (await admin.delete(f"/identities/{identity_id}")).status == 200
        return await verify(password, stored)

    monkeypatch.setattr(controller.hashing, "verify", deleting_verify)
    assert await _login(admin, "tomas", "wrong-password") == 401
    assert (await admin.get(f"/identities/{identity_id}")).status == 404
