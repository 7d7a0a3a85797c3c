"""How a link of the internal channel finds that the other node is gone when nothing says so
(``controller/cluster/channel.py``): it pings a node that sent nothing for a while, and drops a link that then still
brings nothing, answering its calls ``LOST``; a node that answers pings keeps its link however long a call takes.
On virtual time, the link's connection an in-memory stream to a node played by the test."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Message, Ping, Pong, Request

from controller.cluster import channel
from controller.cluster.channel import PING_ANSWER_WITHIN, QUIET_BEFORE_PING, WRITE_WITHIN, ChannelLinks, Unanswered
from controller.cluster.channel_messages import CallFrame, ReplyFrame

ADDRESS = "http://peer:1"


class Peer:
    """The other node's end of one link: accepts it, notes when each ping and call arrives, answers pings if
    ``pongs``, and answers each call ``answer_after`` seconds after it arrives (never, if None); pings the link
    ``ping_at`` seconds after accepting it, if given."""

    def __init__(self, stream: trio.abc.Stream, *, pongs: bool, answer_after: float | None,
                 deaf_after_call: float = 0.0, ping_at: float | None = None) -> None:
        self._stream = stream
        self._ws = WSConnection(ConnectionType.SERVER)
        self._pongs = pongs
        self._answer_after = answer_after
        self._deaf_after_call = deaf_after_call  # seconds it reads nothing after a message of calls
        self._ping_at = ping_at  # seconds after the link opened at which it pings the link itself, if ever
        self._writing = trio.Lock()
        self.pings: list[float] = []
        self.calls: list[float] = []

    async def run(self) -> None:
        async with trio.open_nursery() as answers:
            while data := await self._stream.receive_some(65536):
                self._ws.receive_data(data)
                for event in self._ws.events():
                    if isinstance(event, Request):
                        await self._write(self._ws.send(AcceptConnection()))
                        if self._ping_at is not None:
                            answers.start_soon(self._ping, self._ping_at)
                    elif isinstance(event, Ping):
                        self.pings.append(trio.current_time())
                        if self._pongs:
                            await self._write(self._ws.send(event.response()))
                    elif isinstance(event, BytesMessage):
                        for call in msgspec.msgpack.decode(event.data, type=list[CallFrame]):
                            self.calls.append(trio.current_time())
                            if self._answer_after is not None:
                                answers.start_soon(self._answer, call.id)
                        await trio.sleep(self._deaf_after_call)

    async def _answer(self, call_id: int) -> None:
        assert self._answer_after is not None
        await trio.sleep(self._answer_after)
        reply = msgspec.msgpack.encode([ReplyFrame(call_id, 200, b'{"data":{}}')])
        await self._write(self._ws.send(Message(data=reply)))

    async def _ping(self, after: float) -> None:
        await trio.sleep(after)
        await self._write(self._ws.send(Ping()))

    async def _write(self, data: bytes) -> None:
        async with self._writing:
            await self._stream.send_all(data)


@asynccontextmanager
async def links_reaching(monkeypatch: pytest.MonkeyPatch, node: Callable[[trio.abc.Stream], Awaitable[None]], *,
                         lockstep: bool = False) -> AsyncIterator[ChannelLinks]:
    """Running links whose every connection reaches a new task ``node(stream)``, the other node's end of it.
    ``lockstep``: a write on the connection waits until the other end has read all of it (a connection whose buffers
    are full), rather than going into a buffer without bound."""
    async with trio.open_nursery() as nursery:
        async def connect(*args: object, **kwargs: object) -> trio.abc.Stream:
            pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
            ours, theirs = pair()
            nursery.start_soon(node, theirs)
            return ours

        monkeypatch.setattr(channel, "connect", connect)
        links = ChannelLinks(None, lambda body: "signed", connect_timeout=5.0)  # type: ignore[arg-type]
        await nursery.start(links.run)
        with trio.fail_after(60):  # virtual seconds: a link never dropped fails the test rather than hang it
            yield links
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def linked(monkeypatch: pytest.MonkeyPatch, *, lockstep: bool = False,
                 **peer: Any) -> AsyncIterator[tuple[ChannelLinks, list[Peer]]]:
    """:func:`links_reaching` a new :class:`Peer` (``peer`` its arguments) on every connection: the links, and the
    peers in the order they were reached."""
    peers: list[Peer] = []

    async def new_peer(stream: trio.abc.Stream) -> None:
        peers.append(there := Peer(stream, **peer))
        await there.run()

    async with links_reaching(monkeypatch, new_peer, lockstep=lockstep) as links:
        yield links, peers


Reply = tuple[int, bytes] | Unanswered
ANSWER = (200, b'{"data":{}}')  # what a Peer answers a call


async def first_then_second(links: ChannelLinks) -> dict[str, tuple[Reply, float]]:
    """A call at once and another 0.5 s later: what each got, and when (seconds from the first)."""
    start = trio.current_time()
    answered: dict[str, tuple[Reply, float]] = {}

    async def call(name: str, after: float) -> None:
        await trio.sleep(after)
        answered[name] = await links.call(ADDRESS, b"{}"), trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "first", 0.0)
        nursery.start_soon(call, "second", 0.5)
    return answered


async def test_a_link_that_brings_nothing_is_pinged_then_dropped_with_its_calls_lost(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    async with linked(monkeypatch, pongs=False, answer_after=None) as (links, peers):
        start = trio.current_time()
        assert await links.call(ADDRESS, b"{}") is Unanswered.LOST
        assert trio.current_time() - start == QUIET_BEFORE_PING + PING_ANSWER_WITHIN
        [gone] = peers
        assert [at - start for at in gone.pings] == [QUIET_BEFORE_PING] and [at - start for at in gone.calls] == [0]
        # The next call opens a new link.
        assert await links.call(ADDRESS, b"{}") is Unanswered.LOST and len(peers) == 2


async def test_a_node_that_answers_pings_keeps_its_link_through_a_long_call(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    answer_after = 20.5
    async with linked(monkeypatch, pongs=True, answer_after=answer_after) as (links, peers):
        start = trio.current_time()
        assert await links.call(ADDRESS, b"{}") == (200, b'{"data":{}}')
        assert trio.current_time() - start == answer_after
        [there] = peers
        assert [at - start for at in there.pings] == [QUIET_BEFORE_PING * n for n in range(1, 21)]


async def test_an_idle_link_to_a_node_gone_silent_is_dropped_before_the_next_call(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    """Without a call waiting: the next call, made after the link was found dead, goes on a new link."""
    async with linked(monkeypatch, pongs=False, answer_after=0.0) as (links, peers):
        assert await links.call(ADDRESS, b"{}") == (200, b'{"data":{}}')
        await trio.sleep(QUIET_BEFORE_PING + PING_ANSWER_WITHIN + 0.5)  # past the drop, not at it
        assert await links.call(ADDRESS, b"{}") == (200, b'{"data":{}}')
        assert len(peers) == 2 and [len(peer.calls) for peer in peers] == [1, 1]


async def test_a_link_writing_a_message_the_node_does_not_read_yet_goes_on_reading_its_answers(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    """Buffers full: the node reads nothing for 3 s after the first call, so the second call's message waits to be
    written from 0.5 to 3. The first call's answer, written at 2, is read at 2: the link does not stop reading to
    ping while a message of its own is on its way (the node's answer would then wait for the ping, which waits for
    that message)."""
    async with linked(monkeypatch, lockstep=True, pongs=True, answer_after=2.0, deaf_after_call=3.0) as (links, _):
        answered = await first_then_second(links)
    assert answered == {"first": (ANSWER, 2.0), "second": (ANSWER, 5.0)}


async def test_a_link_waits_for_its_own_message_to_go_out_before_it_pings(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    """Buffers full: the node reads nothing for 4.5 s after each message of calls, and answers each call 8 s after
    reading it. The second call's message waits to be written from 0.5 to 4.5, within its bound; only then may the
    link ping (at 5), and the node's pong, read 4 s later, comes in time. Pinged at 1 instead, the ping's 5 s would
    have run out at 6, the ping still unread behind the message, and both calls been lost."""
    async with linked(monkeypatch, lockstep=True, pongs=True, answer_after=8.0, deaf_after_call=4.5) as (links, _):
        answered = await first_then_second(links)
    assert answered == {"first": (ANSWER, 8.0), "second": (ANSWER, 12.5)}


async def test_a_message_the_node_does_not_read_within_its_bound_drops_the_link(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture) -> None:
    """Buffers full: the node reads nothing for 6 s after the first call. The second call's message, waiting to be
    written from 0.5, is cut at 0.5 + WRITE_WITHIN: the link is dropped (and says why), the second call was not
    sent, and the first, which the node has, is lost."""
    caplog.set_level(logging.INFO, logger="tollgate.cluster")
    async with linked(monkeypatch, lockstep=True, pongs=True, answer_after=10.0, deaf_after_call=6.0) as (links, _):
        answered = await first_then_second(links)
    cut = 0.5 + WRITE_WITHIN
    assert answered == {"first": (Unanswered.LOST, cut), "second": (Unanswered.NOT_SENT, cut)}
    [failed] = [record for record in caplog.records if record.getMessage() == "an internal channel link failed"]
    assert "TooSlowError" in failed.error  # type: ignore[attr-defined]



async def test_a_link_pinged_by_the_node_goes_on_reading_while_its_pong_waits_to_be_written(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    """Buffers full: the node reads nothing for 3 s after the call, pings the link at 0.5 and answers the call at 2.
    The pong waits to be written until 3, and the answer is read at 2 all the same."""
    async with linked(monkeypatch, lockstep=True, pongs=True, answer_after=2.0, deaf_after_call=3.0,
                      ping_at=0.5) as (links, _):
        start = trio.current_time()
        assert await links.call(ADDRESS, b"{}") == (200, b'{"data":{}}')
        assert trio.current_time() - start == 2.0


async def test_a_link_broken_under_a_waiting_write_and_the_reading_at_once_is_logged_once(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture) -> None:
    """The node reads the first call, then nothing, and closes the connection at 0.2 while the second call's message
    waits to be written: the write and the reading both find it broken, whichever first. Twenty links, one line
    each."""
    caplog.set_level(logging.INFO, logger="tollgate.cluster")

    async def close_after_first_call(stream: trio.abc.Stream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        while data := await stream.receive_some(65536):
            ws.receive_data(bytes(data))
            for event in ws.events():
                if isinstance(event, Request):
                    await stream.send_all(ws.send(AcceptConnection()))
                elif isinstance(event, BytesMessage):
                    await trio.sleep(0.2)
                    await stream.aclose()
                    return

    async with links_reaching(monkeypatch, close_after_first_call, lockstep=True) as links:
        for _ in range(20):
            async with trio.open_nursery() as calls:
                calls.start_soon(links.call, ADDRESS, b"{}")
                await trio.sleep(0.1)
                calls.start_soon(links.call, ADDRESS, b"{}")
    failed = [record for record in caplog.records if record.getMessage() == "an internal channel link failed"]
    assert len(failed) == 20


async def test_pings_the_node_sends_faster_than_their_answers_can_go_are_answered_latest_first(
        monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    """The node pings the link a thousand times while it reads nothing, then reads: the first ping's answer, which
    waited, and one for the latest, nothing piled up between."""
    pongs: list[bytes] = []

    async def pinging_node(stream: trio.abc.Stream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        call: CallFrame | None = None
        while call is None:
            ws.receive_data(bytes(await stream.receive_some(65536)))
            for event in ws.events():
                if isinstance(event, Request):
                    await stream.send_all(ws.send(AcceptConnection()))
                elif isinstance(event, BytesMessage):
                    [call] = msgspec.msgpack.decode(event.data, type=list[CallFrame])
        for n in range(1000):
            await stream.send_all(ws.send(Ping(payload=b"%d" % n)))
        await trio.sleep(1.0)
        while len(pongs) < 2 or pongs[-1] != b"999":
            ws.receive_data(bytes(await stream.receive_some(65536)))
            pongs.extend(event.payload for event in ws.events() if isinstance(event, Pong))
        await stream.send_all(ws.send(Message(data=msgspec.msgpack.encode([ReplyFrame(call.id, 200, b"{}")]))))
        await trio.sleep_forever()

    async with links_reaching(monkeypatch, pinging_node, lockstep=True) as links:
        assert await links.call(ADDRESS, b"{}") == (200, b"{}")
    assert pongs == [b"0", b"999"]
