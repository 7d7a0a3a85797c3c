"""The internal channel's middleware (``web/internal_channel.py``) as an ASGI server drives it: forwarded calls are
answered by the router with the application's bounds on their body, everything else goes to the application."""

from __future__ import annotations

from typing import Any

import trio

from controller.cluster.call_signing import SIGNATURE_HEADER
from controller.cluster.forwarding import FORWARD_PATH
from web.internal_channel import InternalChannel

READ_TIMEOUT = 5.0
MAX_BODY = 64


class Router:
    """Answers every call 200 with what it was given, and keeps it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, bytes]] = []

    async def serve(self, signature: str | None, body: bytes) -> tuple[int, bytes]:
        self.calls.append((signature, body))
        return 200, b'{"result":"' + body + b'"}'


class Counted:
    def __init__(self) -> None:
        self.done: list[tuple[str | None, str, int]] = []

    def request_done(self, route: str | None, method: str, status: int, seconds: float) -> None:
        self.done.append((route, method, status))


class App:
    """The application behind the channel: records the paths it was given."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def channel() -> tuple[InternalChannel, App, Router, Counted]:
    app, router, metrics = App(), Router(), Counted()
    return InternalChannel(app, router, max_body=MAX_BODY, read_timeout=READ_TIMEOUT, metrics=metrics), app, router, \
        metrics


def scope(path: str = FORWARD_PATH, method: str = "POST", signature: str | None = "sig") -> dict[str, Any]:
    headers = [(b"content-type", b"application/json")]
    if signature is not None:
        headers.append((SIGNATURE_HEADER.lower().encode(), signature.encode()))
    return {"type": "http", "path": path, "method": method, "headers": headers}


async def call(middleware: InternalChannel, request: dict[str, Any], parts: list[dict[str, Any]]) -> list[Any]:
    """Drive one request whose body arrives as ``parts`` (then nothing more, ever); what was sent back."""
    sent: list[Any] = []
    queue = list(parts)

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    await middleware(request, receive, send)
    return sent


def answer(sent: list[Any]) -> tuple[int, dict[bytes, bytes], bytes]:
    start, body = sent
    return start["status"], dict(start["headers"]), body["body"]


async def test_a_forwarded_call_is_answered_by_the_router_and_counted() -> None:
    middleware, app, router, metrics = channel()
    sent = await call(middleware, scope(), [{"type": "http.request", "body": b"ab", "more_body": True},
                                            {"type": "http.request", "body": b"cd", "more_body": False}])
    assert answer(sent) == (200, {b"content-type": b"application/json", b"content-length": b"17"},
                            b'{"result":"abcd"}')
    assert router.calls == [("sig", b"abcd")] and not app.paths
    assert metrics.done == [(FORWARD_PATH, "POST", 200)]


async def test_an_unsigned_call_reaches_the_router_which_refuses_it() -> None:
    middleware, _, router, _ = channel()
    await call(middleware, scope(signature=None), [{"type": "http.request", "body": b"{}"}])
    assert router.calls == [(None, b"{}")]


async def test_everything_else_goes_to_the_application() -> None:
    middleware, app, router, metrics = channel()
    for path in ("/edge/client/v1/version", FORWARD_PATH + "/more", "/edge/internal/v1"):
        assert answer(await call(middleware, scope(path=path), []))[0] == 204
    lifespan: list[str] = []

    async def lifespan_app(scope: Any, receive: Any, send: Any) -> None:
        lifespan.append(scope["type"])

    await InternalChannel(lifespan_app, router, max_body=MAX_BODY, read_timeout=READ_TIMEOUT, metrics=None)(
        {"type": "lifespan"}, None, None)
    assert app.paths == ["/edge/client/v1/version", FORWARD_PATH + "/more", "/edge/internal/v1"]
    assert lifespan == ["lifespan"] and not router.calls and not metrics.done


async def test_bad_calls_are_refused_before_the_router_sees_them(autojump_clock: trio.abc.Clock) -> None:
    middleware, app, router, metrics = channel()
    status, _, body = answer(await call(middleware, scope(method="GET"), []))
    assert (status, body) == (405, b'{"error":{"code":"METHOD_NOT_ALLOWED"}}')
    too_large = [{"type": "http.request", "body": b"x" * MAX_BODY, "more_body": True},
                 {"type": "http.request", "body": b"x", "more_body": False}]
    assert answer(await call(middleware, scope(), too_large))[0] == 413
    start = trio.current_time()
    stalled = await call(middleware, scope(), [{"type": "http.request", "body": b"{", "more_body": True}])
    assert answer(stalled)[0] == 408 and trio.current_time() == start + READ_TIMEOUT
    assert not router.calls and not app.paths
    assert [status for _, _, status in metrics.done] == [405, 413, 408]


async def test_a_caller_that_went_away_gets_nothing() -> None:
    middleware, _, router, metrics = channel()
    assert await call(middleware, scope(), [{"type": "http.disconnect"}]) == []
    assert not router.calls and not metrics.done
