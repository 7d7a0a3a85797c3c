"""The internal channel's links: one WebSocket to each other node, carrying many calls at once.

A node reaches another at :data:`CHANNEL_PATH` on that node's own listener (its ``internal_address``), upgraded to a
WebSocket whose opening request is signed (:data:`HELLO`, ``controller/cluster/call_signing.py``); the serving side is
``web/internal_channel.py``. Each call is one binary message, a :class:`CallFrame` (an id this link chose, the call's
signature and its JSON body), and its answer one :class:`ReplyFrame` with the same id, in whatever order the other
node finishes them: a slow call holds back no other. A call therefore costs one message each way on a connection
that stays open, instead of an HTTP request and answer through both nodes' HTTP stacks.

:class:`ChannelLinks` keeps the links. A caller asks for a link; one not open yet is opened by the links' own task
(:meth:`ChannelLinks.run`), never by the caller, which waits for it within the connect timeout. A link that fails
(the other node died, closed it, or sent something that is not a frame) is dropped with every call waiting on it
answered None ("not reached, or broken before the answer": the router asks the shard's next holder), and the next
call opens a new one. A caller cancelled while it waits leaves the link as it is; the answer, if it comes, is
dropped. A link whose write was cancelled half-way cannot be trusted to frame the next one, so it is dropped too.
"""

from __future__ import annotations

import itertools
import logging
import math
import ssl
from collections.abc import Callable

import msgspec
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Message, Ping, RejectConnection, Request

from controller.cluster.call_signing import SIGNATURE_HEADER
from controller.etcd import ConnectFailed, connect, split_url

__all__ = ["CHANNEL_PATH", "HELLO", "CallFrame", "ChannelLinks", "ReplyFrame"]

log = logging.getLogger("tollgate.cluster")

CHANNEL_PATH = "/edge/internal/v1/channel"  # under /edge: no legacy-path rewrite (web/legacy_paths.py)
HELLO = b"tollgate internal channel"
"""What the signature of a link's opening request signs."""
_RECEIVE_SIZE = 65536


class CallFrame(msgspec.Struct, array_like=True, frozen=True):
    """One call: ``id`` (the link's own), its ``signature`` (``call_signing.signature`` over ``body``), ``body``."""

    id: int
    signature: str
    body: bytes


class ReplyFrame(msgspec.Struct, array_like=True, frozen=True):
    """The answer to the call ``id``: an HTTP-like status and a JSON body, as ``RoutedPosture.serve`` gives them."""

    id: int
    status: int
    body: bytes


_call_encoder = msgspec.msgpack.Encoder()
_reply_decoder = msgspec.msgpack.Decoder(ReplyFrame)


