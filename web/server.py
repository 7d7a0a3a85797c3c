"""``serve``: hypercorn's Trio worker, with TLS that asks for client certificates and shows them to the app.

It behaves as ``hypercorn.trio.serve`` does for one worker (ASGI lifespan start-up and shut-down, the bound URLs
reported through ``task_status``, the shutdown trigger, in-flight requests given ``config.graceful_timeout`` to
finish), except that:

* TLS listeners use :func:`tls_context`: hypercorn's TLS settings, plus a client certificate requested (optional)
  and verified against the CAs of a :class:`~controller.certificates.tls_contexts.TlsContexts`; ``config.ca_certs``,
  ``verify_mode`` and ``verify_flags`` are not used.
* Each accepted TLS connection is handshaken here first; what the handshake established is recorded in
  :data:`web.client_certs.PEER_CONNECTIONS` for as long as the connection stays open, where
  :class:`web.client_certs.TlsExtension` finds it for each request.
* The listening sockets close as soon as shutdown begins, so new clients are refused during the grace period.
* At most ``max_connections`` connections are served at once: one more is closed as soon as it is accepted (a
  flood of idle connections cannot exhaust the process's descriptors or memory).
* Every ASGI ``send`` of the app runs shielded from the app's cancellation. Hypercorn ends or recycles a connection
  inside the send that completes a response, so an app that cancels its own tasks right after that send (quart-trio
  does, once its message reader sees ``http.disconnect``) could interrupt that bookkeeping half-way: a response given
  before the request body was read then left the connection open, unrecycled, and the client's next request on it
  waited forever. Hypercorn already shields its socket writes, so the shield holds nothing up that was cancellable.
* A connection ends as soon as its reading does (the client closed it): hypercorn would keep its keep-alive timer
  running, and the connection with its place among ``max_connections``, until the timer ran out.
* A connection whose peer acknowledges none of what was sent to it, or keeps its receive window shut, for
  :data:`STALLED_PEER_TIMEOUT` seconds is dropped by the kernel (``TCP_USER_TIMEOUT``, on Linux, set on the listening
  sockets and so on every connection they accept; a shut window counts from Linux 5.11). Hypercorn's socket writes
  are shielded and have no time limit of their own, so without it a client that stops reading (or a node of the
  cluster paused on its internal channel's link) would hold a connection, its place among ``max_connections`` and
  the write waiting on it for as long as its kernel kept answering (forever, for a paused process), or for TCP's
  retransmissions (a quarter of an hour, for a host gone).

It relies on these parts of hypercorn 0.18 (pinned in pyproject.toml for that reason), beyond ``Config``:
``trio.tcp_server.TCPServer`` (one connection; a stream whose handshake is done is fine, since Trio's
``do_handshake`` returns at once the second time; its ``_read_data`` and ``idle_task``), ``trio.lifespan.Lifespan``,
``trio.worker_context.WorkerContext``, ``utils.wrap_app``, ``utils.raise_shutdown`` with ``utils.ShutdownError``, and
``utils.parse_socket_addr``, which makes the addresses hypercorn puts in ``scope["server"]`` and ``scope["client"]``.
QUIC (``config.quic_bind``), worker recycling (``config.max_requests``) and statsd metrics are not offered.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import cast

import trio
from hypercorn.config import Config
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import (
    AppWrapper,
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    ASGISendEvent,
    ConnectionState,
    Framework,
    Scope,
)
from hypercorn.utils import ShutdownError, parse_socket_addr, raise_shutdown, repr_socket_addr, wrap_app

from controller.certificates.tls_contexts import TlsContexts
from web.client_certs import PEER_CONNECTIONS, TlsConnection

__all__ = ["STALLED_PEER_TIMEOUT", "serve", "tls_context"]

STALLED_PEER_TIMEOUT = 30.0
"""Seconds a connection may go with its peer acknowledging none of the data sent to it, or its window shut, before
the kernel drops it: far beyond what a working client or network takes, well within what a dead one holds."""

# OpenSSL's X509_V_FLAG_NO_CHECK_TIME, which the ssl module does not name: whether an expired client certificate may
# authenticate is the auth policy's decision (allowExpiredCerts), so TLS must let it through to the application.
_VERIFY_NO_CHECK_TIME = 0x200000
_TLS_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}

_Stream = trio.SSLStream[trio.SocketStream] | trio.SocketStream
_Listener = trio.SSLListener[trio.SocketStream] | trio.SocketListener


def tls_context(config: Config, trust: TlsContexts) -> ssl.SSLContext:
    """The server-side TLS context for ``config``'s certificate and key, trusting ``trust``'s CAs for clients.

    As hypercorn's: TLS 1.2 or later, ``config.ciphers``, ``config.alpn_protocols``, no compression. Added: a
    client certificate is requested but optional; one that is presented must chain to a trusted CA (an
    intermediate CA may be trusted alone) but may be outside its validity dates; no renegotiation, so a
    connection's client certificate is the one its handshake recorded. CAs added to ``trust`` later apply to later
    handshakes.

    Raises:
        ValueError: ``config`` names no certificate file or no key file.
    """
    if config.certfile is None or config.keyfile is None:
        raise ValueError("TLS needs config.certfile and config.keyfile")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # unlike create_default_context, trusts no system CA
    context.set_ciphers(config.ciphers)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    context.set_alpn_protocols(config.alpn_protocols)
    context.load_cert_chain(config.certfile, config.keyfile, config.keyfile_password)
    context.verify_mode = ssl.CERT_OPTIONAL
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | _VERIFY_NO_CHECK_TIME
    trust.attach(context)
    return context


async def serve(app: Framework, config: Config, *, trust: TlsContexts, max_connections: int = 1000,
                shutdown_trigger: Callable[..., Awaitable[None]] | None = None,
                task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the ASGI ``app`` on ``config``'s binds until ``shutdown_trigger`` returns (or forever without one).

    Listeners are TLS when ``config`` names a certificate and key (see :func:`tls_context`), plain HTTP otherwise.
    Once every listener accepts connections, ``task_status.started`` gets their base URLs (``https://host:port`` or
    ``http://host:port``, the real port when the bind asked for port 0). On shutdown the listeners close at once,
    open connections get ``config.graceful_timeout`` seconds to finish their requests before they are cancelled,
    then the app's lifespan shut-down runs. Returns after all of that.

    Raises:
        ValueError: ``config`` asks for QUIC or for ``max_requests``, which this server does not offer.
    """
    if config.quic_bind or config.max_requests is not None:
        raise ValueError("QUIC binds and max_requests are not supported")
    wrapped = wrap_app(_shielded_sends(cast(ASGIFramework, app)), config.wsgi_max_body_size, "asgi")
    lifespan_state: dict[str, object] = {}
    lifespan = Lifespan(wrapped, config, lifespan_state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as connections:
            tls = _ServerTls.of(config, trust) if config.ssl_enabled else None
            listeners, urls = await _listen(config, tls)
            handler = partial(_admitted, _Admission(max_connections), wrapped, config, context,
                              ConnectionState(lifespan_state.copy()), tls)
            task_status.started(urls)
            try:
                async with trio.open_nursery(strict_exception_groups=True) as running:
                    if shutdown_trigger is not None:
                        running.start_soon(raise_shutdown, shutdown_trigger)
                    running.start_soon(raise_shutdown, context.terminate.wait)
                    running.start_soon(partial(trio.serve_listeners, handler, listeners, handler_nursery=connections))
                    await trio.sleep_forever()
            except BaseExceptionGroup as group:
                _, errors = group.split((ShutdownError, KeyboardInterrupt))
                if errors is not None:
                    raise errors from None  # the rest of the group, minus the shutdown that ended it
            finally:
                # Closed now, not left to the garbage collector: a client connecting during the grace period is
                # refused at once instead of waiting in the backlog for an accept that never comes.
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
                await context.terminated.set()
                connections.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()


def _shielded_sends(app: ASGIFramework) -> ASGIFramework:
    """``app`` with every call of its ASGI ``send`` shielded from cancellation (see the module docstring: hypercorn
    finishes, recycles or closes the connection inside the send that ends a response, and that must not stop
    half-way)."""
    async def shielded_app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        async def shielded_send(message: ASGISendEvent) -> None:
            with trio.CancelScope(shield=True):
                await send(message)

        await app(scope, receive, shielded_send)

    return shielded_app


class _Connection(TCPServer):
    """Hypercorn's connection, which ends once it reads no more (see the module docstring)."""

    async def _read_data(self) -> None:
        await super()._read_data()
        # The keep-alive timer is the last task of the connection's task group once the reading is over.
        await self.idle_task.stop()


@dataclass(frozen=True)
class _ServerTls:
    """The TLS side of the listeners: their context, and what every connection's TLS extension repeats."""

    context: ssl.SSLContext
    trust: TlsContexts  # it knows the server certificate presented now (renewed at run time)
    cipher_suites: Mapping[str, int]  # IANA number by OpenSSL name

    @classmethod
    def of(cls, config: Config, trust: TlsContexts) -> _ServerTls:
        context = tls_context(config, trust)
        trust.load_server_certificate(Path(str(config.certfile)), Path(str(config.keyfile)))
        # OpenSSL's cipher id carries the suite's IANA number in its low 16 bits.
        suites = {suite["name"]: suite["id"] & 0xFFFF for suite in context.get_ciphers()}
        return cls(context, trust, suites)

    def describe(self, stream: trio.SSLStream[trio.SocketStream]) -> TlsConnection:
        """What the completed handshake on ``stream`` established."""
        cipher = stream.cipher()
        return TlsConnection.from_handshake(
            stream.getpeercert(binary_form=True), server_cert=self.trust.server_certificate or "",
            tls_version=_TLS_VERSIONS.get(stream.version()),
            cipher_suite=None if cipher is None else self.cipher_suites.get(cipher[0]))


async def _listen(config: Config, tls: _ServerTls | None) -> tuple[list[_Listener], list[str]]:
    """Bind and listen on every configured address; the listeners and their base URLs."""
    sockets = config.create_sockets()
    listeners: list[_Listener] = []
    urls: list[str] = []
    for secure, group in ((True, sockets.secure_sockets), (False, sockets.insecure_sockets)):
        for sock in group:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and hasattr(socket, "TCP_USER_TIMEOUT"):
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(STALLED_PEER_TIMEOUT * 1000))
                except OSError as error:  # a system that names the option and refuses it: served without it
                    await config.log.warning(f"stalled connections are not dropped on {sock.getsockname()}: {error}")
            sock.listen(config.backlog)
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
            if secure and tls is not None:
                listeners.append(trio.SSLListener(listener, tls.context, https_compatible=True))
            else:
                listeners.append(listener)
            urls.append(f"{'https' if secure else 'http'}://{repr_socket_addr(sock.family, sock.getsockname())}")
            await config.log.info(f"Running on {urls[-1]}")
    return listeners, urls


