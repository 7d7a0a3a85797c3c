"""Client certificates of TLS connections, presented to the application as the ASGI TLS extension.

hypercorn hands the ASGI application neither the peer certificate nor any TLS detail. ``web/server.py`` fills the
gap: after each TLS handshake it records a :class:`TlsConnection` in :data:`PEER_CONNECTIONS` under the
connection's server and client addresses (as hypercorn writes them into ``scope["server"]`` and ``scope["client"]``)
and forgets it when the connection closes, so the table holds one small entry per open TLS connection and no more.

:class:`TlsExtension`, an ASGI middleware, sets ``scope["extensions"]["tls"]`` for every request that arrives on a
recorded connection, as the ASGI TLS extension specifies (https://asgi.readthedocs.io/en/latest/specs/tls.html);
requests over plain HTTP get no ``tls`` entry. :func:`client_certificate` reads the client certificate back from a
scope, whoever filled the extension: the middleware, or an in-process test passing
``scope_base={"extensions": {"tls": {"client_cert_chain": [pem]}}}`` to Quart's test client.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509

__all__ = ["PEER_CONNECTIONS", "PeerConnections", "TlsConnection", "TlsExtension", "client_certificate"]

#: A TCP endpoint as hypercorn puts it in an ASGI scope: (host, port).
Address = tuple[str, int]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class TlsConnection:
    """What one TLS handshake established, in the ASGI TLS extension's terms (``None``: not known)."""

    client_cert_chain: tuple[str, ...]
    client_cert_name: str | None
    server_cert: str | None
    tls_version: int | None
    cipher_suite: int | None

    @classmethod
    def from_handshake(cls, client_cert_der: bytes | None, *, server_cert: str | None, tls_version: int | None,
                       cipher_suite: int | None) -> TlsConnection:
        """The record of a handshake whose peer presented ``client_cert_der`` (DER leaf), or none when ``None``.

        Raises:
            ValueError: ``client_cert_der`` is not a certificate (TLS verified it, so only a broken peer could).
        """
        if client_cert_der is None:
            return cls((), None, server_cert, tls_version, cipher_suite)
        subject = x509.load_der_x509_certificate(client_cert_der).subject.rfc4514_string()
        return cls((ssl.DER_cert_to_PEM_cert(client_cert_der),), subject, server_cert, tls_version, cipher_suite)

    def extension(self) -> dict[str, Any]:
        """A fresh ``scope["extensions"]["tls"]`` value: what one request changes in it never reaches the next."""
        return {"server_cert": self.server_cert, "client_cert_chain": list(self.client_cert_chain),
                "client_cert_name": self.client_cert_name, "client_cert_error": None,
                "tls_version": self.tls_version, "cipher_suite": self.cipher_suite}


class PeerConnections:
    """The open TLS connections of this process, by (server address, client address).

    The pair names one TCP connection: the client address alone is not enough, since the kernel may give two
    connections to different listening sockets the same client port. A connection is recorded after its handshake
    and forgotten when it closes, so the table never outgrows the open connections.
    """

    def __init__(self) -> None:
        self._open: dict[tuple[Address, Address], TlsConnection] = {}

    def __len__(self) -> int:
        return len(self._open)

    def record(self, server: Address, client: Address, connection: TlsConnection) -> None:
        """Remember ``connection`` as the one between ``server`` and ``client`` (replacing any earlier one)."""
        self._open[(server, client)] = connection

    def forget(self, server: Address, client: Address, connection: TlsConnection) -> None:
        """Drop the entry for ``server`` and ``client`` if it is still ``connection``.

        A new connection that reused both addresses after this one's socket closed keeps its own entry.
        """
        if self._open.get((server, client)) is connection:
            del self._open[(server, client)]

    def lookup(self, server: Iterable[Any] | None, client: Iterable[Any] | None) -> TlsConnection | None:
        """The connection between ``server`` and ``client`` as an ASGI scope gives them (lists or tuples, or
        ``None`` when unknown), or ``None`` if no such TLS connection is open."""
        if server is None or client is None:
            return None
        server_host, server_port = server
        client_host, client_port = client
        return self._open.get(((server_host, server_port), (client_host, client_port)))


#: The table ``web/server.py`` records into and :class:`TlsExtension` reads by default. Connections are a process-wide
#: resource and each entry is keyed by its own TCP connection, so one table serves any number of servers.
PEER_CONNECTIONS = PeerConnections()


class TlsExtension:
    """ASGI middleware: ``scope["extensions"]["tls"]`` for every HTTP or WebSocket request over a recorded TLS
    connection; other requests and other scope types pass through untouched.

    Args:
        app: the ASGI application to call.
        connections: where the TLS connections are recorded.
    """

    def __init__(self, app: ASGIApp, connections: PeerConnections = PEER_CONNECTIONS) -> None:
        self._app = app
        self._connections = connections

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            connection = self._connections.lookup(scope.get("server"), scope.get("client"))
            if connection is not None:
                extensions = {**(scope.get("extensions") or {}), "tls": connection.extension()}
                scope = {**scope, "extensions": extensions}
        await self._app(scope, receive, send)


def client_certificate(scope: Mapping[str, Any]) -> x509.Certificate | None:
    """The client certificate of the request ``scope`` describes, or ``None`` if it came without one.

    It is the first entry of the ASGI TLS extension's ``client_cert_chain``; TLS has verified it against the
    trusted CAs (``controller.certificates.tls_contexts``) except for its validity dates, which are the caller's to
    check.

    Raises:
        ValueError: the chain's first entry is not a PEM certificate.
    """
    tls = (scope.get("extensions") or {}).get("tls") or {}
    leaf = next(iter(tls.get("client_cert_chain") or ()), None)
    return None if leaf is None else x509.load_pem_x509_certificate(leaf.encode("ascii"))
