"""Request limits and the request boundary: body size, bounded password hashing, no internals in answers,
``ziti-instance-id`` everywhere, and one log line per request with no secret in it."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from controller.authentication import password_hashing as passwords
from controller.runtime.composition import Controller
from controller.runtime.logs import JsonFormatter
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, MGMT, Api, make_settings, make_user, start_controller
from web.app import create_app

LIMIT = 1024


async def _stack(tmp_path: Path, nursery: trio.Nursery, **overrides: Any) -> tuple[Controller, Api]:
    controller = await start_controller(make_settings(tmp_path, **overrides), nursery)
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    return controller, admin


def _identity_body(size: int) -> bytes:
    """A valid identity create body of exactly ``size`` bytes."""
    base = {"name": "padded", "type": "User", "isAdmin": False, "tags": {"pad": ""}}
    overhead = len(msgspec.json.encode(base))
    base["tags"] = {"pad": "x" * (size - overhead)}
    body = msgspec.json.encode(base)
    assert len(body) == size
    return body


def _assert_too_large(status: int, body: Any) -> None:
    assert status == 413
    assert body["error"]["code"] == "REQUEST_TOO_LARGE"
    assert body["error"]["message"] == "The request body exceeds the size limit"
    assert body["error"]["requestId"]


async def _identity_names(admin: Api) -> list[str]:
    return sorted(i["name"] for i in (await admin.get("/identities", query={"limit": "-1"})).data)


async def test_a_body_over_the_limit_is_refused_and_changes_nothing(tmp_path: Path, nursery: trio.Nursery) -> None:
    controller, admin = await _stack(tmp_path, nursery, max_body_bytes=LIMIT)
    before = await _identity_names(admin)
    headers = {"Content-Type": "application/json"}

    at_limit = await admin.post("/identities", raw=_identity_body(LIMIT), headers=headers)
    assert at_limit.status == 201
    await admin.delete(f"/identities/{at_limit.data['id']}")

    over = await admin.post("/identities", raw=_identity_body(LIMIT + 1), headers=headers)
    _assert_too_large(over.status, over.body)
    assert over.headers["ziti-instance-id"] == controller.instance_id
    assert await _identity_names(admin) == before


async def test_the_size_check_comes_before_authentication(tmp_path: Path, nursery: trio.Nursery) -> None:
    _, admin = await _stack(tmp_path, nursery, max_body_bytes=LIMIT)
    reply = await admin.with_token(None).post("/authenticate", raw=b" " * (LIMIT + 1),
                                              query={"method": "password"})
    _assert_too_large(reply.status, reply.body)
    assert "zt-session" not in reply.headers


async def _chunked(app: Any, method: str, path: str, token: str, chunks: list[bytes]) -> tuple[int, Any]:
    """Send a body in chunks with no Content-Length, as a chunked HTTP/1.1 upload arrives."""
    client = app.test_client()
    async with client.request(MGMT + path, method=method,
                              headers={"zt-session": token, "Content-Type": "application/json"}) as connection:
        for chunk in chunks:
            await connection.send(chunk)
        await connection.send_complete()
    response = await connection.as_response()
    return response.status_code, msgspec.json.decode(await response.get_data())


async def test_chunked_bodies_over_the_limit_are_refused(tmp_path: Path, nursery: trio.Nursery) -> None:
    _, admin = await _stack(tmp_path, nursery, max_body_bytes=LIMIT)
    before = await _identity_names(admin)
    assert admin.token is not None
    body = _identity_body(LIMIT + 1)

    status, answer = await _chunked(admin.app, "POST", "/identities", admin.token, [body[:600], body[600:]])
    _assert_too_large(status, answer)
    assert await _identity_names(admin) == before

    # Refused even where the handler never reads a body: logging out with a huge upload does not log out.
    status, answer = await _chunked(admin.app, "DELETE", "/current-api-session", admin.token, [b" " * 700] * 2)
    _assert_too_large(status, answer)
    assert (await admin.get("/current-api-session")).status == 200

    fits = _identity_body(LIMIT)
    status, answer = await _chunked(admin.app, "POST", "/identities", admin.token, [fits[:600], fits[600:]])
    assert status == 201, answer
    assert answer["data"]["name"] == "padded"


async def test_password_hashing_runs_with_bounded_concurrency(tmp_path: Path, nursery: trio.Nursery) -> None:
    # Real worker threads: the bound only matters when verifications run in parallel.
    controller, admin = await _stack(tmp_path, nursery, worker_threads=True, max_concurrent_hashes=2)
    statuses: list[int] = []

    async def login(index: int) -> None:
        password = ADMIN_PASSWORD if index % 2 == 0 else "wrong-password"
        reply = await admin.with_token(None).post("/authenticate", {"username": ADMIN_USERNAME,
                                                                    "password": password},
                                                  query={"method": "password"})
        statuses.append(reply.status)

    async with trio.open_nursery() as logins:
        for index in range(10):
            logins.start_soon(login, index)

    assert sorted(statuses) == [200] * 5 + [401] * 5
    stats = controller.hashing.statistics()
    assert stats.max_concurrent == 2
    assert stats.peak == 2  # the ten logins did queue: two ran at once, never more
    assert (stats.running, stats.waiting, stats.refused) == (0, 0, 0)


async def test_a_password_an_admin_sets_is_hashed_off_the_event_loop(tmp_path: Path, nursery: trio.Nursery,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating or replacing an updb authenticator hashes its password in a worker thread, through the same bounded
    queue as logins: an admin's request never stalls every other request for a hash's duration."""
    controller, admin = await _stack(tmp_path, nursery, worker_threads=True, max_concurrent_hashes=1)
    threads: list[str] = []
    real = passwords.hash_password

    def recorded(password: str) -> str:
        threads.append(threading.current_thread().name)
        return real(password)

    monkeypatch.setattr(passwords, "hash_password", recorded)
    identity_id = await admin.create("/identities", {"name": "u", "type": "User", "isAdmin": False})
    authenticator = await admin.create("/authenticators", {"method": "updb", "identityId": identity_id,
                                                           "username": "user-u", "password": "first-password"})
    assert (await admin.put(f"/authenticators/{authenticator}", {"username": "user-u", "password": "second-password"})
            ).status == 200
    assert len(threads) == 2 and threading.main_thread().name not in threads
    assert controller.hashing.statistics().peak == 1
    login = await admin.with_token(None).post("/authenticate", {"username": "user-u", "password": "second-password"},
                                              query={"method": "password"})
    assert login.status == 200