@dataclass
class _Admission:
    """How many connections are being served, and how many may be."""

    limit: int
    open: int = 0
    refused: int = 0


async def _admitted(admission: _Admission, app: AppWrapper, config: Config, context: WorkerContext,
                    state: ConnectionState, tls: _ServerTls | None, stream: _Stream) -> None:
    """Serve a connection if fewer than the limit are open; otherwise close it at once."""
    if admission.open >= admission.limit:
        admission.refused += 1
        await trio.aclose_forcefully(stream)
        return
    admission.open += 1
    try:
        await _handle(app, config, context, state, tls, stream)
    finally:
        admission.open -= 1


async def _handle(app: AppWrapper, config: Config, context: WorkerContext, state: ConnectionState,
                  tls: _ServerTls | None, stream: _Stream) -> None:
    """Serve one accepted connection; a TLS one is recorded in ``PEER_CONNECTIONS`` while hypercorn serves it."""
    if tls is None or not isinstance(stream, trio.SSLStream):
        await _Connection(app, config, context, state, stream).run()  # type: ignore[arg-type]  # plain streams too
        return
    sock = stream.transport_stream.socket
    try:
        with trio.fail_after(config.ssl_handshake_timeout):
            await stream.do_handshake()
        server = parse_socket_addr(sock.family, sock.getsockname())
        client = parse_socket_addr(sock.family, sock.getpeername())
    except (trio.BrokenResourceError, trio.TooSlowError, OSError):
        await trio.aclose_forcefully(stream)  # a failed handshake, or a peer already gone
        return
    try:
        connection = tls.describe(stream)
    except ValueError:  # a client certificate TLS accepted but cryptography cannot parse: unusable, so refused
        await trio.aclose_forcefully(stream)
        return
    if server is None or client is None:  # not an IP socket: no scope address to find the connection by
        await _Connection(app, config, context, state, stream).run()
        return
    PEER_CONNECTIONS.record(server, client, connection)
    try:
        await _Connection(app, config, context, state, stream).run()
    finally:
        PEER_CONNECTIONS.forget(server, client, connection)
