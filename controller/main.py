"""The whole task tree of a running controller, in one function.

``run(settings)`` opens the data directory, bootstraps a new database, starts the writer and the API-session expiry
service, then serves both APIs with hypercorn until SIGINT or SIGTERM. On a signal hypercorn stops accepting, lets
in-flight requests finish, and only then are the services cancelled: the writer finishes any batch it holds, so
every acknowledged write is on disk.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from controller.bootstrap import bootstrap
from controller.pki import Pki, ensure_pki
from controller.root import Controller
from controller.settings import Settings

__all__ = ["hypercorn_config", "run", "serve_controller"]

log = logging.getLogger("tollgate")


def hypercorn_config(settings: Settings, pki: Pki | None) -> Config:
    config = Config()
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    config.bind = [f"{host}:{settings.port}"]
    config.accesslog = None
    config.graceful_timeout = 10.0
    config.keep_alive_timeout = 75.0
    if pki is not None:
        config.certfile = str(pki.server_cert_path)
        config.keyfile = str(pki.server_key_path)
    return config


async def _wait_for_signal(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            log.info("shutdown requested", extra={"signal": signal.Signals(signum).name})
            return


async def serve_controller(settings: Settings, *, on_ready: Callable[[Controller, list[str]], None] | None = None,
                           shutdown_trigger: Callable[..., Awaitable[None]] | None = None) -> None:
    """Run the controller until ``shutdown_trigger`` returns (default: SIGINT or SIGTERM)."""
    from web.app import create_app

    pki = ensure_pki(settings.data_dir / "pki", settings.sans) if settings.tls else None
    controller = Controller.open(settings)
    try:
        async with trio.open_nursery() as services:
            await services.start(controller.writer.run)
            result = await bootstrap(controller)
            if result.generated_password is not None:
                print(f"Created the default admin '{result.username}' with password: {result.generated_password}")
                print(f"  (also written to {settings.data_dir / 'admin-credentials'})")
            await services.start(controller.sessions.run)
            controller.extras["pki"] = pki
            app = create_app(controller)
            config = hypercorn_config(settings, pki)
            trigger = shutdown_trigger or _wait_for_signal
            async with trio.open_nursery() as web:
                binds = await web.start(functools.partial(serve, app, config, shutdown_trigger=trigger))
                scheme = "https" if pki else "http"
                urls = [b.replace("http://", f"{scheme}://").replace("https://", f"{scheme}://") for b in binds]
                if on_ready is not None:
                    on_ready(controller, urls)
                else:
                    for url in urls:
                        print(f"Management API: {url}/edge/management/v1")
                        print(f"Client API:     {url}/edge/client/v1")
                    if pki is not None:
                        print(f"CA bundle:      {pki.ca_cert_path}")
                log.info("controller started", extra={"urls": urls})
            # hypercorn has returned: no request is in flight; persist what only memory holds, then stop.
            await controller.sessions.flush()
            services.cancel_scope.cancel()
    finally:
        controller.close()
        log.info("controller stopped")


def run(settings: Settings) -> None:
    trio.run(serve_controller, settings)
