"""What one link of the internal channel may hold on the serving side (``web/internal_channel.py``): calls over its
limit, answers its caller does not read, and a caller that reads nothing at all (``web/server.py``)."""

from __future__ import annotations

import contextlib
import itertools
import math
import socket
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.lowlevel
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Message, Request

from controller.cluster import call_signing
from controller.cluster.channel import CHANNEL_PATH, HELLO, Unanswered
from controller.cluster.channel_messages import MESSAGE_BYTES, CallFrame, ReplyFrame
from controller.etcd import connect
from tests.web.channel_server import Router, channel_server, links, signed
from web import internal_channel, server
from web.internal_channel import InternalChannel


async def unread_link(url: str) -> tuple[trio.SocketStream, WSConnection]:
    """A link opened by hand to the channel at ``url``, its receive buffer kept small, so that a caller that reads
    nothing soon holds the server's writes back."""
    stream = await connect("http", "127.0.0.1", int(url.rsplit(":", 1)[1]), None, connect_timeout=5)
    assert isinstance(stream, trio.SocketStream)
    stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    ws = WSConnection(ConnectionType.CLIENT)
    await stream.send_all(ws.send(Request(host="127.0.0.1", target=CHANNEL_PATH, extra_headers=[
        (call_signing.SIGNATURE_HEADER.encode(), signed(HELLO).encode())])))
    while not any(isinstance(event, AcceptConnection) for event in ws.events()):
        ws.receive_data(await stream.receive_some(65536))
    return stream, ws


