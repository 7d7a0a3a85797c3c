"""Support for the console's browser tests: a controller serving on a real socket in a thread of its own, and the
Chromium that drives it.

The browser tests are synchronous (Playwright's sync API), so the controller runs in its own thread under its own
``trio.run`` (``serve_controller``, as ``tollgate serve`` runs it) on 127.0.0.1 port 0; :meth:`ServerThread.call`
runs a coroutine there when a test needs the controller itself (its clock, say).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import trio

from controller.runtime.composition import Controller
from controller.runtime.task_tree import serve_controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, MGMT, make_settings, seed_pki

__all__ = ["CHROMIUM", "CHROMIUM_FLAGS", "START_SECONDS", "ServerThread", "api"]

T = TypeVar("T")

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium (``make test`` installs it); Playwright's own browser downloads are never used."""
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
START_SECONDS = 60.0
"""The longest a controller may take to start serving (generous: the machine may be loaded)."""


class ServerThread:
    """A controller serving on a real socket from a thread of its own, until :meth:`stop`.

    Args:
        data_dir: its data directory.
        overrides: settings beyond the tests' defaults (``tls=True`` to serve HTTPS).
    """

    def __init__(self, data_dir: Path, **overrides: Any) -> None:
        self._settings = make_settings(data_dir, **{"host": "127.0.0.1", "port": 0, **overrides})
        seed_pki(data_dir)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._stop: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.controller: Controller | None = None
        self.url = ""
        self._thread = threading.Thread(target=self._run, name="console-test-controller", daemon=True)

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(START_SECONDS):
            raise TimeoutError(f"the controller did not start serving within {START_SECONDS} s")
        if self._failure is not None:
            raise RuntimeError("the controller failed to start") from self._failure
        return self

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to the test thread by start()
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()

        def on_ready(controller: Controller, urls: list[str]) -> None:
            self.controller = controller
            self.url = urls[0]
            self._ready.set()

        await serve_controller(self._settings, on_ready=on_ready, shutdown_trigger=self._stop.wait)

    def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` on the controller's Trio thread and return its result."""
        assert self._token is not None
        return trio.from_thread.run(fn, trio_token=self._token)

    def stop(self) -> None:
        """Shut the controller down as on SIGTERM and wait for its thread."""
        if self._stop is not None and self._token is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(START_SECONDS)


@contextmanager
def api(server: ServerThread, base: str = MGMT) -> Iterator[httpx.Client]:
    """An API of ``server`` (the Management API unless ``base`` says), logged in as the admin."""
    with httpx.Client(base_url=server.url + base, timeout=30, verify=False) as client:
        reply = client.post("/authenticate", params={"method": "password"},
                            json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD})
        assert reply.status_code == 200, reply.text
        client.headers["zt-session"] = reply.json()["data"]["token"]
        yield client
