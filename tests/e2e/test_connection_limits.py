"""Connection limits on a real socket: ``serve_controller`` over plain HTTP on 127.0.0.1, with the settings the
command line makes of ``--max-connections`` and ``--read-timeout``, driven by raw TCP streams speaking HTTP/1.1
through h11.

``--max-connections``: a connection beyond the limit is closed as soon as it is accepted, whatever the held ones do
(idle ones included); a closed one frees its place, a refused one takes none.

``--read-timeout`` bounds the time the server waits for the client: a connection whose request head is not complete,
or that is idle between keep-alive requests, is closed after it; a request body must have arrived within it once
the controller starts reading it, else the answer is 408 REQUEST_TIMEOUT. A request the controller itself takes
longer than the timeout to answer is answered.

These tests run on the real clock, since the sockets are real; every wait is bounded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import h11
import pytest
import trio
import trio.testing

from controller.authentication.hashing import PasswordHashing
from controller.cli import parse_settings
from tests.support import read_http_response, seed_pki
from tests.support import serving as serving_controller

VERSION = "/edge/management/v1/version"
AUTHENTICATE = "/edge/management/v1/authenticate?method=password"
ADMIN_PASSWORD = "limits-admin-password"
MAX_CONNECTIONS = 4
READ_TIMEOUT = 1
# An upper bound on a loopback answer, even on a loaded machine: long enough that only a connection left deaf (or a
# server that waits for the 30 s default read timeout) exceeds it; where a test sets a short read timeout, PROMPTLY
# is added to it as slack, never used to tell the two apart.
PROMPTLY = 10.0


@dataclass
class Server:
    """The port a running controller listens on, and the client connections a test opened to it."""

    port: int
    streams: list[trio.SocketStream] = field(default_factory=list)

    async def connect(self) -> trio.SocketStream:
        """A new connection, once the server has taken it: accepted, and its handler waiting for the request (or
        already done with it, for a connection refused). It is closed when the server stops, if not before."""
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        self.streams.append(stream)
        await trio.testing.wait_all_tasks_blocked(cushion=0.01)
        return stream


@asynccontextmanager
async def serving(data_dir: Path, *flags: str) -> AsyncIterator[Server]:
    """Run ``serve_controller`` with the settings ``tollgate serve --no-tls --port 0 FLAGS`` makes (in-process
    commits and no fsync, for speed) until the block ends; yields it."""
    seed_pki(data_dir)
    settings, _ = parse_settings(["serve", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--port", "0",
                                  "--no-tls", *flags], environ={"TOLLGATE_ADMIN_PASSWORD": ADMIN_PASSWORD})
    settings = replace(settings, worker_threads=False, durable=False)
    with trio.fail_after(60):  # a server that hangs fails the test instead of hanging it
        async with serving_controller(settings) as (_, urls):
            port = urlsplit(urls[0]).port
            assert port is not None
            server = Server(port)
            try:
                yield server
            finally:
                for stream in server.streams:
                    stream.socket.close()  # no checkpoint: closes them all even when the test is being cancelled


def _request_bytes(connection: h11.Connection) -> bytes:
    request = h11.Request(method="GET", target=VERSION, headers=[("Host", "127.0.0.1")])
    return connection.send(request) + connection.send(h11.EndOfMessage())


async def read_response(stream: trio.SocketStream, connection: h11.Connection) -> int:
    """Read one whole response from ``stream`` and return its status."""
    with trio.fail_after(PROMPTLY):
        status, _ = await read_http_response(stream, connection)
    return status


async def get_version(stream: trio.SocketStream) -> int:
    """One ``GET /version`` on ``stream`` (kept alive afterwards); the response status."""
    connection = h11.Connection(h11.CLIENT)
    await stream.send_all(_request_bytes(connection))
    return await read_response(stream, connection)


async def closed_by_server(stream: trio.SocketStream) -> bytes:
    """Everything the server sends before it closes ``stream`` (end of file, or a reset, which ends it too)."""
    received = b""
    try:
        while chunk := await stream.receive_some():
            received += chunk
    except trio.BrokenResourceError:
        pass
    return received


async def test_connections_beyond_the_limit_are_closed_at_once(tmp_path: Path) -> None:
    async with serving(tmp_path, "--max-connections", str(MAX_CONNECTIONS)) as server:
        held = [await server.connect() for _ in range(MAX_CONNECTIONS)]  # idle: nothing sent yet

        one_too_many = await server.connect()
        with trio.fail_after(PROMPTLY):  # not after the 30 s read timeout: at once
            assert await closed_by_server(one_too_many) == b""

        for stream in held:
            assert await get_version(stream) == 200  # the held connections are served, and stay open

        await held.pop().aclose()  # its place is free once the server has seen it close
        await trio.testing.wait_all_tasks_blocked(cushion=0.01)
        newcomer = await server.connect()
        assert await get_version(newcomer) == 200
        held.append(newcomer)

        # The limit is whole again: refusals took no place, and the next one beyond it is refused too.
        another = await server.connect()
        with trio.fail_after(PROMPTLY):
            assert await closed_by_server(another) == b""
        assert await get_version(held[0]) == 200


def _login_request() -> tuple[h11.Connection, bytes, bytes]:
    """The admin's password login, a request with a body that the app reads: the client side of its connection,
    the bytes of its head and those of its body."""
    body = json.dumps({"username": "admin", "password": ADMIN_PASSWORD}).encode()
    connection = h11.Connection(h11.CLIENT)
    head = connection.send(h11.Request(method="POST", target=AUTHENTICATE, headers=[
        ("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]))
    return connection, head, connection.send(h11.Data(data=body)) + connection.send(h11.EndOfMessage())


async def test_a_request_body_that_stalls_is_answered_408_after_the_read_timeout(tmp_path: Path) -> None:
    async with serving(tmp_path, "--read-timeout", str(READ_TIMEOUT)) as server:

        async def stalled_body() -> None:
            connection, head, body = _login_request()
            async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
                await stream.send_all(head + body[:10])  # then silence
                stalled = trio.current_time()
                with trio.fail_after(READ_TIMEOUT + PROMPTLY):
                    answer = await closed_by_server(stream)
                assert trio.current_time() - stalled >= READ_TIMEOUT
                connection.receive_data(answer)
                response = connection.next_event()
                assert isinstance(response, h11.Response) and response.status_code == 408
                data = connection.next_event()
                assert isinstance(data, h11.Data)
                assert json.loads(data.data)["error"]["code"] == "REQUEST_TIMEOUT"

        async def slow_body_in_time() -> None:
            # In three pieces, the last well within the read timeout: it is served.
            connection, head, body = _login_request()
            async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
                await stream.send_all(head)
                size = -(-len(body) // 3)
                for start in range(0, len(body), size):
                    await trio.sleep(READ_TIMEOUT / 5)
                    await stream.send_all(body[start:start + size])
                assert await read_response(stream, connection) == 200

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stalled_body)
            nursery.start_soon(slow_body_in_time)


async def test_a_slow_answer_is_not_cut_by_the_read_timeout(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The client is silent while the controller works on its request: that is not the client's silence."""
    verify = PasswordHashing.verify

    async def slow_verify(self: PasswordHashing, password: str, stored: str | None) -> bool:
        await trio.sleep(READ_TIMEOUT * 1.5)
        return await verify(self, password, stored)

    monkeypatch.setattr(PasswordHashing, "verify", slow_verify)
    async with serving(tmp_path, "--read-timeout", str(READ_TIMEOUT)) as server:
        connection, head, body = _login_request()
        async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
            await stream.send_all(head + body)
            with trio.fail_after(READ_TIMEOUT * 1.5 + PROMPTLY):
                status = 0
                while not status:
                    connection.receive_data(await stream.receive_some())
                    while (event := connection.next_event()) is not h11.NEED_DATA:
                        if isinstance(event, h11.Response):
                            status = event.status_code
            assert status == 200


