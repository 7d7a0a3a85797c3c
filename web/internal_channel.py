"""``InternalChannel``: the cluster's internal channel, served in front of the application rather than through it.

Identity-actor calls that the other nodes of the network forward (``controller/cluster/forwarding.py``) arrive as
``POST`` :data:`~controller.cluster.forwarding.FORWARD_PATH` on the node's own listener. They belong to neither API:
no session, no OpenAPI operation, no read barrier (a call names the revision its sender reached, and the owner waits
for that instead), no access-log line. So this ASGI middleware answers them itself, and every other request goes on
to the application unchanged: a forwarded call skips the application's per-request work (its request context, hooks,
routing and response object), and a node serves one for each posture report that reached another node first.

The body is read with the application's own bounds (at most ``max_body`` bytes, each part within ``read_timeout``
seconds); the router verifies the signature over it before anything is decoded. The answer is the router's status
and JSON body. The call is counted in the request metrics under its path, as the application counts its routes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from controller.cluster.call_signing import SIGNATURE_HEADER
from controller.cluster.forwarding import FORWARD_PATH

__all__ = ["InternalChannel"]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

_SIGNATURE = SIGNATURE_HEADER.lower().encode("latin-1")
_NOT_POST = 405, b'{"error":{"code":"METHOD_NOT_ALLOWED"}}'
_TOO_LARGE = 413, b'{"error":{"code":"REQUEST_TOO_LARGE"}}'
_TOO_SLOW = 408, b'{"error":{"code":"REQUEST_TIMEOUT"}}'


class Forwarded(Protocol):
    """What the channel needs of the node's router (:class:`~controller.cluster.forwarding.RoutedPosture`)."""

    async def serve(self, signature: str | None, body: bytes) -> tuple[int, bytes]:
        """The status and JSON body answering a forwarded call signed with ``signature``."""


class RequestCounter(Protocol):
    """What the channel needs of the controller's metrics (``controller/runtime/metrics.py``)."""

    def request_done(self, route: str | None, method: str, status: int, seconds: float) -> None:
        """Count one answered request."""


class InternalChannel:
    """ASGI middleware answering forwarded calls with ``router`` in front of ``app``.

    Args:
        app: the application, which gets every other request (and every WebSocket and lifespan event).
        router: the node's router, which answers the calls.
        max_body: the most bytes a call's body may hold.
        read_timeout: seconds each part of the body may take to arrive.
        metrics: where answered calls are counted, if anywhere.
    """

    def __init__(self, app: ASGIApp, router: Forwarded, *, max_body: int, read_timeout: float,
                 metrics: RequestCounter | None) -> None:
        self._app = app
        self._router = router
        self._max_body = max_body
        self._read_timeout = read_timeout
        self._metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != FORWARD_PATH:
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        answer = await self._answer(scope, receive)
        if answer is None:
            return  # the caller went away: nobody to answer
        status, body = answer
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii"))]})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        if self._metrics is not None:
            self._metrics.request_done(FORWARD_PATH, scope["method"], status, time.perf_counter() - started)

    async def _answer(self, scope: Any, receive: Any) -> tuple[int, bytes] | None:
        if scope["method"] != "POST":
            return _NOT_POST
        body = bytearray()
        while True:
            with trio.move_on_after(self._read_timeout) as waited:
                message = await receive()
            if waited.cancelled_caught:  # no part of the body for read_timeout seconds
                return _TOO_SLOW
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > self._max_body:
                return _TOO_LARGE
            if not message.get("more_body", False):
                break
        signature = next((value.decode("latin-1") for name, value in scope["headers"] if name == _SIGNATURE), None)
        return await self._router.serve(signature, bytes(body))
