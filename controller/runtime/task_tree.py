"""The whole task tree of a running controller, in one function, and the one order its services start in.

:func:`start_services` starts a controller's services in the order they depend on each other (every caller that
runs a controller, the benchmarks and the tests included, starts them through it). ``run(settings)`` opens the data
directory, starts the services (bootstrapping a new database), then serves both APIs (``web/server.py``, hypercorn's
worker with client certificates), and the metrics listener when ``settings.metrics_address`` asks for one
(``web/metrics_app.py``), until SIGINT or SIGTERM. On a signal the listeners stop accepting, let in-flight requests
finish, and only then are the services cancelled: the writer finishes any batch it holds, so every acknowledged write is
on disk.
"""

from __future__ import annotations

import functools
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from urllib.parse import urlsplit

import trio
from hypercorn.config import Config
from quart_trio import QuartTrio

from controller.authentication.shared_throttles import SharedThrottles
from controller.certificates import Pki
from controller.cluster import ClusterConfig, ClusterNode, Limits, connect
from controller.cluster.channel_messages import MESSAGE_BYTES
from controller.etcd import TlsFiles
from controller.insight import EventFile, write_events_behind
from controller.insight.event_log import TRIM_BATCH, latest_id, oldest_id
from controller.runtime import memory
from controller.runtime.bootstrap import BootstrapResult, bootstrap
from controller.runtime.certificate_renewal import renew_server_certificate
from controller.runtime.composition import Controller
from controller.runtime.metrics import METRICS_PATH, Metrics
from controller.runtime.settings import Settings
from web.app import create_app
from web.metrics_app import serve_metrics
from web.server import serve

__all__ = ["hypercorn_config", "run", "serve_controller", "start_services"]

log = logging.getLogger("tollgate")


def hypercorn_config(settings: Settings, pki: Pki | None) -> Config:
    """hypercorn's configuration: one bind (port 0 picks a free port), TLS when ``pki`` is given, our logging."""
    config = Config()
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    config.bind = [f"{host}:{settings.port}"]
    config.accesslog = None  # web/app.py logs every request itself, as one JSON line
    # A Logger (not the default "-") makes hypercorn add no handler of its own: its messages reach our JSON handler.
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 10.0
    # Silence is bounded by the read timeout wherever the server waits for the client: before a request's head is
    # complete and between requests, hypercorn's idle timer closes the connection; while the app reads a body, the
    # app's body timeout answers 408 (web/app.py). hypercorn's own read_timeout is not used: it also runs while the
    # app handles a request it has wholly received (a slow answer was dropped), and after it fires with no request
    # in flight hypercorn stops reading but leaves the connection open to the idle timer.
    config.keep_alive_timeout = float(settings.read_timeout)
    config.read_timeout = None
    # The internal channel's messages hold at most MESSAGE_BYTES of calls, or one call of at most a request's body.
    config.websocket_max_message_size = max(config.websocket_max_message_size,
                                            settings.max_body_bytes + MESSAGE_BYTES)
    if pki is not None:
        config.certfile = str(pki.server_cert_path)
        config.keyfile = str(pki.server_key_path)
    return config