async def test_calls_beyond_a_links_limit_are_answered_at_once_not_run_and_the_link_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two calls at the router, a third (whichever of the message's three is last) is answered at once as not
    run; once one of the two ends, the next call is served."""
    monkeypatch.setattr(internal_channel, "CALLS_PER_LINK", 2)
    async with links() as held, channel_server(tmp_path) as (served, _):
        gates = {body: served.router.gates.setdefault(body, trio.Event()) for body in (b"one", b"two", b"three")}
        got: dict[bytes, tuple[int, bytes] | Unanswered] = {}

        async def call(body: bytes) -> None:
            got[body] = await held.call(served.url, body)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for body in gates:
                    nursery.start_soon(call, body)
                while len(got) < 1:  # noqa: ASYNC110  # the server's own progress
                    await trio.sleep(0.01)
                [refused] = got
                assert not served.router.arrival(refused).is_set()
                status, answer = got[refused]  # type: ignore[misc]
                assert status == 200 and msgspec.json.decode(answer)["error"]["code"] == "CLUSTER_UNAVAILABLE"
                assert msgspec.json.decode(answer)["error"]["cause"]["data"] == {"applied": "no"}
                first = next(body for body in gates if body != refused)
                gates[first].set()
                while len(got) < 2:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                assert await held.call(served.url, b"after") == (200, b'{"result":"after"}')
                for gate in gates.values():
                    gate.set()
        assert sorted(served.router.served) == sorted([*(body for body in gates if body != refused), b"after"])
        assert served.frames_in[0] == 3 and len(served.links_accepted) == 1
        assert sorted(status for _, _, status in served.done) == [200, 200, 200, 503]


async def test_a_node_that_reads_none_of_its_answers_loses_its_link(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Forty answers of a mebibyte each, more than the sockets' buffers hold (the caller's kept small), to a caller
    that reads nothing: the server's kernel drops the stalled connection, the link's handling ends, and the caller,
    reading at last, finds the connection gone short of the forty."""
    monkeypatch.setattr(server, "STALLED_PEER_TIMEOUT", 0.5)
    calls = 40
    async with channel_server(tmp_path) as (served, _):
        with trio.fail_after(20):
            stream, ws = await unread_link(served.url)
            frames = [CallFrame(n, signed(b"big%d" % n), b"big%d" % n) for n in range(calls)]
            await stream.send_all(ws.send(Message(data=msgspec.msgpack.encode(frames))))
            with trio.move_on_after(10) as waited:
                await served.links_ended.wait()  # reading nothing meanwhile
            if waited.cancelled_caught:
                await stream.aclose()  # so that the server's write, and the test, can end
                pytest.fail("the server still writes to a caller that reads nothing")
            answered = 0
            with contextlib.suppress(trio.BrokenResourceError):  # reset: the kernel dropped it
                while data := await stream.receive_some(1 << 20):
                    ws.receive_data(data)
                    answered += sum(isinstance(event, BytesMessage) and event.message_finished
                                    for event in ws.events())
            await stream.aclose()
        assert served.router.served and answered < calls


class Done:
    """The statuses of the calls the channel counted."""

    def __init__(self) -> None:
        self.statuses: list[int] = []

    def request_done(self, route: str | None, method: str, status: int, seconds: float) -> None:
        self.statuses.append(status)


class FakeLink:
    """A link's caller at the channel's ASGI interface: it sends the messages it is given and, if ``reads``, reads
    its answers as they are written; else none (each write waits) until its connection is dropped (then, as with the
    server, writes return)."""

    def __init__(self, *, reads: bool) -> None:
        self.inbound, self._to_receive = trio.open_memory_channel[dict[str, object]](math.inf)
        self.reads = reads
        self.taken = 0  # messages the channel received after the opening
        self.answers: list[int] = []  # the statuses written, in order
        self.dropped = trio.Event()
        self.closed: list[tuple[int, float]] = []  # the close code, and when it was sent
        self.scope = {"type": "websocket", "path": CHANNEL_PATH,
                      "headers": [(call_signing.SIGNATURE_HEADER.lower().encode(), signed(HELLO).encode())]}
        self._ids = itertools.count()
        self.inbound.send_nowait({"type": "websocket.connect"})

    def calls(self, *bodies: bytes) -> None:
        frames = [CallFrame(next(self._ids), signed(body), body) for body in bodies]
        self.inbound.send_nowait({"type": "websocket.receive", "bytes": msgspec.msgpack.encode(frames)})

    async def receive(self) -> dict[str, object]:
        message = await self._to_receive.receive()
        self.taken += message["type"] == "websocket.receive"
        return message

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":
            if not self.reads:
                await self.dropped.wait()
                return  # gone with the connection
            await trio.lowlevel.checkpoint()
            self.answers += [reply.status for reply in msgspec.msgpack.decode(message["bytes"], type=list[ReplyFrame])]
        elif message["type"] == "websocket.close":
            self.closed.append((message["code"], trio.current_time()))


async def test_a_node_that_reads_none_of_its_answers_is_held_to_the_limit_then_loses_its_link(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    """Two calls at most, two refusals at most: two calls run, and their answers wait to be written; the next two are
    refused without running, and their refusals wait too; the call after them ends the link. The link is still
    read, and what comes dropped, so that the server never stops reading the connection; once the connection goes
    (taking the write that waits with it) the link is closed 1008, and its handling ends when the calling node's
    close comes, or :data:`CLOSE_WITHIN` after its own."""
    monkeypatch.setattr(internal_channel, "CALLS_PER_LINK", 2)
    monkeypatch.setattr(internal_channel, "REFUSALS_PER_LINK", 2)
    router, link, done = Router(), FakeLink(reads=False), Done()
    channel = InternalChannel(None, router, max_body=64, metrics=done)  # type: ignore[arg-type]  # no application
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel, link.scope, link.receive, link.send)
        try:
            link.calls(b"one", b"two")
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(router.served) == [b"one", b"two"]
            link.calls(b"three")
            link.calls(b"four")
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(router.served) == [b"one", b"two"] and done.statuses == [200, 200, 503, 503]
            link.calls(b"five", b"six")  # ends the link
            for _ in range(20):  # more than the server queues for an application that stops reading
                link.calls(b"more")
            await trio.testing.wait_all_tasks_blocked()
            assert link.taken == 24 and not link.closed  # every message read, none run
            assert sorted(router.served) == [b"one", b"two"] and done.statuses == [200, 200, 503, 503]
        finally:
            link.dropped.set()  # the write waiting ends: else nothing could
        await trio.testing.wait_all_tasks_blocked()
        [(code, closed_at)] = link.closed
        assert code == 1008
    assert trio.current_time() - closed_at == internal_channel.CLOSE_WITHIN


async def test_a_link_whose_node_disconnects_after_it_was_ended_ends_at_once(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    monkeypatch.setattr(internal_channel, "CALLS_PER_LINK", 1)
    monkeypatch.setattr(internal_channel, "REFUSALS_PER_LINK", 0)
    link = FakeLink(reads=True)
    channel = InternalChannel(None, Router(), max_body=64, metrics=None)  # type: ignore[arg-type]
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel, link.scope, link.receive, link.send)
        link.calls(b"one", b"two")  # the second ends the link
        await trio.testing.wait_all_tasks_blocked()
        assert [code for code, _ in link.closed] == [1008]
        link.inbound.send_nowait({"type": "websocket.disconnect"})
    assert trio.current_time() == start


async def test_a_node_that_reads_its_answers_keeps_its_link_through_a_burst_of_calls_over_the_limit() -> None:
    """The real limits: with every call of the link's limit held at the router, the calling node's messages of as
    many calls as it puts in one, as many as the server queues and one more, are every one refused, and the link
    goes on."""
    router, link = Router(), FakeLink(reads=True)
    router.gates[b"held"] = held = trio.Event()
    per_message = MESSAGE_BYTES // 256
    channel = InternalChannel(None, router, max_body=64, metrics=None)  # type: ignore[arg-type]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel, link.scope, link.receive, link.send)
            link.calls(*[b"held"] * internal_channel.CALLS_PER_LINK)
            await trio.testing.wait_all_tasks_blocked()
            for _ in range(11):
                link.calls(*[b"over"] * per_message)
            await trio.testing.wait_all_tasks_blocked()
            assert link.answers == [200] * 11 * per_message and not link.closed  # each one refused (200 + 503 body)
            held.set()
            await trio.testing.wait_all_tasks_blocked()
            link.inbound.send_nowait({"type": "websocket.disconnect"})
    assert link.answers[11 * per_message:] == [200] * internal_channel.CALLS_PER_LINK and not link.closed


async def test_a_link_ended_for_unread_answers_ends_with_its_connection_however_much_its_node_sends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the real server: a caller that reads nothing has its link ended (two calls with answers of a mebibyte
    each, two refused, the fifth call over), then sends twenty more messages, more than the server queues for an
    application. The server's kernel drops the stalled connection, the link's handling ends, and so does the
    server when asked to stop."""
    monkeypatch.setattr(internal_channel, "CALLS_PER_LINK", 2)
    monkeypatch.setattr(internal_channel, "REFUSALS_PER_LINK", 2)
    monkeypatch.setattr(server, "STALLED_PEER_TIMEOUT", 0.5)
    with trio.fail_after(20):
        async with channel_server(tmp_path) as (served, stop):
            stream, ws = await unread_link(served.url)
            ids = itertools.count()

            async def calls(*bodies: bytes) -> None:
                frames = [CallFrame(next(ids), signed(body), body) for body in bodies]
                await stream.send_all(ws.send(Message(data=msgspec.msgpack.encode(frames))))

            await calls(b"big0", b"big1")
            for body in (b"three", b"four", b"five"):
                await calls(body)
            for _ in range(20):
                await calls(b"more")
            with trio.move_on_after(10) as waited:
                await served.links_ended.wait()  # reading nothing meanwhile
            await stream.aclose()
            assert not waited.cancelled_caught, "the link's handling did not end"
            assert sorted(served.router.served) == [b"big0", b"big1"]
            stop.cancel()
