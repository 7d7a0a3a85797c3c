"""The internal channel's links: one WebSocket to each other node, carrying many calls at once.

A node reaches another at :data:`CHANNEL_PATH` on that node's own listener (its ``internal_address``), upgraded to a
WebSocket whose opening request is signed (:data:`HELLO`, ``controller/cluster/call_signing.py``); the serving side is
``web/internal_channel.py``. Each call is one binary message, a :class:`~controller.cluster.channel_messages.CallFrame`
(an id this link chose, the call's signature and its JSON body), and its answer one
:class:`~controller.cluster.channel_messages.ReplyFrame` with the same id, in whatever order the other node finishes
them: a slow call holds back no other. Frames go in messages through an
:class:`~controller.cluster.channel_messages.Outbox`, on both sides: the frames added while a message is being written,
or in the same scheduler turn, go together in the next one (a list of frames), so calls that a node's requests make at
about the same time reach the other node together, and are decided together (their writes in one batch), as they would
be over separate connections. A call therefore costs a share of one message each way on a connection that stays open,
instead of an HTTP request and answer through both nodes' HTTP stacks.

:class:`ChannelLinks` keeps the links. A caller asks for a link; one not open yet is opened by the links' own task
(:meth:`ChannelLinks.run`), never by the caller, which waits for it within the connect timeout. A link that fails
(the other node died, closed it, or sent something that is not WebSocket frames of answers) is dropped with every
call waiting on it answered :class:`Unanswered`: ``NOT_SENT`` when the call never left whole (the other node did not
run it: it may go again at once), ``LOST`` when it did (the other node may have run it). The next call opens a new
link. A caller cancelled while it waits leaves the link as it is; the answer, if it comes, is dropped; a message
already taken is written whole all the same. A link whose write broke off, or took more than :data:`WRITE_WITHIN` (the
other node reads nothing), cannot frame the next message, so it is dropped too (and logged, as every link that fails).
A link on which nothing arrived for :data:`QUIET_BEFORE_PING` seconds is pinged (the other node's server answers a ping
itself, however busy its calls are, as long as it reads the link, which ``web/internal_channel.py`` always does), and
one that still brings nothing :data:`PING_ANSWER_WITHIN` seconds later is dropped: a node that stopped, or a connection
that died without a word, is found then, instead of calls waiting on it until their callers give up and the next calls
being written into it. The reading never waits to write: a ping, or the answer to the other node's own ping, is written
by a task of the link's own, a ping in the stream's turn taken as it is decided (so no message goes first, and the wait
for its answer counts no other write), and none while a message is being written. (Over TLS, what arrives is counted in
whole records, of at most 16 KiB: a link that carries less than about 3 KB/s is taken for dead too.)
"""

from __future__ import annotations

import enum
import itertools
import logging
import math
import ssl
from collections.abc import Callable

import msgspec
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    Pong,
    RejectConnection,
    Request,
)
from wsproto.utilities import RemoteProtocolError

from controller.cluster.call_signing import SIGNATURE_HEADER
from controller.cluster.channel_messages import CallFrame, Outbox, ReplyFrame
from controller.etcd import ConnectFailed, connect, split_url

__all__ = ["CHANNEL_PATH", "HELLO", "PING_ANSWER_WITHIN", "QUIET_BEFORE_PING", "WRITE_WITHIN", "ChannelLinks",
           "Unanswered"]

log = logging.getLogger("tollgate.cluster")

CHANNEL_PATH = "/edge/internal/v1/channel"  # under /edge: no legacy-path rewrite (web/legacy_paths.py)
HELLO = b"tollgate internal channel"
"""What the signature of a link's opening request signs."""
_RECEIVE_SIZE = 65536
WRITE_WITHIN = 5.0
"""Seconds a link may take to write one message: a node that reads nothing for that long is taken for gone."""
QUIET_BEFORE_PING = 1.0
"""Seconds without anything from the other node after which a link pings it."""
PING_ANSWER_WITHIN = 5.0
"""Seconds a pinged node has to send something (its pong, or anything else) before its link is taken for dead: as
long as a message may take to write, since a node too busy to answer a ping is as slow to read."""


