"""One HTTP/1.1 POST whose answer is read line by line as it arrives: the carrier of a watch.

Written on a Trio stream and h11 rather than on httpx, whose streamed bodies are layers of async generators: a watch
leaves its stream while the stream still runs (a reconnect, the caller leaving its loop), and a suspended generator
cannot be closed from outside its own layer. Here closing is closing the socket. Every failure of the connection
(refused, reset, cut in the middle of a chunk, not HTTP) is a ``StreamFailed``.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import h11
import trio

from controller.etcd.connection import ConnectFailed, connect

__all__ = ["LineStream", "StreamFailed"]

_RECEIVE_SIZE = 65536


class StreamFailed(Exception):
    """The connection failed, or what came over it is not a well-formed HTTP answer."""


class LineStream:
    """An open POST: its answer's ``status``, then its body line by line. Close it with ``aclose``."""

    def __init__(self, stream: trio.abc.Stream, connection: h11.Connection, status: int) -> None:
        self._stream = stream
        self._connection = connection
        self.status = status
        self._buffer = b""
        self._ended = False

    @classmethod
    async def open(cls, url: str, body: bytes, *, headers: dict[str, str], ssl_context: ssl.SSLContext,
                   connect_timeout: float) -> LineStream:
        """POST ``body`` to ``url`` and return once the answer's status line and headers have come."""
        parts = urlsplit(url)
        try:
            stream = await connect(parts.scheme, parts.hostname or "",
                                   parts.port or (443 if parts.scheme == "https" else 80), ssl_context,
                                   connect_timeout=connect_timeout)
        except ConnectFailed as error:
            raise StreamFailed(f"cannot connect to {url}: {error}") from error
        connection = h11.Connection(h11.CLIENT)
        request = h11.Request(method="POST", target=parts.path or "/", headers=[
            ("Host", parts.netloc), ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
            *headers.items()])
        opened = cls(stream, connection, status=0)
        try:
            await stream.send_all(connection.send(request) + connection.send(h11.Data(data=body))
                                  + connection.send(h11.EndOfMessage()))
            event = await opened._next_event()
        except BaseException:
            await opened.aclose()
            raise
        if not isinstance(event, h11.Response):
            await opened.aclose()
            raise StreamFailed(f"{url} answered {event!r} instead of a status line")
        opened.status = event.status_code
        return opened

    async def read_line(self) -> bytes | None:
        """The next line of the body (without its newline); None once the body has ended."""
        while b"\n" not in self._buffer:
            if self._ended:
                rest, self._buffer = self._buffer, b""
                return rest or None
            event = await self._next_event()
            if isinstance(event, h11.Data):
                self._buffer += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._ended = True
            else:
                raise StreamFailed(f"the stream ended without finishing its body: {event!r}")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    async def read_all(self) -> bytes:
        """The rest of the body (an error answer's)."""
        lines = []
        while (line := await self.read_line()) is not None:
            lines.append(line)
        return b"\n".join(lines)

    async def _next_event(self) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
        try:
            while True:
                event = self._connection.next_event()
                if event is h11.NEED_DATA:
                    self._connection.receive_data(bytes(await self._stream.receive_some(_RECEIVE_SIZE)))
                    continue
                return event
        except (OSError, h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError,
                ssl.SSLError) as error:
            raise StreamFailed(f"the stream broke: {error!r}") from error

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._stream.aclose()
