"""HTTP to an etcd cluster: which member to ask, how long to wait, and what a failed attempt means.

One pool of keep-alive connections (``controller/etcd/connection.py``) serves every member. Requests go to the current
member until one fails to answer, then to the next: a failure moves the rotation on for every later request. Each
request is bounded by a Trio deadline; within it, a request that nothing was changed by (a read, a keepalive, a write
refused before raft saw it, a connection never made) moves on to the next member, each member once. A write that was
sent and got no answer is never sent again here: it raises ``OutcomeUnknown``.

Every request carries ``Grpc-Metadata-hasleader: true``, so a member cut off from its leader answers "no leader" at
once instead of holding the request, except serializable reads, whose point is to be answered without one.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from controller.etcd.answers import decode_error
from controller.etcd.connection import CallBroken, ConnectFailed, ConnectionPool, split_url
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
    """The members' client URLs and the connections to them (at most ``max_connections`` calls at a time). Close it
    with ``aclose``."""

    def __init__(self, endpoints: Sequence[str], *, tls: TlsFiles | None = None, connect_timeout: float = 1.0,
                 max_connections: int = 64) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = tuple(endpoint.rstrip("/") for endpoint in endpoints)
        self._members = {endpoint: split_url(endpoint) for endpoint in self.endpoints}
        self._current = 0
        # One context for every connection and stream: building one loads the CA bundle, which takes a tenth of a
        # second.
        self._ssl_context = tls.context() if tls else ssl.create_default_context()
        self._connect_timeout = connect_timeout
        # Connecting has its own bound so that an unreachable host costs a second, not the request's whole time;
        # everything after the connection is bounded by the caller's deadline.
        self._pool = ConnectionPool(ssl_context=self._ssl_context, connect_timeout=connect_timeout,
                                    max_connections=max_connections)

    @property
    def current(self) -> str:
        """The member requests go to now."""
        return self.endpoints[self._current]

    def in_order(self) -> list[str]:
        """Every member, the current one first, then the ones the rotation would reach next."""
        return [self.endpoints[(self._current + step) % len(self.endpoints)] for step in range(len(self.endpoints))]

    def prefer(self, endpoint: str) -> None:
        """Send requests to ``endpoint`` (one of the members) from now on."""
        self._current = self.endpoints.index(endpoint)

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
                        status, content = await self._send(endpoint, path, body, needs_leader)
                    except ConnectFailed as error:  # nothing was sent
                        in_flight = None
                        failures.append(Unavailable(str(error), endpoint=endpoint))
                        rotate(endpoint)
                        continue
                    except CallBroken as error:
                        if write:
                            raise OutcomeUnknown(f"the connection failed before an answer: {error}",
                                                 endpoint=endpoint) from error
                        failures.append(Unavailable(str(error), endpoint=endpoint))
                        rotate(endpoint)
                        continue
                    in_flight = None
                if attempt_scope.cancelled_caught:
                    failures.append(Unavailable("no answer in time", endpoint=endpoint))
                    rotate(endpoint)
                    continue
                if status == 200:
                    return content
                refusal = decode_error(status, content, write=write, endpoint=endpoint)
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

    async def _send(self, endpoint: str, path: str, body: bytes, needs_leader: bool) -> tuple[int, bytes]:
        """POST to the member at ``endpoint``: the answer's status and body."""
        scheme, host, port, base = self._members[endpoint]
        return await self._pool.call(scheme, host, port, base + path, body, LEADER_HEADER if needs_leader else {})

    async def open_stream(self, endpoint: str, path: str, body: bytes) -> LineStream:
        """POST ``body`` to ``path`` on ``endpoint`` on a connection of its own and return the answer with its body
        still to be read (a watch); the caller closes it. StreamFailed if the connection fails."""
        return await LineStream.open(endpoint + path, body, headers=LEADER_HEADER, ssl_context=self._ssl_context,
                                     connect_timeout=self._connect_timeout)

    async def aclose(self) -> None:
        await self._pool.aclose()


def _stay(endpoint: str) -> None:
    """A request meant for one member leaves the rotation where it is."""

