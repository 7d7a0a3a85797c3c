"""``InternalChannel``: the cluster's internal channel, served in front of the application rather than through it.

Identity-actor calls that the other nodes of the network forward (``controller/cluster/forwarding.py``) arrive on a
WebSocket at :data:`~controller.cluster.channel.CHANNEL_PATH` on the node's own listener, one link per calling node,
many calls in flight on each (``controller/cluster/channel.py`` is the calling side). They belong to neither API: no
session, no OpenAPI operation, no read barrier (a call names the revision its sender reached, and the owner waits for
that instead), no access-log line. So this ASGI middleware serves the link itself, and every other request (HTTP,
any other WebSocket, lifespan) goes on to the application unchanged.

A link is accepted only when its opening request carries a signature of :data:`~controller.cluster.channel.HELLO` by
the network's key (else hypercorn answers the upgrade 403); each call is still verified on its own by the router before
anything of it is decoded. Each :class:`~controller.cluster.channel_messages.CallFrame` of a message is served in a
task of the link's own (the link is the request: its calls end with it), and answered with a
:class:`~controller.cluster.channel_messages.ReplyFrame` as soon as the router has the answer, whatever the order;
answers ready together go in one message (an :class:`~controller.cluster.channel_messages.Outbox`). A call larger than
``max_body`` is answered 413 without reaching the router, and one the router fails on is answered 500 (logged), the
link's other calls going on; a message that is not a list of call frames ends the link, once its calls have stopped.

What a link holds is bounded, and the link is always read: were it left unread, the server would stop reading the
connection, the calling node's pings would go unanswered and its link would drop with every call on it. At most
:data:`CALLS_PER_LINK` calls of a link are open at once, each from its arrival until its answer is written (with the
router, or answered and waiting to go out). A call beyond that is answered at once, not run (``CLUSTER_UNAVAILABLE``,
``applied: no``; the refusals written together, by one task), and at most :data:`REFUSALS_PER_LINK` of those answers
wait to be written: calls beyond both mean that the calling node does not read its answers, and end the link (close
code 1008; the calls still open are cancelled, and their callers get ``LOST``). A link this side ends (1003, 1008) is
still read, what comes dropped, until the calling node disconnects, or :data:`CLOSE_WITHIN` after the close was sent. A
calling node that reads nothing at all loses the link when the server drops the stalled connection (``web/server.py``).
Each call is counted in the request metrics under the channel's path, method ``CALL`` (a call answered as beyond the
limit, as 503).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec
import trio

from controller.cluster.call_signing import SIGNATURE_HEADER
from controller.cluster.channel import CHANNEL_PATH, HELLO
from controller.cluster.channel_messages import CallFrame, Outbox, ReplyFrame
from controller.errors import nested_cause

__all__ = ["InternalChannel"]

log = logging.getLogger("tollgate.web")

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

_SIGNATURE = SIGNATURE_HEADER.lower().encode("latin-1")
_TOO_LARGE = 413, b'{"error":{"code":"REQUEST_TOO_LARGE"}}'
_FAILED = 500, b'{"error":{"code":"UNHANDLED"}}'
_NOT_A_CALL = 1003  # WebSocket close code: a message this side cannot take
_NOT_READING = 1008  # WebSocket close code: a caller that breaks the link's terms (it reads none of its answers)
_calls_decoder = msgspec.msgpack.Decoder(list[CallFrame])

CALLS_PER_LINK = 4096
"""The most calls of one link open at once: far more than a node's requests make, few enough that a node gone wrong
cannot have this one start work without end."""
REFUSALS_PER_LINK = 65536
"""The most answers refusing calls beyond :data:`CALLS_PER_LINK` that wait to be written, each held as its call's
id until its turn comes (4,096 at a time go to the outbox). Sixteen messages of refused calls that a calling node
sends at once stay within it; one that sends calls beyond the limit faster than it reads their answers (or reads
none) reaches it, and loses the link."""
_REFUSALS_AT_ONCE = 4096
CLOSE_WITHIN = 5.0
"""Seconds a link this side ended is still read once its close is sent, waiting for the calling node's close (the
server passes that on only to an application that reads)."""
_BUSY = 200, msgspec.json.encode({"error": {"code": "CLUSTER_UNAVAILABLE", "cause": nested_cause(
    "the identity's owner was serving as many calls from this node as it takes: the call was not run",
    "CLUSTER_UNAVAILABLE", {"applied": "no"})}})


class Forwarded(Protocol):
    """What the channel needs of the node's router (:class:`~controller.cluster.forwarding.RoutedPosture`)."""

    def verified(self, signature: str | None, body: bytes) -> bool:
        """Whether ``signature`` signs ``body`` with the network's key, recently."""

    async def serve(self, signature: str | None, body: bytes) -> tuple[int, bytes]:
        """The status and JSON body answering a forwarded call signed with ``signature``."""


class RequestCounter(Protocol):
    """What the channel needs of the controller's metrics (``controller/runtime/metrics.py``)."""

    def request_done(self, route: str | None, method: str, status: int, seconds: float) -> None:
        """Count one answered request."""


class _Limits:
    """What one link holds: its open calls; the calls refused, their answers not yet written (the ids waiting for
    the outbox, and how many are not written yet, those included); whether it refused any yet."""

    def __init__(self) -> None:
        self.calls = trio.Semaphore(CALLS_PER_LINK)
        self.refusals: list[int] = []
        self.refusing = 0
        self.answering_refusals = False
        self.refused = False


