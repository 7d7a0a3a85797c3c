"""A watch that outlives the member it is attached to: every event of a key range once, in revision order.

``WatchCursor`` is the rule, with no I/O: it knows up to which revision everything has been delivered, drops events
a reconnected stream delivers again (etcd 3.4.23 has known bugs that do so), and refuses a message whose revisions
go back. ``Watch`` is the shell: a ``POST /v3/watch`` stream read line by line, and when the stream ends, breaks,
says its member lost its leader, or (with ``idle_timeout``) stays silent too long, a new stream on the next member
from the first revision not yet delivered. The watch gives up with ``Unavailable`` when every member in turn failed
to carry it, and with ``Compacted`` when the history it needs is gone: then re-read and watch again from the
revision of that read.

    async with client.watch(b"prefix/", prefix=True, start_revision=rev) as watch:
        async for update in watch:
            ...  # update.events, update.revision
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import TracebackType

import trio

from controller.etcd.answers import WatchMessage, decode_error, decode_watch_line
from controller.etcd.bodies import encode, watch_create_body
from controller.etcd.errors import EtcdError, ProtocolError, Unavailable
from controller.etcd.model import Range, WatchUpdate
from controller.etcd.stream import LineStream, StreamFailed
from controller.etcd.transport import Transport

__all__ = ["OutOfOrder", "Watch", "WatchCursor"]

_ROUND_PAUSE = 0.25


class OutOfOrder(ProtocolError):
    """A watch message's events went back in revision: the stream cannot be trusted and is restarted."""


@dataclass
class WatchCursor:
    """How far a watch has got. ``delivered``: every event at or below this revision has been handed out (events
    of one revision always come in one message)."""

    delivered: int
    duplicates: int = 0

    @classmethod
    def starting_at(cls, start_revision: int) -> WatchCursor:
        """A cursor for a watch from ``start_revision`` (0: from the revision current when it is created)."""
        return cls(delivered=max(start_revision - 1, 0))

    @property
    def resume_revision(self) -> int:
        """The start revision of a new stream that continues this watch (0: from now on, not yet created)."""
        return self.delivered + 1 if self.delivered else 0

    def created(self, message: WatchMessage) -> None:
        """A stream was created. A watch from "now" has delivered everything up to that stream's revision."""
        if not self.delivered:
            self.delivered = message.header.revision

    def advance(self, message: WatchMessage) -> WatchUpdate | None:
        """The update a message makes, or None if it brings nothing new (events already delivered, a progress
        notification from a member behind the last one). OutOfOrder if its events' revisions go back."""
        if not message.events:  # a progress notification: nothing at or below its revision is still to come
            if message.header.revision <= self.delivered:
                return None
            self.delivered = message.header.revision
            return WatchUpdate(revision=self.delivered, events=())
        floor = self.delivered
        latest = floor
        fresh = []
        for event in message.events:
            revision = event.kv.mod_revision
            if revision <= floor:
                self.duplicates += 1
                continue
            if revision < latest:
                raise OutOfOrder(f"watch events went back from revision {latest} to {revision}")
            fresh.append(event)
            latest = revision
        if not fresh:
            return None
        self.delivered = latest
        return WatchUpdate(revision=latest, events=tuple(fresh))


