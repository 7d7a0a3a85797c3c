"""HTTP to an etcd cluster: which member to ask, how long to wait, and what a failed attempt means.

A few small httpx connection pools serve every member. Requests go to the current member until one fails to answer, then
to the next: a failure moves the rotation on for every later request. Each request is bounded by a Trio deadline;
within it, a request that nothing was changed by (a read, a keepalive, a write refused before raft saw it, a
connection never made) moves on to the next member, each member once. A write that was sent and got no answer is
never sent again here: it raises ``OutcomeUnknown``.

Every request carries ``Grpc-Metadata-hasleader: true``, so a member cut off from its leader answers "no leader" at
once instead of holding the request, except serializable reads, whose point is to be answered without one.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import trio

from controller.etcd.answers import decode_error
from controller.etcd.errors import EtcdError, OutcomeUnknown, Unavailable
from controller.etcd.stream import LineStream

__all__ = ["LEADER_HEADER", "TlsFiles", "Transport"]

LEADER_HEADER = {"Grpc-Metadata-hasleader": "true"}


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """TLS to the members: the CA that signed their certificates and, for client-certificate authentication, this
    client's certificate and key (PEM files)."""

    ca: str | Path | None = None
    cert: str | Path | None = None
    key: str | Path | None = None

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert:
            context.load_cert_chain(str(self.cert), str(self.key) if self.key else None)
        return context


class Transport:
    """The members' client URLs and connection pools to them. Close it with ``aclose``.

    ``max_connections`` are spread over pools of ``connections_per_pool``, and each request goes to the pool with
    the fewest requests in flight: under many concurrent requests one large httpx pool spends its time handing out
    connections (its tail latency grows to seconds), where several small ones do not."""

    def __init__(self, endpoints: Sequence[str], *, tls: TlsFiles | None = None, connect_timeout: float = 1.0,
                 max_connections: int = 64, connections_per_pool: int = 2) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = tuple(endpoint.rstrip("/") for endpoint in endpoints)
        self._current = 0
        # One context for every pool and stream: building one loads the CA bundle, which takes a tenth of a second.
        self._ssl_context = tls.context() if tls else ssl.create_default_context()
        self._connect_timeout = connect_timeout
        per_pool = max(1, min(connections_per_pool, max_connections))
        # Connecting has its own bound so that an unreachable host costs a second, not the request's whole time;
        # everything after the connection is bounded by the caller's deadline.
        self._pools = [
            httpx.AsyncClient(verify=self._ssl_context, timeout=httpx.Timeout(None, connect=connect_timeout),
                              limits=httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool))
            for _ in range(max(1, -(-max_connections // per_pool)))]
        self._in_flight = [0] * len(self._pools)

    @property
    def current(self) -> str:
        """The member requests go to now."""
        return self.endpoints[self._current]

    def rotate(self, failed: str) -> None:
        """Move on from ``failed``, unless another request already did."""
        if self.endpoints[self._current] == failed:
            self._current = (self._current + 1) % len(self.endpoints)

    async def call(self, path: str, body: bytes, *, within: float, write: bool, needs_leader: bool = True,
                   only: str | None = None) -> bytes:
        """POST ``body`` to ``path`` and return the answer's body; ask only the member at ``only`` if given.

        Raises the error etcd answered with; ``Unavailable`` when no member served it within ``within`` seconds;
        ``OutcomeUnknown`` for a ``write`` that was sent and not answered."""
        members = 1 if only else len(self.endpoints)
        rotate: Callable[[str], None] = self.rotate if only is None else _stay
        # The caller's own cancel scope may end sooner: a read shares out whichever time is shorter.
        deadline = min(trio.current_time() + within, trio.current_effective_deadline())
        failures: list[EtcdError] = []
        in_flight: str | None = None  # a write's member while it may hold the write
        with trio.move_on_at(deadline):
            for attempt in range(members):
                endpoint = only or self.current
                # A read may give up on a slow member and ask the next within the time left; a write may not.
                share = (deadline - trio.current_time()) / (members - attempt)
                with trio.move_on_at(deadline if write else trio.current_time() + share) as attempt_scope:
                    in_flight = endpoint if write else None
                    try:
                        response = await self._send(endpoint + path, body, needs_leader)
                    except (httpx.ConnectError, httpx.ConnectTimeout) as error:  # nothing was sent
                        in_flight = None
                        failures.append(Unavailable(f"cannot connect: {error!r}", endpoint=endpoint))
                        rotate(endpoint)
                        continue
                    except httpx.TransportError as error:
                        if write:
                            raise OutcomeUnknown(f"the connection failed before an answer: {error!r}",
                                                 endpoint=endpoint) from error
                        failures.append(Unavailable(f"the connection failed: {error!r}", endpoint=endpoint))
                        rotate(endpoint)
                        continue
                    in_flight = None
                if attempt_scope.cancelled_caught:
                    failures.append(Unavailable("no answer in time", endpoint=endpoint))
                    rotate(endpoint)
                    continue
                if response.status_code == 200:
                    return response.content
                refusal = decode_error(response.status_code, response.content, write=write, endpoint=endpoint)
                if not isinstance(refusal, Unavailable) or isinstance(refusal, OutcomeUnknown):
                    raise refusal
                failures.append(refusal)
                rotate(endpoint)
        if in_flight is not None:
            rotate(in_flight)
            raise OutcomeUnknown(f"no answer to a write within {within} s", endpoint=in_flight)
        reasons = "; ".join(str(failure) for failure in failures) or "no member tried"
        cause = failures[-1] if failures else None
        if trio.current_time() >= deadline:
            raise Unavailable(f"etcd did not answer within {within} s: {reasons}") from cause
        raise Unavailable(f"no etcd member could serve the request: {reasons}") from cause

    async def _send(self, url: str, body: bytes, needs_leader: bool) -> httpx.Response:
        """POST on the least busy pool, reading the whole answer."""
        index = min(range(len(self._pools)), key=self._in_flight.__getitem__)
        pool = self._pools[index]
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if needs_leader:
            headers.update(LEADER_HEADER)
        request = pool.build_request("POST", url, headers=headers)
        request.stream = _Body(body)
        self._in_flight[index] += 1
        try:
            return await pool.send(request)
        finally:
            self._in_flight[index] -= 1

    async def open_stream(self, endpoint: str, path: str, body: bytes) -> LineStream:
        """POST ``body`` to ``path`` on ``endpoint`` on a connection of its own and return the answer with its body
        still to be read (a watch); the caller closes it. StreamFailed if the connection fails."""
        return await LineStream.open(endpoint + path, body, headers=LEADER_HEADER, ssl_context=self._ssl_context,
                                     connect_timeout=self._connect_timeout)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


def _stay(endpoint: str) -> None:
    """A request meant for one member leaves the rotation where it is."""


class _Body(httpx.AsyncByteStream):
    """A request body that httpx sends without an async generator. httpx's own is one, and when sending fails or is
    cancelled (a member that refuses the TLS handshake, a deadline) it is left suspended, and Trio reports its
    collection as a leak."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _Once(self._data)


class _Once:
    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data
