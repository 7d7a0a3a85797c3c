"""The internal channel end to end on loopback: links opened by ``controller/cluster/channel.py`` to the middleware
of ``web/internal_channel.py`` served by the project's own server, with a router that answers what it is told."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import httpx
import msgspec
import pytest
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Message, Request

from controller.cluster import call_signing, channel
from controller.cluster.channel import CHANNEL_PATH, HELLO, ChannelLinks, Unanswered
from controller.etcd import connect
from tests.support import websocket_upgrade
from tests.web.channel_server import KEY, MAX_BODY, channel_server, links, signed


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
