"""The metrics listener: ``GET /metrics`` in the Prometheus text format, on an address of its own.

Only the operator's ``--metrics-address`` opens it (``controller/runtime/task_tree.py`` starts it beside the API server
and stops it right after that one); the APIs' listener has no such route. It serves plain HTTP with no session, so that
a scraper needs no credentials: bind it where only the monitoring system reaches. The application is a bare ASGI
callable around prometheus-client's own exposition, which also answers in the OpenMetrics format to a scraper that asks
for it and compresses for one that accepts gzip; any other path is 404 and any other method 405. It runs on the same
Trio server as the APIs (``web/server.py``), with few connections: one scraper or two keep theirs open.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config
from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, Scope
from prometheus_client import CollectorRegistry, make_asgi_app

from controller.runtime.composition import Controller
from controller.runtime.metrics import METRICS_PATH
from web.server import serve

__all__ = ["MAX_CONNECTIONS", "metrics_app", "serve_metrics"]

MAX_CONNECTIONS = 16
_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]


def metrics_app(registry: CollectorRegistry) -> ASGIFramework:
    """The ASGI application serving ``registry`` at :data:`~controller.runtime.metrics.METRICS_PATH` (GET and HEAD)."""
    exposition = make_asgi_app(registry)

    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000, "reason": None})
        elif scope["path"] != METRICS_PATH:
            await _plain(send, 404, b"not found\n")
        elif scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, b"method not allowed\n", [(b"allow", b"GET, HEAD")])
        else:
            await exposition(scope, receive, send)

    return app


async def _plain(send: ASGISendCallable, status: int, body: bytes,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _TEXT + (headers or [])})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def serve_metrics(controller: Controller, registry: CollectorRegistry, *,
                        shutdown_trigger: Callable[..., Awaitable[None]],
                        task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``registry`` on ``controller.settings.metrics_address`` until ``shutdown_trigger`` returns.

    ``task_status.started`` gets the bound base URLs (``http://host:port``, the real port when the address asked for
    port 0) once the listener accepts connections. On shutdown it stops accepting at once and lets a scrape in
    flight finish (``web.server.serve``).

    Raises:
        ValueError: the controller has no metrics address.
    """
    address = controller.settings.metrics_address
    if address is None:
        raise ValueError("the controller has no metrics address")
    config = Config()
    config.bind = [address]
    config.accesslog = None  # a scrape every few seconds is not worth a log line
    # into our JSON handler, as the APIs' (controller/runtime/task_tree.py)
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 5.0
    config.keep_alive_timeout = float(controller.settings.read_timeout)
    config.read_timeout = None
    await serve(metrics_app(registry), config, trust=controller.tls, max_connections=MAX_CONNECTIONS,
                shutdown_trigger=shutdown_trigger, task_status=task_status)
