"""The internal channel's test bench: the middleware of ``web/internal_channel.py`` served by the project's own server
on a loopback port, in front of an application that answers 204, with a router that answers what it is told; and
links (``controller/cluster/channel.py``) to reach it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio
from hypercorn.config import Config

from controller.certificates import ensure_pki
from controller.certificates.tls_contexts import TlsContexts
from controller.cluster import call_signing
from controller.cluster.channel import CHANNEL_PATH, ChannelLinks
from tests.support import seed_pki
from web import server
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
