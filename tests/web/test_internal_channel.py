"""The internal channel end to end on loopback: links opened by ``controller/cluster/channel.py`` to the middleware
of ``web/internal_channel.py`` served by the project's own server, with a router that answers what it is told."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio
from hypercorn.config import Config
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Message, Request

from controller.certificates import ensure_pki
from controller.certificates.tls_contexts import TlsContexts
from controller.cluster import call_signing, channel
from controller.cluster.channel import CHANNEL_PATH, HELLO, CallFrame, ChannelLinks, Unanswered
from controller.etcd import connect
from tests.support import seed_pki, websocket_upgrade
from web import internal_channel, server
from web.internal_channel import InternalChannel

KEY = b"k" * 32
MAX_BODY = 64
BIG_ANSWER = 1 << 20  # the answer to a call whose body starts with "big"


def signed(body: bytes) -> str:
    return call_signing.signature(KEY, body, time.time())


@dataclass
class Router:
    """Answers a call 200 with its body, once the gate named by the body (if any) opens; refuses bad signatures."""

    gates: dict[bytes, trio.Event] = field(default_factory=dict)
    arrivals: dict[bytes, trio.Event] = field(default_factory=dict)  # set as a call with that body reaches serve
    served: list[bytes] = field(default_factory=list)

    def arrival(self, body: bytes) -> trio.Event:
        return self.arrivals.setdefault(body, trio.Event())

    def verified(self, signature: str | None, body: bytes) -> bool:
        return call_signing.verified(KEY, signature, body, time.time())

    async def serve(self, signature: str | None, body: bytes) -> tuple[int, bytes]:
        if not self.verified(signature, body):
            return 401, b'{"error":{"code":"UNAUTHORIZED"}}'
        self.arrival(body).set()
        if body == b"fail":
            raise RuntimeError("the router failed on this call")
        if body in self.gates:
            await self.gates[body].wait()
        self.served.append(body)
        if body.startswith(b"big"):
            return 200, b"x" * BIG_ANSWER
        return 200, b'{"result":"' + body + b'"}'


@dataclass
class Served:
    url: str
    router: Router
    app_paths: list[tuple[str, str]]  # (scope type, path) of what reached the application
    links_accepted: list[int]  # one entry per WebSocket the channel was given
    links_ended: trio.Event  # set as the channel's handling of a link returns
    frames_in: list[int]  # frames in each message the channel received
    frames_out: list[int]  # frames in each message it sent
    done: list[tuple[str | None, str, int]]  # what the channel counted


@asynccontextmanager
async def channel_server(tmp_path: Path) -> AsyncIterator[tuple[Served, trio.CancelScope]]:
    """The channel in front of an application that answers 204, served on a loopback port; the scope that stops it."""
    seed_pki(tmp_path)
    trust = TlsContexts(ensure_pki(tmp_path / "pki").ca_pem.decode())
    router, app_paths, accepted, done = Router(), [], [], []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        app_paths.append((scope["type"], scope["path"]))
        if scope["type"] == "websocket":
            await send({"type": "websocket.close"})
            return
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    class Counted:
        def request_done(self, route: str | None, method: str, status: int, seconds: float) -> None:
            done.append((route, method, status))

    middleware = InternalChannel(app, router, max_body=MAX_BODY, metrics=Counted())

    frames_in: list[int] = []
    frames_out: list[int] = []
    ended = trio.Event()

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket" or scope["path"] != CHANNEL_PATH:
            await middleware(scope, receive, send)
            return
        accepted.append(1)

        async def received() -> Any:
            message = await receive()
            if message["type"] == "websocket.receive":
                frames_in.append(_frames(message.get("bytes")))
            return message

        async def sent(message: Any) -> None:
            if message["type"] == "websocket.send":
                frames_out.append(_frames(message["bytes"]))
            await send(message)

        await middleware(scope, received, sent)
        ended.set()

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.1
    stop = trio.CancelScope()

    async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
        with stop:
            await server.serve(counting, config, trust=trust, task_status=task_status)

    async with trio.open_nursery() as nursery:
        urls = await nursery.start(run_server)
        try:
            yield Served(urls[0], router, app_paths, accepted, ended, frames_in, frames_out, done), stop
        finally:
            nursery.cancel_scope.cancel()


def _frames(message: bytes | None) -> int:
    try:
        decoded = msgspec.msgpack.decode(message or b"")
    except msgspec.DecodeError:
        return -1
    return len(decoded) if isinstance(decoded, list) else -1


@asynccontextmanager
async def links(sign: Any = signed) -> AsyncIterator[ChannelLinks]:
    held = ChannelLinks(None, sign, connect_timeout=5.0)  # type: ignore[arg-type]  # plain http: no TLS needed
    async with trio.open_nursery() as nursery:
        await nursery.start(held.run)
        try:
            yield held
        finally:
            nursery.cancel_scope.cancel()


async def test_calls_share_one_link_and_each_is_answered_as_soon_as_it_is_ready(tmp_path: Path) -> None:
    async with channel_server(tmp_path) as (served, _), links() as held:
        served.router.gates[b"slow"] = gate = trio.Event()
        answers: dict[bytes, tuple[int, bytes] | Unanswered] = {}
        five = trio.Event()

        async def call(body: bytes) -> None:
            answers[body] = await held.call(served.url, body)
            if len(answers) == 5:
                five.set()

        with trio.fail_after(10):
            async with trio.open_nursery() as calls:
                calls.start_soon(call, b"slow")
                await served.router.arrival(b"slow").wait()
                for i in range(5):
                    calls.start_soon(call, b"fast%d" % i)
                await five.wait()
                assert b"slow" not in answers  # the five after it were answered while it waited
                gate.set()
        assert answers == {body: (200, b'{"result":"' + body + b'"}')
                           for body in [b"slow"] + [b"fast%d" % i for i in range(5)]}
        assert served.router.served[-1] == b"slow" and len(served.links_accepted) == 1
        assert served.done == [(CHANNEL_PATH, "CALL", 200)] * 6 and not served.app_paths


async def test_calls_made_together_travel_together_and_so_do_answers_ready_together(tmp_path: Path) -> None:
    async with channel_server(tmp_path) as (served, _), links() as held:
        with trio.fail_after(10):
            assert await held.call(served.url, b"first") == (200, b'{"result":"first"}')  # the link is open
            bodies = [b"together%d" % i for i in range(5)]
            gate = trio.Event()
            served.router.gates.update(dict.fromkeys(bodies, gate))
            answers: dict[bytes, tuple[int, bytes] | Unanswered] = {}

            async def call(body: bytes) -> None:
                answers[body] = await held.call(served.url, body)

            async with trio.open_nursery() as calls:
                for body in bodies:
                    calls.start_soon(call, body)
                for body in bodies:
                    await served.router.arrival(body).wait()
                gate.set()
        assert answers == {body: (200, b'{"result":"' + body + b'"}') for body in bodies}
        assert served.frames_in == [1, 5] and served.frames_out == [1, 5]


async def test_a_link_not_signed_by_the_network_key_is_refused_and_so_is_a_call(tmp_path: Path) -> None:
    async with channel_server(tmp_path) as (served, _):
        async with links(lambda body: call_signing.signature(b"x" * 32, body, time.time())) as stranger:
            with trio.fail_after(10):
                assert await stranger.call(served.url, b"hello") is Unanswered.NOT_SENT  # the link was refused
        upgrade = websocket_upgrade()
        async with httpx.AsyncClient() as http:
            for signature in ({}, {call_signing.SIGNATURE_HEADER: "1:00"},
                              {call_signing.SIGNATURE_HEADER: call_signing.signature(KEY, b"other", time.time())}):
                refused = await http.get(served.url + CHANNEL_PATH, headers=upgrade | signature)
                assert refused.status_code == 403
        # The link itself signed, one call not: the router refuses that call, and the link serves the next.
        async with links(lambda body: signed(body) if body in (HELLO, b"good") else "1:00") as half:
            with trio.fail_after(10):
                assert await half.call(served.url, b"bad") == (401, b'{"error":{"code":"UNAUTHORIZED"}}')
                assert await half.call(served.url, b"good") == (200, b'{"result":"good"}')
        assert served.router.served == [b"good"] and not served.app_paths


async def test_a_call_too_large_is_refused_before_the_router_and_a_message_not_a_call_ends_the_link(
        tmp_path: Path) -> None:
    async with channel_server(tmp_path) as (served, _), links() as held:
        with trio.fail_after(10):
            too_large = await held.call(served.url, b"x" * (MAX_BODY + 1))
            assert too_large == (413, b'{"error":{"code":"REQUEST_TOO_LARGE"}}') and not served.router.served
            stream = await connect("http", "127.0.0.1", int(served.url.rsplit(":", 1)[1]), None, connect_timeout=5)
            ws = WSConnection(ConnectionType.CLIENT)
            await stream.send_all(ws.send(Request(host="127.0.0.1", target=CHANNEL_PATH, extra_headers=[
                (call_signing.SIGNATURE_HEADER.encode(), signed(HELLO).encode())])))
            events: list[object] = []
            while not any(isinstance(event, CloseConnection) for event in events):
                ws.receive_data(await stream.receive_some(65536))
                events += ws.events()
                if any(isinstance(event, AcceptConnection) for event in events) and len(events) == 1:
                    await stream.send_all(ws.send(Message(data=msgspec.msgpack.encode({"not": "a call"}))))
            assert [event.code for event in events if isinstance(event, CloseConnection)] == [1003]
            await stream.aclose()
        assert [status for _, _, status in served.done] == [413]


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
            stream = await connect("http", "127.0.0.1", int(served.url.rsplit(":", 1)[1]), None, connect_timeout=5)
            assert isinstance(stream, trio.SocketStream)
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            ws = WSConnection(ConnectionType.CLIENT)
            await stream.send_all(ws.send(Request(host="127.0.0.1", target=CHANNEL_PATH, extra_headers=[
                (call_signing.SIGNATURE_HEADER.encode(), signed(HELLO).encode())])))
            while not any(isinstance(event, AcceptConnection) for event in ws.events()):
                ws.receive_data(await stream.receive_some(65536))
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


async def test_a_call_the_router_fails_on_is_answered_500_and_the_link_goes_on(tmp_path: Path) -> None:
    async with channel_server(tmp_path) as (served, _), links() as held:
        with trio.fail_after(10):
            failed = await held.call(served.url, b"fail")
            after = await held.call(served.url, b"after")
        assert isinstance(failed, tuple) and failed[0] == 500
        assert after == (200, b'{"result":"after"}')
        assert served.links_accepted == [1]  # one link carried both
        assert [status for _, _, status in served.done] == [500, 200]


async def test_everything_else_goes_to_the_application(tmp_path: Path) -> None:
    async with channel_server(tmp_path) as (served, _), httpx.AsyncClient() as http:
        for path in ("/edge/client/v1/version", CHANNEL_PATH, CHANNEL_PATH + "/more"):
            assert (await http.post(served.url + path)).status_code == 204
        upgrade = websocket_upgrade()
        assert (await http.get(served.url + "/edge/internal/v1/other", headers=upgrade)).status_code == 403
        assert served.app_paths == [("http", "/edge/client/v1/version"), ("http", CHANNEL_PATH),
                                    ("http", CHANNEL_PATH + "/more"), ("websocket", "/edge/internal/v1/other")]
        assert not served.router.served and not served.done


async def test_calls_waiting_when_the_other_node_goes_get_nothing_and_a_cancelled_caller_leaves_the_link(
        tmp_path: Path) -> None:
    async with links() as held:
        async with channel_server(tmp_path) as (served, stop):
            served.router.gates[b"never"] = trio.Event()
            served.router.gates[b"later"] = later = trio.Event()
            with trio.fail_after(10):
                with trio.move_on_after(0.2):
                    await held.call(served.url, b"later")  # given up by its caller; the link stays
                later.set()
                assert await held.call(served.url, b"after") == (200, b'{"result":"after"}')
                assert len(served.links_accepted) == 1
                got: list[tuple[int, bytes] | Unanswered] = [(0, b"")]

                async def waiting() -> None:
                    got[0] = await held.call(served.url, b"never")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(waiting)
                    await served.router.arrival(b"never").wait()
                    stop.cancel()  # the server goes, with the call unanswered
                assert got == [Unanswered.LOST]  # it left: the other node may have run it
            url = served.url
        with trio.fail_after(10):
            assert await held.call(url, b"anyone") is Unanswered.NOT_SENT  # nobody listens there now: not reached


async def test_the_server_answers_the_pings_of_a_link_whose_call_takes_long(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinged again and again while its one call waits three times as long as a ping may go unanswered (the server
    answers each ping itself), the link stays."""
    monkeypatch.setattr(channel, "QUIET_BEFORE_PING", 0.05)
    monkeypatch.setattr(channel, "PING_ANSWER_WITHIN", 1.0)
    async with links() as held, channel_server(tmp_path) as (served, _):
        served.router.gates[b"slow"] = slow = trio.Event()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(held.call, served.url, b"slow")
                await served.router.arrival(b"slow").wait()
                await trio.sleep(3.0)
                slow.set()
            assert await held.call(served.url, b"next") == (200, b'{"result":"next"}')
        assert served.router.served == [b"slow", b"next"] and len(served.links_accepted) == 1


async def test_a_node_answering_with_something_else_is_not_reached_and_the_links_go_on(tmp_path: Path) -> None:
    asked: list[bytes] = []

    async def not_a_websocket(stream: trio.SocketStream) -> None:
        asked.append(await stream.receive_some(65536))
        await stream.send_all(b"SSH-2.0-something else\r\n\r\n")
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, not_a_websocket, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        async with channel_server(tmp_path) as (served, _), links() as held:
            with trio.fail_after(10):
                assert await held.call(f"http://127.0.0.1:{port}", b"lost") is Unanswered.NOT_SENT
                assert await held.call(served.url, b"found") == (200, b'{"result":"found"}')
        assert len(asked) == 1 and asked[0].startswith(b"GET " + CHANNEL_PATH.encode())
        nursery.cancel_scope.cancel()


async def test_links_not_running_reach_nobody(tmp_path: Path) -> None:
    held = ChannelLinks(None, signed, connect_timeout=5.0)  # type: ignore[arg-type]
    async with channel_server(tmp_path) as (served, _):
        assert await held.call(served.url, b"x") is Unanswered.NOT_SENT and not served.links_accepted