async def test_silence_outside_a_request_closes_the_connection_after_the_read_timeout(tmp_path: Path) -> None:
    """A request head cut short, and a keep-alive connection idle after its answer: both are closed once silent for
    the read timeout, and their places under ``--max-connections`` are free again."""
    async with serving(tmp_path, "--read-timeout", str(READ_TIMEOUT), "--max-connections", "2") as server:
        connection = h11.Connection(h11.CLIENT)
        request = _request_bytes(connection)
        # Each connection's silence starts, for the server, at some instant after the one noted here (its accept,
        # its answer's last byte): the read timeout is counted from a time no earlier than this.
        cut_short_silent_from = trio.current_time()
        cut_short = await server.connect()
        await cut_short.send_all(request[:20])  # the request line, cut short
        idle = await server.connect()
        idle_silent_from = trio.current_time()
        assert await get_version(idle) == 200

        async def closed(stream: trio.SocketStream, silent_from: float) -> None:
            with trio.fail_after(READ_TIMEOUT + PROMPTLY):
                assert await closed_by_server(stream) == b""
            assert trio.current_time() - silent_from >= READ_TIMEOUT * 0.9

        async with trio.open_nursery() as nursery:
            nursery.start_soon(closed, cut_short, cut_short_silent_from)
            nursery.start_soon(closed, idle, idle_silent_from)
        await trio.testing.wait_all_tasks_blocked(cushion=0.01)
        for _ in range(2):
            assert await get_version(await server.connect()) == 200


async def test_a_connection_answered_before_its_body_was_read_never_hangs(tmp_path: Path) -> None:
    """An answer given before the app read the request's body (401 for a missing session here) ends that request
    cleanly: the connection either serves the next request or is closed, never left open and deaf (found by
    ``make fuzz``). Which of the two happens depends on how much of the body had arrived when the answer went out
    (a small body arrives with the head; a large one may or may not have been read by then), so both are accepted,
    for a small body and a large one alike."""
    async with serving(tmp_path) as server:
        for pad in (0, 300_000):
            body = json.dumps({"name": "never-created", "type": "User", "isAdmin": False,
                               "tags": {"pad": "x" * pad}}).encode()
            stream = await server.connect()
            for _ in range(5):
                connection = h11.Connection(h11.CLIENT)
                try:
                    await stream.send_all(
                        connection.send(h11.Request(method="POST", target="/edge/management/v1/identities", headers=[
                            ("Host", "127.0.0.1"), ("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))]))
                        + connection.send(h11.Data(data=body)) + connection.send(h11.EndOfMessage()))
                except trio.BrokenResourceError:
                    break  # closed while the body was sent, after its answer: the client knows at once
                assert await read_response(stream, connection) == 401
                next_one = h11.Connection(h11.CLIENT)
                try:
                    await stream.send_all(_request_bytes(next_one))
                except trio.BrokenResourceError:
                    break  # closed already: the client knows at once
                with trio.fail_after(PROMPTLY):  # deaf: neither an answer nor the end of the connection
                    received = await stream.receive_some()
                if not received:
                    break  # closed
                next_one.receive_data(received)
                assert await read_response(stream, next_one) == 200
            await stream.aclose()