class _Answer:
    """Where one call's answer lands: set once, with the reply, or None when the link broke first."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: tuple[int, bytes] | None = None

    def give(self, reply: tuple[int, bytes] | None) -> None:
        if not self.done.is_set():
            self.reply = reply
            self.done.set()


class _Link:
    """One WebSocket to one node; lives as long as its task in :meth:`ChannelLinks.run` (:meth:`serve`)."""

    def __init__(self, address: str, sign: Callable[[bytes], str]) -> None:
        self.address = address
        self._sign = sign
        self.open = trio.Event()  # set once the link is up, or has failed
        self.usable = False
        self._stream: trio.abc.Stream | None = None
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._ids = itertools.count()
        self._waiting: dict[int, _Answer] = {}
        self._sending = trio.Lock()
        self._stop = trio.CancelScope()

    async def serve(self, ssl_context: ssl.SSLContext, connect_timeout: float) -> None:
        """Open the link, then read answers until it fails or is dropped; every call still waiting then gets None."""
        with self._stop:
            try:
                await self._open(ssl_context, connect_timeout)
                self.usable = True
                self.open.set()
                await self._read()
            except (ConnectFailed, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                    ssl.SSLError, OSError, msgspec.DecodeError, _Refused) as error:
                log.info("an internal channel link failed", extra={"address": self.address, "error": repr(error)})
            finally:
                self.drop()
                if self._stream is not None:
                    await trio.aclose_forcefully(self._stream)

    def drop(self) -> None:
        """Take the link out of use: calls waiting on it get None, and its task ends."""
        self.usable = False
        self.open.set()
        waiting, self._waiting = self._waiting, {}
        for answer in waiting.values():
            answer.give(None)
        self._stop.cancel()

    async def call(self, body: bytes) -> tuple[int, bytes] | None:
        """Send one call and wait for its answer; None if the link is not open, or broke before the answer came."""
        if not self.usable:
            return None
        call_id = next(self._ids)
        answer = _Answer()
        self._waiting[call_id] = answer
        try:
            frame = _call_encoder.encode(CallFrame(call_id, self._sign(body), body))
            if not await self._send(self._ws.send(Message(data=frame))):
                return None
            await answer.done.wait()
            return answer.reply
        finally:
            self._waiting.pop(call_id, None)

    async def _send(self, data: bytes) -> bool:
        """Write ``data`` whole: False if the link is (or became) unusable."""
        stream = self._stream
        if not self.usable or stream is None:
            return False
        async with self._sending:
            whole = False
            try:
                await stream.send_all(data)
                whole = True
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                if not whole:  # broken, or cancelled half-way: the next frame could not be told from this one's rest
                    self.drop()
        return whole

    async def _open(self, ssl_context: ssl.SSLContext, connect_timeout: float) -> None:
        scheme, host, port, base = split_url(self.address)
        self._stream = stream = await connect(scheme, host, port, ssl_context, connect_timeout=connect_timeout)
        with trio.fail_after(connect_timeout):
            await stream.send_all(self._ws.send(Request(
                host=f"{host}:{port}", target=base + CHANNEL_PATH,
                extra_headers=[(SIGNATURE_HEADER.encode("ascii"), self._sign(HELLO).encode("ascii"))])))
            while True:
                for event in await self._events(stream):
                    if isinstance(event, AcceptConnection):
                        return
                    if isinstance(event, RejectConnection):
                        raise _Refused(f"the node refused the link: {event.status_code}")

    async def _read(self) -> None:
        stream = self._stream
        assert stream is not None
        parts = bytearray()
        while True:
            for event in await self._events(stream):
                if isinstance(event, BytesMessage):
                    parts += event.data
                    if event.message_finished:
                        reply = _reply_decoder.decode(bytes(parts))
                        parts.clear()
                        answer = self._waiting.pop(reply.id, None)
                        if answer is not None:
                            answer.give((reply.status, reply.body))
                elif isinstance(event, Ping):
                    await self._send(self._ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    raise _Refused(f"the node closed the link: {event.code}")
                else:
                    raise _Refused(f"unexpected on the link: {type(event).__name__}")

    async def _events(self, stream: trio.abc.Stream) -> list[object]:
        data = await stream.receive_some(_RECEIVE_SIZE)
        if not data:
            raise trio.BrokenResourceError("the node closed the connection")
        self._ws.receive_data(bytes(data))
        return list(self._ws.events())


class _Refused(Exception):
    """The other node refused the link, closed it, or sent something that does not belong on it."""


class ChannelLinks:
    """The links from this node to the others, by address.

    Args:
        ssl_context: what ``https`` addresses are checked against (the network CA).
        sign: the signature of a body (``call_signing.signature`` with the network's key, at the current time).
        connect_timeout: seconds a link may take to open.
    """

    def __init__(self, ssl_context: ssl.SSLContext, sign: Callable[[bytes], str], *, connect_timeout: float) -> None:
        self._ssl = ssl_context
        self._sign = sign
        self._connect_timeout = connect_timeout
        self._links: dict[str, _Link] = {}
        self._opening, self._to_open = trio.open_memory_channel[_Link](math.inf)
        self._running = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the links callers ask for and hold them, until cancelled (then every link is closed)."""
        async with trio.open_nursery() as links:
            self._running = True
            task_status.started()
            try:
                async for link in self._to_open:
                    links.start_soon(self._hold, link)
            finally:
                self._running = False
                for link in list(self._links.values()):
                    link.drop()
                self._links.clear()

    async def _hold(self, link: _Link) -> None:
        try:
            await link.serve(self._ssl, self._connect_timeout)
        finally:
            if self._links.get(link.address) is link:
                del self._links[link.address]

    async def call(self, address: str, body: bytes) -> tuple[int, bytes] | None:
        """The status and body the node at ``address`` answered ``body`` with; None if it was not reached (or the
        links are not running), or the link broke before the answer."""
        link = self._links.get(address)
        if link is None or not (link.usable or not link.open.is_set()):
            if not self._running:
                return None
            link = self._links[address] = _Link(address, self._sign)
            self._opening.send_nowait(link)
        await link.open.wait()
        return await link.call(body)
