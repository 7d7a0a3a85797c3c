"""The admin CLI's tests run ``tollgate`` verbs (click's CliRunner) against a real controller on a real TLS socket.

One controller serves each test module: it runs ``serve_controller`` under its own ``trio.run`` in a background
thread (127.0.0.1, port 0, HTTPS from its own PKI), so the CLI's blocking httpx client talks to it from the test's
thread exactly as from another process. Each test gets its own CLI configuration file.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner, Result

from controller.admin.admin_client import AdminClient
from controller.admin.verbs import cli
from controller.authentication import password_hashing as passwords
from controller.runtime.composition import Controller
from controller.runtime.task_tree import serve_controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, make_settings, seed_pki

__all__ = ["Cli", "Server", "rows_of"]


@dataclass
class Server:
    """A controller serving in a background thread: its URL, CA bundle path and objects."""

    url: str
    ca: Path
    controller: Controller
    token: trio.lowlevel.TrioToken

    def admin_client(self) -> AdminClient:
        """An AdminClient logged in as the default admin (for arranging state the test then reads through the CLI)."""
        client = AdminClient(self.url, token=None, verify=str(self.ca))
        client.authenticate_password(ADMIN_USERNAME, ADMIN_PASSWORD)
        return client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("controller")
    seed_pki(data_dir)
    previous = passwords.use_params(passwords.ScryptParams(n=2**8, r=8, p=1))
    settings = make_settings(data_dir, tls=True, host="127.0.0.1", port=0)
    ready = threading.Event()
    found: list[Server] = []
    stop: list[trio.Event] = []
    failures: list[BaseException] = []

    def on_ready(controller: Controller, urls: list[str]) -> None:
        found.append(Server(urls[0], data_dir / "pki" / "ca.pem", controller, trio.lowlevel.current_trio_token()))
        ready.set()

    async def serve() -> None:
        stop.append(trio.Event())
        await serve_controller(settings, on_ready=on_ready, shutdown_trigger=stop[0].wait)

    def run() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # reported by the fixture instead of vanishing with the thread
            failures.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name="controller", daemon=True)
    thread.start()
    ready.wait(60)
    if failures or not found:
        raise RuntimeError("the controller did not start") from (failures[0] if failures else None)
    try:
        yield found[0]
    finally:
        trio.from_thread.run_sync(stop[0].set, trio_token=found[0].token)
        thread.join(60)
        passwords.use_params(previous)
        if failures:
            raise failures[0]


@dataclass
class Cli:
    """Runs ``tollgate`` verbs with one configuration file (``TOLLGATE_CONFIG``)."""

    config: Path
    server: Server

    def __call__(self, *args: str, input: str | None = None, env: Mapping[str, str] | None = None) -> Result:
        runner = CliRunner()
        return runner.invoke(cli, list(args), input=input, env={"TOLLGATE_CONFIG": str(self.config), **(env or {})},
                             catch_exceptions=False)

    def ok(self, *args: str, input: str | None = None) -> Result:
        """Run a verb that must succeed; fails the test with its output otherwise."""
        result = self(*args, input=input)
        assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
        return result

    def login(self, *extra: str) -> Result:
        """``tollgate login URL -u admin -p ... --ca CA``: the default admin on the test controller."""
        return self.ok("login", self.server.url, "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, "--ca",
                       str(self.server.ca), *extra)


@pytest.fixture
def tollgate(server: Server, tmp_path: Path) -> Cli:
    return Cli(tmp_path / "config" / "cli.yaml", server)


@pytest.fixture
def logged_in(tollgate: Cli) -> Cli:
    tollgate.login()
    return tollgate


def rows_of(text: str) -> list[list[str]]:
    """A table's lines (header first), each split into its cells on runs of two or more spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip("\n").split("\n")]