class Watch:
    """One watch over a key or range: an async iterator of ``WatchUpdate``, used as an async context manager.

    Entering it returns once a member has created the watch: events from then on (or from ``start_revision``) are
    delivered. ``endpoint`` is the member the stream is on; ``cursor`` tells how far the watch got. While no member
    carries the watch (an election, a lost quorum) it tries them in turn, pausing briefly after each round, and
    raises ``Unavailable`` once that has lasted ``unavailable_timeout`` seconds."""

    def __init__(self, transport: Transport, request: Range, *, start_revision: int = 0, prev_kv: bool = False,
                 progress_notify: bool = True, idle_timeout: float | None = None, create_timeout: float = 5.0,
                 unavailable_timeout: float = 10.0) -> None:
        self._transport = transport
        self._request = request
        self._prev_kv = prev_kv
        self._progress_notify = progress_notify
        self._idle_timeout = idle_timeout if idle_timeout is not None else math.inf
        self._create_timeout = create_timeout
        self._unavailable_timeout = unavailable_timeout
        self.cursor = WatchCursor.starting_at(start_revision)
        self.endpoint: str | None = None
        self.reconnects = 0
        self._stream: LineStream | None = None
        self._trouble_since: float | None = None  # when the watch last lost its stream, until a message comes
        self._failures: list[EtcdError] = []

    async def __aenter__(self) -> Watch:
        await self._connect()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self._disconnect()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchUpdate:
        while True:
            line = await self._next_line()
            if line is None:
                continue
            try:
                message = decode_watch_line(line, endpoint=self.endpoint)
                update = self.cursor.advance(message)
            except (Unavailable, OutOfOrder) as error:  # the member lost its leader, or the stream went wrong
                await self._reconnect(error)
                continue
            self._trouble_since = None
            self._failures.clear()
            if update is not None:
                return update

    async def _next_line(self) -> bytes | None:
        """The next line of the stream; None (after reconnecting) when the stream ended, broke or stayed silent."""
        if self._stream is None:
            await self._connect()
        assert self._stream is not None
        with trio.move_on_after(self._idle_timeout) as idle:
            try:
                line = await self._stream.read_line()
            except StreamFailed as error:
                await self._reconnect(Unavailable(f"the watch stream broke: {error}", endpoint=self.endpoint))
                return None
        if idle.cancelled_caught:
            await self._reconnect(Unavailable(f"the watch stream was silent for {self._idle_timeout} s",
                                              endpoint=self.endpoint))
            return None
        if line is None:
            await self._reconnect(Unavailable("the watch stream ended", endpoint=self.endpoint))
            return None
        return line if line.strip() else None

    async def _reconnect(self, failure: EtcdError) -> None:
        if self._trouble_since is None:
            self._trouble_since = trio.current_time()
        self._failures.append(failure)
        if self.endpoint is not None:
            self._transport.rotate(self.endpoint)
        await self._disconnect()
        self.reconnects += 1
        await self._connect()

    async def _connect(self) -> None:
        """Create the watch from the first revision not yet delivered, on the current member or the next ones."""
        body = encode(watch_create_body(self._request, start_revision=self.cursor.resume_revision,
                                        prev_kv=self._prev_kv, progress_notify=self._progress_notify))
        give_up_at = (self._trouble_since or trio.current_time()) + self._unavailable_timeout
        with trio.move_on_at(give_up_at):
            while True:
                for _ in self._transport.endpoints:
                    endpoint = self._transport.current
                    try:
                        with trio.fail_after(self._create_timeout):
                            await self._open(endpoint, body)
                        return
                    except (trio.TooSlowError, StreamFailed) as error:
                        self._failures.append(Unavailable(f"cannot create the watch: {error!r}", endpoint=endpoint))
                    except Unavailable as error:
                        self._failures.append(error)
                    self._transport.rotate(endpoint)
                # Every member refused, most often for want of a leader: an election takes about a second, so
                # pause rather than ask again at once.
                await trio.sleep(_ROUND_PAUSE)
        await self._disconnect()
        reasons = "; ".join(str(failure) for failure in self._failures[-len(self._transport.endpoints):])
        raise Unavailable(f"no etcd member carried the watch for {self._unavailable_timeout} s: {reasons}")

    async def _open(self, endpoint: str, body: bytes) -> None:
        """Open a stream on ``endpoint`` and read its created message; the stream is closed if that fails."""
        self.endpoint = endpoint
        self._stream = await self._transport.open_stream(endpoint, "/v3/watch", body)
        try:
            await self._read_created(self._stream, endpoint)
        except BaseException:
            await self._disconnect()
            raise

    async def _read_created(self, stream: LineStream, endpoint: str) -> None:
        if stream.status != 200:
            raise decode_error(stream.status, await stream.read_all(), write=False, endpoint=endpoint)
        line = b""
        while not line.strip():
            read = await stream.read_line()
            if read is None:
                raise StreamFailed("the watch stream ended before the watch was created")
            line = read
        message = decode_watch_line(line, endpoint=endpoint)
        if not message.created:
            raise ProtocolError(f"a watch stream began without its created message: {line[:200]!r}",
                                endpoint=endpoint)
        self.cursor.created(message)

    async def _disconnect(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.aclose()
