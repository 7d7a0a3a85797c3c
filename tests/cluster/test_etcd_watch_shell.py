"""The watch's shell against a scripted stand-in for etcd's watch endpoint, for what a real etcd will not do on
demand: a stream cut in the middle of a chunk, events delivered twice or out of order, a member that loses its
leader or falls silent. Each connection plays the next script; the test checks what the watch hands out and the
revision each new stream was asked to start from."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from controller.etcd import EtcdClient, Unavailable, WatchUpdate

CUT = object()  # close the connection in the middle of a chunk
SILENCE = object()  # say nothing more, keep the connection open


def line(revision: int, *events: int, **fields: Any) -> bytes:
    result: dict[str, Any] = {"header": {"revision": str(revision)}, **fields}
    if events:
        result["events"] = [{"kv": {"key": "aw==", "mod_revision": str(e)}} for e in events]
    return json.dumps({"result": result}).encode()


CREATED = line(3, created=True)


class ScriptedGateway:
    """Answers each watch request with the next script: lines sent as chunks, then CUT, SILENCE or a clean end."""

    def __init__(self, scripts: list[list[Any]]) -> None:
        self.scripts = scripts
        self.creates: list[dict[str, Any]] = []

    async def serve(self, stream: trio.SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive_some(65536)
            head, _, body = received.partition(b"\r\n\r\n")
            length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            while len(body) < length:
                body += await stream.receive_some(65536)
            self.creates.append(json.loads(body)["create_request"])
            script = self.scripts.pop(0)
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n")
            for item in script:
                if item is CUT:
                    await stream.send_all(b"40\r\n{\"result\"")
                    return
                if item is SILENCE:
                    await trio.sleep_forever()
                data = item + b"\n"
                await stream.send_all(b"%x\r\n%s\r\n" % (len(data), data))
            await stream.send_all(b"0\r\n\r\n")


@asynccontextmanager
async def gateway(scripts: list[list[Any]]) -> AsyncIterator[tuple[ScriptedGateway, list[str]]]:
    """The gateway, and two endpoints that both reach it (the watch moves between them)."""
    fake = ScriptedGateway(scripts)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        yield fake, [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
        nursery.cancel_scope.cancel()


async def take(updates: AsyncIterator[WatchUpdate], count: int) -> list[WatchUpdate]:
    return [await anext(updates) for _ in range(count)]


async def test_a_cut_stream_resumes_from_the_next_revision_and_drops_what_was_delivered() -> None:
    scripts: list[list[Any]] = [[CREATED, line(5, 4, 5), line(6, 6), CUT],
                                [CREATED, line(7, 5, 6, 7), line(8, 8)]]  # the new stream repeats 5 and 6
    async with gateway(scripts) as (fake, endpoints), EtcdClient(endpoints) as client:
        with trio.fail_after(10):
            async with client.watch("k", start_revision=4) as watch:
                updates = await take(watch, 4)
    assert [[e.kv.mod_revision for e in u.events] for u in updates] == [[4, 5], [6], [7], [8]]
    assert [c.get("start_revision") for c in fake.creates] == [4, 7]
    assert watch.cursor.duplicates == 2 and watch.reconnects == 1
    assert watch.endpoint == endpoints[1]


async def test_a_member_without_leader_or_events_going_back_make_the_watch_move_on() -> None:
    no_leader = b'{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}}'
    scripts: list[list[Any]] = [
        [CREATED, line(5, 5), no_leader],
        [CREATED, line(8, 6, 8, 7)],  # revisions go back inside one message: none of it is delivered
        [CREATED, line(8, 6, 7, 8)]]
    async with gateway(scripts) as (fake, endpoints), EtcdClient(endpoints) as client:
        with trio.fail_after(10):
            async with client.watch("k", start_revision=5) as watch:
                updates = await take(watch, 2)
    assert [[e.kv.mod_revision for e in u.events] for u in updates] == [[5], [6, 7, 8]]
    assert [c.get("start_revision") for c in fake.creates] == [5, 6, 6]


async def test_progress_moves_the_resume_point_and_silence_makes_the_watch_move_on() -> None:
    scripts: list[list[Any]] = [[CREATED, line(9), SILENCE],  # progress: nothing up to 9 is still to come
                                [CREATED, line(10, 10)]]
    async with gateway(scripts) as (fake, endpoints), EtcdClient(endpoints) as client:
        with trio.fail_after(10):
            async with client.watch("k", start_revision=2, idle_timeout=0.5) as watch:
                updates = await take(watch, 2)
    assert [(u.revision, u.is_progress) for u in updates] == [(9, True), (10, False)]
    assert [c.get("start_revision") for c in fake.creates] == [2, 10]


async def test_a_watch_no_member_carries_raises_unavailable() -> None:
    async with EtcdClient(["http://127.0.0.1:9", "http://localhost:9"]) as client:
        with trio.fail_after(10), pytest.raises(Unavailable):
            async with client.watch("k", unavailable_timeout=0.5):
                pass
    scripts: list[list[Any]] = [[CREATED, CUT]] + [[]] * 50  # then streams that end before creating the watch
    async with gateway(scripts) as (_, endpoints), EtcdClient(endpoints) as client:
        with trio.fail_after(10), pytest.raises(Unavailable):
            async with client.watch("k", unavailable_timeout=0.5) as watch:
                await anext(watch)
