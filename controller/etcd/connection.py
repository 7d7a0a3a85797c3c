"""Keep-alive HTTP/1.1 connections for JSON calls, and the pool that holds them: etcd's gateway's unary calls.
:func:`connect` (a TCP stream, TLS if asked, within a timeout) also opens the cluster's internal channel's links.

A request goes out in one write (its head and body together) and its answer is read whole: a body of known length
or a chunked one, the two ways etcd's gateway (Go's HTTP server) frames an answer. Written for this subset on a Trio
stream rather than with a general HTTP client: a call to etcd is on the path of every replicated write and every
read barrier, and a general client's layers cost several times the work of the call itself here.

A connection is returned to its pool only after a whole answer was read from it; one that failed, was cancelled in
the middle of a call, or is closed by the member while it is idle is dropped. Failures say how far the call got:
``ConnectFailed`` (nothing was sent) or ``CallBroken`` (the request may have reached the member).
"""

from __future__ import annotations

import functools
import select
import socket
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import trio

__all__ = ["CallBroken", "ConnectFailed", "Connection", "ConnectionPool", "connect", "split_url"]

_RECEIVE_SIZE = 65536
_MAX_HEAD = 65536  # an answer's status line and headers, at most


@functools.lru_cache(maxsize=256)  # pure; the same few members' and nodes' URLs on every call
def split_url(url: str) -> tuple[str, str, int, str]:
    """An ``http://`` or ``https://`` URL's scheme, host, port and path (ValueError for anything else)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http:// or https:// URL: {url!r}")
    return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), parts.path


class ConnectFailed(Exception):
    """No connection could be made to the member: nothing was sent."""


async def connect(scheme: str, host: str, port: int, ssl_context: ssl.SSLContext | None, *,
                  connect_timeout: float) -> trio.abc.Stream:
    """A stream to ``host:port`` (TCP_NODELAY; for ``https``, with its TLS handshake done) within
    ``connect_timeout`` seconds; ConnectFailed if not, with nothing left open."""
    stream: trio.abc.Stream | None = None
    try:
        with trio.fail_after(connect_timeout):
            tcp = await trio.open_tcp_stream(host, port)
            tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = tcp
            if scheme == "https":
                stream = trio.SSLStream(tcp, ssl_context or ssl.create_default_context(), server_hostname=host)
                await stream.do_handshake()
    except BaseException as error:
        if stream is not None:
            await trio.aclose_forcefully(stream)
        if isinstance(error, (OSError, trio.TooSlowError, trio.BrokenResourceError, ssl.SSLError)):
            raise ConnectFailed(f"cannot connect to {host}:{port}: {error!r}") from error
        raise
    return stream


class CallBroken(Exception):
    """The connection failed, or what came over it is not a well-formed HTTP answer, after the request began to be
    sent: the member may have received it."""


class Connection:
    """One open connection to one member; :meth:`call` may be used again once it returned."""

    __slots__ = ("_buffer", "_host", "_stream", "reusable")

    def __init__(self, stream: trio.abc.Stream, host: str) -> None:
        self._stream = stream
        self._host = host  # the Host header's value
        self._buffer = bytearray()
        self.reusable = True  # false once the member said it closes the connection, or a call broke off

    @classmethod
    async def open(cls, scheme: str, host: str, port: int, ssl_context: ssl.SSLContext | None, *,
                   connect_timeout: float) -> Connection:
        """Connect (see :func:`connect`); ConnectFailed if not."""
        return cls(await connect(scheme, host, port, ssl_context, connect_timeout=connect_timeout), f"{host}:{port}")

    def closed_by_peer(self) -> bool:
        """Whether the member closed the connection (or sent something unasked) while it was idle: readable at
        rest means either, and neither leaves it usable."""
        if self._buffer:
            return True
        sock = _raw_socket(self._stream)
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def call(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        """POST ``body`` to ``path`` and return the answer's status and body. CallBroken if the connection fails
        or the answer is not HTTP; cancelled in the middle, the connection is left unusable (close it)."""
        self.reusable = False  # until the whole answer is in
        head = [f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n"]
        head += [f"{name}: {value}\r\n" for name, value in headers.items()]
        head.append("\r\n")
        try:
            await self._stream.send_all("".join(head).encode("latin-1") + body)
            status, answer, keep = await self._answer()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError) as error:
            raise CallBroken(f"the connection failed: {error!r}") from error
        self.reusable = keep
        return status, answer

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._stream)

    # -- reading an answer ---------------------------------------------------------------------------------------

    async def _answer(self) -> tuple[int, bytes, bool]:
        end = await self._until(b"\r\n\r\n", _MAX_HEAD)
        lines = bytes(self._buffer[:end]).split(b"\r\n")
        del self._buffer[:end + 4]
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise CallBroken(f"not an HTTP answer: {lines[0][:80]!r}")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise CallBroken(f"a malformed header line: {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        status = int(code)
        keep = version == b"HTTP/1.1" and headers.get(b"connection", b"").lower() != b"close"
        if status in (204, 304) or 100 <= status < 200:
            return status, b"", keep
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            return status, await self._chunked(), keep
        length = headers.get(b"content-length")
        if length is None:  # the body runs to the end of the connection
            return status, await self._to_end(), False
        if not length.isdigit():
            raise CallBroken(f"a malformed Content-Length: {length[:40]!r}")
        return status, await self._exactly(int(length)), keep

    async def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            end = await self._until(b"\r\n", 1024)
            size_text = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
            del self._buffer[:end + 2]
            try:
                size = int(size_text, 16)
            except ValueError as error:
                raise CallBroken(f"a malformed chunk size: {size_text[:40]!r}") from error
            if size == 0:
                while (end := await self._until(b"\r\n", _MAX_HEAD)) > 0:  # trailers, up to an empty line
                    del self._buffer[:end + 2]
                del self._buffer[:2]
                return b"".join(parts)
            parts.append(await self._exactly(size))
            if await self._exactly(2) != b"\r\n":
                raise CallBroken("a chunk does not end with CRLF")

    async def _until(self, marker: bytes, limit: int) -> int:
        """The position of ``marker`` in the buffer, reading until it is there (at most ``limit`` bytes before)."""
        start = 0
        while (found := self._buffer.find(marker, start)) < 0:
            if len(self._buffer) > limit:
                raise CallBroken("an answer's head or chunk line is too long")
            start = max(0, len(self._buffer) - len(marker) + 1)
            await self._receive()
        return found

    async def _exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            await self._receive()
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def _to_end(self) -> bytes:
        while data := await self._stream.receive_some(_RECEIVE_SIZE):
            self._buffer += data
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest

    async def _receive(self) -> None:
        data = await self._stream.receive_some(_RECEIVE_SIZE)
        if not data:
            raise CallBroken("the member closed the connection before the whole answer")
        self._buffer += data


def _raw_socket(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    return stream.socket if isinstance(stream, trio.SocketStream) else None


class ConnectionPool:
    """Idle connections per member, and a bound on the calls in progress (``max_connections``, waiting in arrival
    order beyond it). Close it with :meth:`aclose`."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None, connect_timeout: float, max_connections: int) -> None:
        self._ssl_context = ssl_context
        self._connect_timeout = connect_timeout
        self._slots = trio.Semaphore(max(1, max_connections))
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._closed = False

    async def call(self, scheme: str, host: str, port: int, path: str, body: bytes,
                   headers: Mapping[str, str]) -> tuple[int, bytes]:
        """POST on an idle connection to the server, or a new one; ConnectFailed or CallBroken as
        :class:`Connection` raises them."""
        async with self._slots:
            member = (scheme, host, port)
            idle = self._idle.setdefault(member, [])
            connection: Connection | None = None
            while idle:
                candidate = idle.pop()
                if not candidate.closed_by_peer():
                    connection = candidate
                    break
                await candidate.aclose()
            if connection is None:
                connection = await Connection.open(scheme, host, port, self._ssl_context,
                                                   connect_timeout=self._connect_timeout)
            try:
                answer = await connection.call(path, body, headers)
            finally:
                if connection.reusable and not self._closed:
                    idle.append(connection)
                else:
                    await connection.aclose()
            return answer

    async def aclose(self) -> None:
        """Close every idle connection, each at once; all of them even when the caller is cancelled (shielded: a
        cancellation would otherwise end the loop after the first one and leave the others open). Connections in
        use close as their calls end."""
        self._closed = True
        connections = [connection for idle in self._idle.values() for connection in idle]
        self._idle.clear()
        with trio.CancelScope(shield=True):
            for connection in connections:
                await connection.aclose()