@contextmanager
def _signal_trigger() -> Iterator[Callable[[], Awaitable[None]]]:
    """Catch SIGINT and SIGTERM from now on; yields the shutdown trigger that returns on the first of them.

    The receiver is open before hypercorn starts, so a signal sent as soon as the URLs are printed is never lost
    (nor kills the process with the default action).
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def _wait_for_signal() -> None:
            async for signum in signals:
                log.info("shutdown requested", extra={"signal": signal.Signals(signum).name})
                return

        yield _wait_for_signal


async def start_services(controller: Controller, nursery: trio.Nursery) -> BootstrapResult:
    """Start every service of ``controller`` in ``nursery`` (cancel it to stop them), in the order they need each
    other: the writer (every write goes through it), the event log's trim to ``--events-keep`` and the event file
    (it resumes after the last event it holds), the posture engine (it re-arms every persisted deadline); in cluster
    mode the replica (caught up with etcd, or rebuilt from it, before the event log's trim, bootstrap and serving)
    and the read barrier; bootstrap (a new data directory's first rows; every start records itself; in cluster mode
    the network is then marked initialised, and the shards' ownership and the lanes' retirement start), API-session
    expiry, the database operations and the server
    certificate's renewal. Returns what bootstrap did."""
    await nursery.start(controller.writer.run)
    cluster = controller.cluster
    if cluster is None:
        await _start_events(controller, nursery)
    await nursery.start(controller.engine.run)
    if cluster is not None:
        # After the engine: catching up tells the listeners (the engine's too) of every change made meanwhile.
        assert cluster.replica is not None and cluster.freshness is not None
        await nursery.start(cluster.replica.run)
        await nursery.start(cluster.freshness.run)
        await cluster.freshness.wait_current()  # every write acknowledged before this start is here, however long
        await _start_events(controller, nursery)  # its trim is a write: on the replica once caught up
    result = await bootstrap(controller)
    if cluster is not None:
        await cluster.initialised()
    if cluster is not None:
        assert cluster.ownership is not None and cluster.router is not None
        await nursery.start(cluster.router.run)
        await nursery.start(cluster.ownership.run)  # it claims shards once this node is announced
        await nursery.start(cluster.retirement.run)  # it retires departed nodes' lanes once this node is announced
    await nursery.start(controller.sessions.run)
    if isinstance(controller.throttles, SharedThrottles):
        await nursery.start(controller.throttles.run)
    await nursery.start(controller.database.run)
    await nursery.start(renew_server_certificate, controller)
    return result


async def _start_events(controller: Controller, nursery: trio.Nursery) -> None:
    settings, event_log = controller.settings, controller.event_log
    if event_log is None:
        return
    with controller.store.read() as txn:
        oldest, latest = oldest_id(txn), latest_id(txn)
    if oldest is not None and oldest <= latest - event_log.keep - TRIM_BATCH:  # started with a smaller --events-keep
        await controller.domain.write(event_log.trim)
    if settings.events_file is not None:
        events_file = EventFile(settings.events_file, max_bytes=settings.events_file_max_bytes,
                                backups=settings.events_file_backups)
        await nursery.start(functools.partial(write_events_behind, events_file, controller.store,
                                              controller.events_hub, in_thread=settings.worker_threads))


async def serve_controller(settings: Settings, *, on_ready: Callable[[Controller, list[str]], None] | None = None,
                           shutdown_trigger: Callable[..., Awaitable[None]] | None = None) -> None:
    """Run the controller until ``shutdown_trigger`` returns (default: SIGINT or SIGTERM).

    ``on_ready(controller, urls)`` is called once both APIs accept connections, with the bound base URLs (the real
    port when ``settings.port`` is 0); without it the URLs are printed. With TLS, clients may present a certificate
    from a CA of ``controller.tls``. With ``settings.metrics_address``, the metrics listener is up by then too, at
    ``controller.metrics.url`` (printed without ``on_ready``). On shutdown the listeners stop accepting, let in-flight
    requests finish (up to their graceful timeout), then the API sessions' activity is persisted and the services
    stop; every write acknowledged to a client is on disk by then.

    With ``settings.etcd`` the controller is a node of a cluster: it reaches etcd first (or exits with
    :class:`~controller.cluster.ClusterUnreachable`, nothing initialised), holds its lease, joins the network
    (initialising it if nobody has) and serves from its replica.
    """
    if not settings.etcd:
        await _serve_node(settings, None, on_ready, shutdown_trigger)
        return
    async with connect(cluster_config(settings)) as etcd, trio.open_nursery() as membership:
        node = ClusterNode(cluster_config(settings), etcd)
        await membership.start(node.membership.run)
        await node.join(settings.data_dir / "pki", settings.sans, settings.server_key_type)
        await _serve_node(settings, node, on_ready, shutdown_trigger)
        membership.cancel_scope.cancel()


def cluster_config(settings: Settings) -> ClusterConfig:
    """How ``settings`` say this node reaches its network's etcd."""
    tls = None
    if settings.etcd_ca or settings.etcd_cert or any(url.startswith("https://") for url in settings.etcd):
        tls = TlsFiles(settings.etcd_ca, settings.etcd_cert, settings.etcd_key)
    return ClusterConfig(tuple(settings.etcd), prefix=settings.etcd_prefix, tls=tls, node_name=settings.node_name,
                         lease_ttl=settings.lease_ttl,
                         limits=Limits(settings.etcd_max_txn_ops, settings.etcd_max_request_bytes))


async def _serve_node(settings: Settings, node: ClusterNode | None,
                      on_ready: Callable[[Controller, list[str]], None] | None,
                      shutdown_trigger: Callable[..., Awaitable[None]] | None) -> None:
    controller = Controller.open(settings, node=node)
    pki = controller.pki if settings.tls else None
    try:
        with memory.runtime_policy(controller.engine.actors):
            async with trio.open_nursery() as services:
                result = await start_services(controller, services)
                if result.generated_password is not None:
                    print(f"Created the default admin '{result.username}' with password: "
                          f"{result.generated_password}", flush=True)
                    print(f"  (also written to {settings.data_dir / 'admin-credentials'})", flush=True)
                app = create_app(controller)
                # Everything restored so far lives as long as the process: freeze it before serving
                # (controller/runtime/memory.py).
                memory.settle()
                with ExitStack() as stack:
                    trigger = shutdown_trigger or stack.enter_context(_signal_trigger())
                    await _serve(controller, app, hypercorn_config(settings, pki), trigger, on_ready,
                                 controller.metrics)
                # The server has returned: no request is in flight; persist what only memory holds, then stop.
                await controller.sessions.flush()
                services.cancel_scope.cancel()
    finally:
        controller.close()
        log.info("controller stopped")


async def _serve(controller: Controller, app: QuartTrio, config: Config,
                 trigger: Callable[..., Awaitable[None]],
                 on_ready: Callable[[Controller, list[str]], None] | None, metrics: Metrics | None) -> None:
    """Serve ``app``, and ``metrics`` when given, until ``trigger`` returns and every in-flight request of either
    listener has finished."""
    pki = controller.pki if controller.settings.tls else None
    stopping = trio.Event()

    async def shutdown() -> None:
        await trigger()
        controller.events_hub.close()  # open event streams end, so that the server can finish its requests
        stopping.set()  # the metrics listener stops with the APIs'

    async with trio.open_nursery() as web:
        if metrics is not None:
            bound = await web.start(functools.partial(serve_metrics, controller, metrics.registry,
                                                      shutdown_trigger=stopping.wait))
            metrics.url = bound[0] + METRICS_PATH
        binds = await web.start(functools.partial(serve, app, config, trust=controller.tls,
                                                  max_connections=controller.settings.max_connections,
                                                  shutdown_trigger=shutdown))
        scheme = "https" if pki else "http"
        urls = [b.replace("http://", f"{scheme}://").replace("https://", f"{scheme}://") for b in binds]
        port = urlsplit(urls[0]).port if urls else None
        if port is not None:
            # Enrolment JWTs name the controller's address; with port 0 it is known only now.
            controller.jwts.address = controller.settings.address_for(port)
            if controller.cluster is not None:
                await controller.cluster.announce(controller.settings.host, port, controller.jwts.address,
                                                  _reachable(urls[0]), controller.pki)
        if on_ready is not None:
            on_ready(controller, urls)
        else:
            # Flushed: whoever started us (a supervisor, a test) may be reading stdout through a pipe.
            for url in urls:
                print(f"Management API: {url}/edge/management/v1", flush=True)
                print(f"Client API:     {url}/edge/client/v1", flush=True)
            if pki is not None:
                print(f"CA bundle:      {pki.ca_cert_path}", flush=True)
            if metrics is not None:
                print(f"Metrics:        {metrics.url}", flush=True)
        log.info("controller started", extra={"urls": urls, "metrics": metrics.url if metrics is not None else None})


def _reachable(url: str) -> str:
    """``url`` as other hosts reach it: a wildcard host becomes this host's name."""
    parts = urlsplit(url)
    if parts.hostname in ("0.0.0.0", "::", None):
        return parts._replace(netloc=f"{socket.getfqdn()}:{parts.port}").geturl()
    return url


def run(settings: Settings) -> None:
    trio.run(serve_controller, settings)
