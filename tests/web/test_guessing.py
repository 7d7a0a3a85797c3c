"""Guessing is slow: wrong passwords are throttled per username and per address, wrong MFA codes per identity, a run
of wrong MFA codes locks the identity out, a TOTP code works once, and a session owing its code does not live longer
for trying. All on Trio's virtual clock, with the instants exact."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from controller.authentication.api_sessions import PARTIAL_SECONDS
from controller.authentication.throttle import MFA_LOCKOUT_FAILURES, MFA_LOCKOUT_MINUTES
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_user, totp
from tests.web.test_mfa import enrol, wrong


async def _login(anon: Api, username: str, password: str) -> tuple[int, str | None]:
    reply = await anon.post("/authenticate", {"username": username, "password": password},
                            query={"method": "password"})
    return reply.status, reply.headers.get("Retry-After")


async def test_wrong_passwords_are_throttled_per_username(admin: Api, anon: Api,
                                                          autojump_clock: MockClock) -> None:
    await make_user(admin, "guessed", "the-password")
    for _ in range(5):
        assert (await _login(anon, "guessed", "not-it"))[0] == 401
    # The sixth try is refused before any hashing, right password or not, until a try has been earned back.
    assert await _login(anon, "guessed", "the-password") == (429, "12")
    reply = await anon.post("/authenticate", {"username": "guessed", "password": "x-guess"},
                            query={"method": "password"})
    assert (reply.status, reply.error["code"]) == (429, "RATE_LIMITED")
    await trio.sleep(11.9)
    assert (await _login(anon, "guessed", "the-password"))[0] == 429
    await trio.sleep(0.1)
    assert (await _login(anon, "guessed", "the-password"))[0] == 200
    # Right passwords take nothing: the admin logs in as often as it likes.
    for _ in range(10):
        assert (await _login(anon, ADMIN_USERNAME, ADMIN_PASSWORD))[0] == 200


async def test_the_default_admin_is_throttled_too(anon: Api, autojump_clock: MockClock) -> None:
    for _ in range(5):
        assert (await _login(anon, ADMIN_USERNAME, "wrong-password"))[0] == 401
    assert (await _login(anon, ADMIN_USERNAME, ADMIN_PASSWORD))[0] == 429


async def test_unknown_usernames_count_like_known_ones(anon: Api, autojump_clock: MockClock) -> None:
    for _ in range(5):
        assert (await _login(anon, "nobody-here", "whatever"))[0] == 401
    assert (await _login(anon, "nobody-here", "whatever"))[0] == 429


async def test_mfa_codes_are_throttled_and_a_run_of_wrong_ones_locks_out(
        admin: Api, controller: Controller, autojump_clock: MockClock) -> None:
    identity_id, user = await make_user(admin, "mfa-guessed", "the-password")
    secret, _ = await enrol(user, controller)
    await trio.sleep(30)  # past the step enrolment used
    session = await _fresh_partial_of(admin, "mfa-guessed")
    failures = 0
    for _ in range(5):
        reply = await session.post("/authenticate/mfa", {"code": wrong(controller, secret)})
        assert reply.error["code"] == "MFA_INVALID_TOKEN"
        failures += 1
    throttled = await session.post("/authenticate/mfa", {"code": totp(controller, secret)})
    assert (throttled.status, throttled.headers["Retry-After"]) == (429, "30")
    # Wrong codes keep coming, one per earned try, until the lockout disables the identity.
    while failures < MFA_LOCKOUT_FAILURES:
        await trio.sleep(30)
        session = await _fresh_partial_of(admin, "mfa-guessed")
        reply = await session.post("/authenticate/mfa", {"code": wrong(controller, secret)})
        assert reply.error["code"] == "MFA_INVALID_TOKEN"
        failures += 1
    identity = (await admin.get(f"/identities/{identity_id}")).data
    assert identity["disabled"] is True
    assert (await admin.with_token(None).post("/authenticate", {"username": "mfa-guessed", "password":
                                                                "the-password"},
                                              query={"method": "password"})).status == 401
    await trio.sleep(MFA_LOCKOUT_MINUTES * 60)
    assert (await admin.get(f"/identities/{identity_id}")).data["disabled"] is False


async def test_a_totp_code_works_once(admin: Api, controller: Controller, autojump_clock: MockClock) -> None:
    _, user = await make_user(admin, "replayed", "the-password")
    secret, _ = await enrol(user, controller)
    await trio.sleep(30)
    first = await _fresh_partial_of(admin, "replayed")
    code = totp(controller, secret)
    assert (await first.post("/authenticate/mfa", {"code": code})).status == 200
    second = await _fresh_partial_of(admin, "replayed")
    replay = await second.post("/authenticate/mfa", {"code": code})
    assert (replay.status, replay.error["code"]) == (400, "MFA_INVALID_TOKEN")
    # The next step's code works (one step ahead is accepted), and then that one is spent too.
    ahead = totp(controller, secret, 1)
    assert (await second.post("/authenticate/mfa", {"code": ahead})).status == 200
    two_ahead = totp(controller, secret, 2)
    third = await _fresh_partial_of(admin, "replayed")
    assert (await third.post("/authenticate/mfa", {"code": two_ahead})).status == 400


async def _fresh_partial_of(admin: Api, name: str) -> Api:
    login = await admin.with_token(None).post("/authenticate", {"username": name, "password": "the-password"},
                                              query={"method": "password"})
    assert login.status == 200, login.body
    return admin.with_token(login.data["token"])


async def test_a_partial_session_lives_five_minutes_from_login(admin: Api, controller: Controller,
                                                               autojump_clock: MockClock) -> None:
    _, user = await make_user(admin, "slow-coder", "the-password")
    secret, _ = await enrol(user, controller)
    await trio.sleep(30)
    session = await _fresh_partial_of(admin, "slow-coder")
    started = trio.current_time()
    # Using it (its own detail is open to it) does not extend it.
    while trio.current_time() < started + PARTIAL_SECONDS - 60:
        assert (await session.get("/current-api-session")).status == 200
        await trio.sleep(60)
    await trio.sleep_until(started + PARTIAL_SECONDS)
    assert (await session.get("/current-api-session")).status == 401
    # Given its code in time, a session lives the full timeout from its last use.
    other = await _fresh_partial_of(admin, "slow-coder")
    await trio.sleep(60)
    assert (await other.post("/authenticate/mfa", {"code": totp(controller, secret)})).status == 200
    await trio.sleep(PARTIAL_SECONDS)
    assert (await other.get("/current-identity")).status == 200