async def test_unexpected_exceptions_become_500_without_internals(anon: Api, controller: Controller,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    async def explode() -> Any:
        raise RuntimeError("secret internal detail in /srv/tollgate/controller.py")

    anon.app.add_url_rule(MGMT + "/explode", "explode", explode, methods=["GET"])

    with caplog.at_level(logging.ERROR, logger="tollgate"):
        reply = await anon.get("/explode")

    assert reply.status == 500
    assert reply.body["error"]["code"] == "UNHANDLED"
    assert reply.body["error"]["message"] == "An unhandled error occurred"
    assert set(reply.body["error"]) == {"code", "message", "requestId"}
    assert reply.body["meta"] == {"apiVersion": "0.0.1", "apiEnrollmentVersion": "0.0.1"}
    for secret in (b"secret", b"Traceback", b"RuntimeError", b".py"):
        assert secret not in reply.raw
    assert reply.headers["ziti-instance-id"] == controller.instance_id
    # The operator still gets the traceback, in the log.
    assert any(r.exc_info and "secret internal detail" in str(r.exc_info[1]) for r in caplog.records)


async def test_every_answer_carries_the_instance_id(admin: Api, controller: Controller) -> None:
    replies = [
        await admin.get("/identities"),  # 200
        await admin.post("/identities", {"name": ""}),  # 400
        await admin.with_token(None).get("/identities"),  # 401
        await admin.get("/no-such-route"),  # 404
        await admin.request("PATCH", "/version"),  # 405
        await admin.get("/version", base=""),  # root
    ]
    assert [r.status for r in replies] == [200, 400, 401, 404, 405, 200]
    for reply in replies:
        assert reply.headers["ziti-instance-id"] == controller.instance_id


async def test_one_log_line_per_request_and_no_secret_in_any(anon: Api, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        _, user = await make_user(admin, "loggy", password="loggy-secret-pw")
        await user.get("/current-identity", query={"filter": 'name = "x"'})
        await anon.with_token(None).post("/authenticate", {"username": "loggy", "password": "wrong-secret-pw"},
                                         query={"method": "password"})
        await admin.get("/identities", headers={"mfa-validation-code": "123456"})

    secrets = {ADMIN_PASSWORD, "loggy-secret-pw", "wrong-secret-pw", str(admin.token), str(user.token)}
    for record in caplog.records:
        rendered = record.getMessage() + " " + " ".join(repr(v) for v in record.__dict__.values())
        for secret in secrets:
            assert secret not in rendered, (record.name, rendered)

    access = [r for r in caplog.records if r.name == "tollgate.access"]
    # login, create identity, create authenticator, login (make_user), current-identity, failed login, list
    assert [(r.__dict__["method"], r.__dict__["path"], r.__dict__["status"]) for r in access] == [
        ("POST", f"{MGMT}/authenticate", 200),
        ("POST", f"{MGMT}/identities", 201),
        ("POST", f"{MGMT}/authenticators", 201),
        ("POST", f"{MGMT}/authenticate", 200),
        ("GET", f"{MGMT}/current-identity", 200),
        ("POST", f"{MGMT}/authenticate", 401),
        ("GET", f"{MGMT}/identities", 200),
    ]
    for record in access:
        line = json.loads(JsonFormatter().format(record))
        assert line["event"] == "request"
        assert line["duration_ms"] >= 0
        assert len(line["requestId"]) == 12


@pytest.fixture(autouse=True)
def real_password_cost() -> Iterator[None]:
    """These tests measure the production hashing cost, not the suite's cheap one."""
    previous = passwords.use_params(passwords.DEFAULT_PARAMS)
    yield
    passwords.use_params(previous)
