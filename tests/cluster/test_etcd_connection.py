"""The etcd client's HTTP/1.1 connections against a scripted server on a real loopback socket: the two ways an answer
is framed, keep-alive reuse, a member that closes an idle connection, and how far a broken call got."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import pytest
import trio

from controller.etcd.connection import CallBroken, ConnectFailed, ConnectionPool

Script = Callable[[bytes], bytes | None]  # a request's raw bytes -> what to send back (None: close the connection)


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> bytes | None:
    """One whole request (head and a Content-Length body), or None at the end of the connection."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    length = next(int(line.split(b":")[1]) for line in bytes(buffer[:end]).split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    while len(buffer) < end + length:
        buffer += await stream.receive_some(65536)
    request = bytes(buffer[:end + length])
    del buffer[:end + length]
    return request


@asynccontextmanager
async def _server(script: Script) -> AsyncIterator[tuple[int, list[int]]]:
    """A server answering each request by ``script``; yields its port and the number of requests per connection."""
    connections: list[int] = []

    async def handle(stream: trio.SocketStream) -> None:
        index = len(connections)
        connections.append(0)
        buffer = bytearray()
        async with stream:
            while (request := await _read_request(stream, buffer)) is not None:
                connections[index] += 1
                answer = script(request)
                if answer is None:
                    return
                await stream.send_all(answer)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1], connections
        nursery.cancel_scope.cancel()


def _pool() -> ConnectionPool:
    return ConnectionPool(ssl_context=None, connect_timeout=1.0, max_connections=4)


def _sized(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def test_answers_of_known_length_reuse_one_connection() -> None:
    seen: list[bytes] = []

    def script(request: bytes) -> bytes:
        seen.append(request)
        return _sized(b'{"n":%d}' % len(seen))

    async with _server(script) as (port, connections):
        pool = _pool()
        first = await pool.call("http", "127.0.0.1", port, "/v3/kv/range", b'{"key":"a"}', {"X-Extra": "1"})
        second = await pool.call("http", "127.0.0.1", port, "/v3/kv/range", b"{}", {})
        await pool.aclose()
    assert (first, second) == ((200, b'{"n":1}'), (200, b'{"n":2}'))
    assert connections == [2]
    head, _, body = seen[0].partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"POST /v3/kv/range HTTP/1.1"
    assert b"X-Extra: 1" in head and b"Content-Length: 11" in head and body == b'{"key":"a"}'


async def test_a_chunked_answer_is_read_whole_with_extensions_and_trailers() -> None:
    answer = (b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")
    async with _server(lambda _: answer) as (port, connections):
        pool = _pool()
        assert await pool.call("http", "127.0.0.1", port, "/", b"", {}) == (503, b"hello world")
        assert await pool.call("http", "127.0.0.1", port, "/", b"", {}) == (503, b"hello world")
        await pool.aclose()
    assert connections == [2]


async def test_connection_close_and_idle_closes_by_the_member_open_a_new_connection() -> None:
    calls = 0

    def script(_: bytes) -> bytes | None:
        nonlocal calls
        calls += 1
        return _sized(b"x", b"Connection: close\r\n") if calls == 1 else _sized(b"y")

    async with _server(script) as (port, connections):
        pool = _pool()
        assert await pool.call("http", "127.0.0.1", port, "/", b"", {}) == (200, b"x")
        assert await pool.call("http", "127.0.0.1", port, "/", b"", {}) == (200, b"y")
        await pool.aclose()
    assert connections == [1, 1]


async def test_a_connection_the_member_closed_while_idle_is_not_used_again() -> None:
    accepted = 0
    closed = trio.Event()

    async with trio.open_nursery() as nursery:
        async def handle(stream: trio.SocketStream) -> None:
            nonlocal accepted
            accepted += 1
            await _read_request(stream, bytearray())
            await stream.send_all(_sized(b"ok"))
            await stream.aclose()  # idle, then gone (on loopback the FIN is at the client once close returns)
            closed.set()

        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        pool = _pool()
        try:
            assert await pool.call("http", "127.0.0.1", port, "/", b"", {}) == (200, b"ok")
            await closed.wait()
            # The closed connection is seen at rest and dropped: the call goes out on a new one, not into a dead one.
            assert await pool.call("http", "127.0.0.1", port, "/", b"", {}) == (200, b"ok")
            assert accepted == 2
        finally:
            await pool.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("answer", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b"SSH-2.0-x\r\n\r\n",
                                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
async def test_a_call_cut_short_or_answered_with_something_else_is_broken(answer: bytes) -> None:
    async with trio.open_nursery() as nursery:
        async def handle(stream: trio.SocketStream) -> None:
            await _read_request(stream, bytearray())
            await stream.send_all(answer)
            await stream.aclose()  # whatever was left unsaid stays unsaid

        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        pool = _pool()
        with pytest.raises(CallBroken):
            await pool.call("http", "127.0.0.1", listeners[0].socket.getsockname()[1], "/", b"", {})
        await pool.aclose()
        nursery.cancel_scope.cancel()


async def test_nothing_listening_is_a_failed_connect() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # bound once, now free: nothing listens there
    pool = _pool()
    with pytest.raises(ConnectFailed):
        await pool.call("http", "127.0.0.1", port, "/", b"", {})
    await pool.aclose()


async def test_a_cancelled_close_still_closes_every_idle_connection() -> None:
    """Closing the pool from a cancelled task (a node's task tree torn down) closes every idle connection, not
    only the first: each server connection sees its end."""
    arrived = ended = 0
    all_in, all_ended = trio.Event(), trio.Event()

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal arrived, ended
        buffer = bytearray()
        async with stream:
            assert await _read_request(stream, buffer) is not None
            arrived += 1
            if arrived == 3:
                all_in.set()
            await all_in.wait()  # three calls at once: three connections, idle in the pool afterwards
            await stream.send_all(_sized(b"x"))
            assert await _read_request(stream, buffer) is None  # closed by the pool
        ended += 1
        if ended == 3:
            all_ended.set()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        pool = _pool()
        async with trio.open_nursery() as calls:
            for _ in range(3):
                calls.start_soon(pool.call, "http", "127.0.0.1", port, "/", b"", {})
        with trio.CancelScope() as cancelled:
            cancelled.cancel()
            await pool.aclose()
        with trio.fail_after(10):
            await all_ended.wait()
        nursery.cancel_scope.cancel()