class InternalChannel:
    """ASGI middleware serving the internal channel's links with ``router`` in front of ``app``.

    Args:
        app: the application, which gets every other request (and every other WebSocket and lifespan event).
        router: the node's router, which answers the calls.
        max_body: the most bytes a call's body may hold.
        metrics: where answered calls are counted, if anywhere.
    """

    def __init__(self, app: ASGIApp, router: Forwarded, *, max_body: int, metrics: RequestCounter | None) -> None:
        self._app = app
        self._router = router
        self._max_body = max_body
        self._metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket" or scope["path"] != CHANNEL_PATH:
            await self._app(scope, receive, send)
            return
        if (await receive())["type"] != "websocket.connect":
            return
        signature = next((value.decode("latin-1") for name, value in scope["headers"] if name == _SIGNATURE), None)
        if not self._router.verified(signature, HELLO):
            await send({"type": "websocket.close"})  # before the accept: answered 403
            return
        await send({"type": "websocket.accept"})

        async def write(message: bytes) -> bool:
            # Not bounded here: the server shields its socket writes, so no deadline could cut one. A node that reads
            # nothing loses the connection to the kernel instead (web/server.py, STALLED_PEER_TIMEOUT), and with it
            # the link: the write returns, and the disconnect ends the calls.
            await send({"type": "websocket.send", "bytes": message})
            return True

        replies = Outbox[ReplyFrame](write)
        reading_on: trio.CancelScope | None = None  # once this side ended the link
        async with trio.open_nursery() as link:
            async with trio.open_nursery() as calls:
                ended = await self._serve_calls(receive, calls, replies, _Limits())
                if ended is not None:
                    # Read on, dropping what comes, until the link is over: were the reading to stop, the server
                    # would stop reading the connection, and then wait to pass its end to this side, inside a write
                    # that the calls' ending waits for.
                    reading_on = await link.start(_read_to_the_end, receive)
                calls.cancel_scope.cancel()  # the caller is gone, or the link ended: nobody to answer
            if reading_on is not None:  # once no call can answer any more: nothing is sent on a closed link
                await send({"type": "websocket.close", "code": ended})
                reading_on.deadline = trio.current_time() + CLOSE_WITHIN

    async def _serve_calls(self, receive: Any, calls: trio.Nursery, replies: Outbox[ReplyFrame],
                           limits: _Limits) -> int | None:
        """Start answering the calls the link brings in ``calls``, until the calling node disconnects (None) or
        this side ends the link (the close code)."""
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return None
            try:
                frames = _calls_decoder.decode(message.get("bytes") or b"")
            except msgspec.DecodeError:
                return _NOT_A_CALL
            for frame in frames:
                try:
                    limits.calls.acquire_nowait()
                except trio.WouldBlock:
                    if limits.refusing == REFUSALS_PER_LINK:
                        log.warning("a node does not read the answers on its link: the link is ended",
                                    extra={"limit": REFUSALS_PER_LINK})
                        return _NOT_READING
                    if not limits.refused:  # once per link: the metrics count every one
                        limits.refused = True
                        log.warning("a node's calls on its link were over the limit: the calls beyond it are "
                                    "refused", extra={"limit": CALLS_PER_LINK})
                    self._count(503, time.perf_counter())
                    limits.refusals.append(frame.id)  # the id alone: the call's body is not kept
                    limits.refusing += 1
                else:
                    calls.start_soon(self._answer, frame, replies, limits.calls)
            if limits.refusals and not limits.answering_refusals:
                limits.answering_refusals = True
                calls.start_soon(self._refuse, replies, limits)

    async def _answer(self, frame: CallFrame, replies: Outbox[ReplyFrame], slots: trio.Semaphore) -> None:
        """Answer one call, its slot given back once the answer is written: each call is a request of its own, and
        this its boundary (one that fails is answered 500, and the link's other calls go on)."""
        try:
            started = time.perf_counter()
            if len(frame.body) > self._max_body:
                status, body = _TOO_LARGE
            else:
                try:
                    status, body = await self._router.serve(frame.signature, frame.body)
                except Exception:
                    log.exception("a forwarded call failed", extra={"call": frame.id})
                    status, body = _FAILED
            self._count(status, started)
            await replies.put(ReplyFrame(frame.id, status, body))
        finally:
            slots.release()

    async def _refuse(self, replies: Outbox[ReplyFrame], limits: _Limits) -> None:
        """Answer the calls refused beyond the link's limit, without running them, until none is left."""
        try:
            while limits.refusals:
                call_ids = limits.refusals[:_REFUSALS_AT_ONCE]
                del limits.refusals[:_REFUSALS_AT_ONCE]
                try:
                    await replies.put_all([ReplyFrame(call_id, *_BUSY) for call_id in call_ids])
                finally:
                    limits.refusing -= len(call_ids)
        finally:
            limits.answering_refusals = False

    def _count(self, status: int, started: float) -> None:
        # Counted as its answer is ready, before it may wait for a message to go in.
        if self._metrics is not None:
            self._metrics.request_done(CHANNEL_PATH, "CALL", status, time.perf_counter() - started)


async def _read_to_the_end(receive: Any, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
    """Read a link's messages, dropping them, until the calling node disconnects or the scope given out is done."""
    with trio.CancelScope() as scope:
        task_status.started(scope)
        while (await receive())["type"] != "websocket.disconnect":
            pass