_replies_decoder = msgspec.msgpack.Decoder(list[ReplyFrame])


class Unanswered(enum.Enum):
    """Why a call got no answer."""

    NOT_SENT = "not sent"
    """It never left this node whole (no link, or the message holding it was not written whole): the other node did
    not run it."""
    LOST = "lost"
    """The link broke after it left: the other node may have run it."""


class _Answer:
    """Where one call's answer lands: set once, with the reply, or ``LOST`` when the link broke first."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: tuple[int, bytes] | Unanswered = Unanswered.LOST

    def give(self, reply: tuple[int, bytes] | Unanswered) -> None:
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
        self._logged = False  # why it failed
        self._unanswered_ping: bytes | None = None  # the payload of the latest ping from the other node
        self._answering_pings = False
        self._stream: trio.abc.Stream | None = None
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._ids = itertools.count()
        self._waiting: dict[int, _Answer] = {}
        self._outbox = Outbox[CallFrame](self._write)
        # One writer of the stream at a time (a message, a ping or a pong). Not a Lock: the reader takes the turn
        # for the ping task it starts, so that no message goes between.
        self._turn = trio.Semaphore(1)
        self._stop = trio.CancelScope()

    async def serve(self, ssl_context: ssl.SSLContext, connect_timeout: float) -> None:
        """Open the link, then read answers until it fails or is dropped; every call still waiting then gets
        ``LOST``."""
        try:
            with self._stop:
                await self._open(ssl_context, connect_timeout)
                self.usable = True
                self.open.set()
                async with trio.open_nursery() as pings:  # written beside the reading, which never waits for them
                    await self._read(pings)
        except* (ConnectFailed, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError,
                 RemoteProtocolError, msgspec.DecodeError, _Refused) as failed:
            self._failed(failed.exceptions[0])
        finally:
            self.drop()  # outside the link's own scope, which it cancels: what ended the link is not masked
            if self._stream is not None:
                await trio.aclose_forcefully(self._stream)

    def _failed(self, error: BaseException) -> None:
        """Log why the link failed, once: a write and the reading may both find a connection broken."""
        if not self._logged:
            self._logged = True
            log.info("an internal channel link failed", extra={"address": self.address, "error": repr(error)})

    @property
    def failed(self) -> bool:
        """Whether the link is out of use for good: it failed to open, broke, or was dropped."""
        return self.open.is_set() and not self.usable

    def drop(self) -> None:
        """Take the link out of use: calls waiting on it get ``LOST`` (or ``NOT_SENT``, theirs never written whole),
        and its task ends."""
        self.usable = False
        self.open.set()
        waiting, self._waiting = self._waiting, {}
        for answer in waiting.values():
            answer.give(Unanswered.LOST)
        self._stop.cancel()

    async def call(self, body: bytes) -> tuple[int, bytes] | Unanswered:
        """Send one call and wait for its answer: :class:`Unanswered` if the link is not open, or broke before the
        answer came."""
        if not self.usable:
            return Unanswered.NOT_SENT
        call_id = next(self._ids)
        answer = _Answer()
        self._waiting[call_id] = answer
        try:
            if not await self._outbox.put(CallFrame(call_id, self._sign(body), body)):
                return Unanswered.NOT_SENT
            await answer.done.wait()
            return answer.reply
        finally:
            self._waiting.pop(call_id, None)

    async def _write(self, message: bytes) -> bool:
        return await self._send(Message(data=message))

    async def _send(self, event: Event) -> bool:
        """:meth:`_send_in_turn` once the stream's turn is free (its holder's write is bounded)."""
        async with self._turn:
            return await self._send_in_turn(event)

    async def _answer_pings(self) -> None:
        """Answer the latest ping, and again while more come meanwhile."""
        try:
            while (payload := self._unanswered_ping) is not None:
                self._unanswered_ping = None
                if not await self._send(Pong(payload=payload)):
                    return
        finally:
            self._answering_pings = False

    async def _ping(self) -> None:
        """Write a ping in the turn the reader took for it."""
        try:
            await self._send_in_turn(Ping())
        finally:
            self._turn.release()

    async def _send_in_turn(self, event: Event) -> bool:
        """Write ``event`` whole within :data:`WRITE_WITHIN` seconds, holding the stream's turn, or drop the link:
        the calls waiting on it then get ``LOST``. Framed only while the link is usable (once the other node closed
        it, WebSocket frames no more of it). Whether it was written whole: a message cut short is never read as one
        by the other node."""
        stream = self._stream
        whole = False
        broke: Exception | None = None
        bound = trio.move_on_after(WRITE_WITHIN)
        try:
            with bound:
                if self.usable and stream is not None:
                    try:
                        await stream.send_all(self._ws.send(event))
                        whole = True
                    except (trio.BrokenResourceError, trio.ClosedResourceError) as error:  # dropped below
                        broke = error
        finally:
            if not whole:  # broken, too slow (the other node reads nothing), or cut: what follows could not be framed
                if self.usable and (broke is not None or bound.cancelled_caught):  # this write found it: say how
                    self._failed(broke or trio.TooSlowError(f"a message took more than {WRITE_WITHIN} s to write"))
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

    async def _read(self, pings: trio.Nursery) -> None:
        stream = self._stream
        assert stream is not None
        parts = bytearray()
        pinged = False  # and nothing arrived since
        while True:
            # Cancelling a read between two records leaves the stream as it was (TLS 1.3 renegotiates nothing).
            with trio.move_on_after(PING_ANSWER_WITHIN if pinged else QUIET_BEFORE_PING) as quiet:
                events = await self._events(stream)
            if quiet.cancelled_caught:
                if pinged:
                    raise trio.TooSlowError("the node answered no ping")
                try:
                    self._turn.acquire_nowait()  # taken now: no message goes first, to count in the ping's wait
                except trio.WouldBlock:  # a message is being written, within its own bound: ping once it is out
                    continue
                # Not written here: a ping waiting for room in the connection would stop the reading, and the other
                # node's answers, which may be what holds that room, would then wait for the ping.
                pinged = True
                pings.start_soon(self._ping)
                continue
            pinged = False
            for event in events:
                if isinstance(event, BytesMessage):
                    parts += event.data
                    if event.message_finished:
                        replies = _replies_decoder.decode(bytes(parts))
                        parts.clear()
                        for reply in replies:
                            answer = self._waiting.pop(reply.id, None)
                            if answer is not None:
                                answer.give((reply.status, reply.body))
                elif isinstance(event, Ping):
                    # Written as a ping is, so that the reading never waits to write; of the pings that come before
                    # a pong could go, the latest alone is answered (RFC 6455 allows it), so that none piles up.
                    self._unanswered_ping = event.payload
                    if not self._answering_pings:
                        self._answering_pings = True
                        pings.start_soon(self._answer_pings)
                elif isinstance(event, Pong):
                    pass  # that the node is there is all it says, and anything arriving says that
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

    async def call(self, address: str, body: bytes) -> tuple[int, bytes] | Unanswered:
        """The status and body the node at ``address`` answered ``body`` with; ``NOT_SENT`` if it was not reached
        (or the links are not running), ``LOST`` if the link broke after the call left."""
        link = self._links.get(address)
        if link is None or link.failed:
            if not self._running:
                return Unanswered.NOT_SENT
            link = self._links[address] = _Link(address, self._sign)
            self._opening.send_nowait(link)
        await link.open.wait()
        return await link.call(body)
