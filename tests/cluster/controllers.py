"""Real controller processes of one network on the worker's etcd, for the cluster tests.

A :class:`Node` is ``tollgate serve --etcd ... --etcd-prefix P --port 0`` on its own data directory (plain HTTP unless
asked for TLS), started in its own process group and announced by the URLs it prints; its output and log go beside
its data directory. A :class:`Network` is a few nodes on one prefix, shared by the tests of a module: ``heal`` starts
again the ones a test killed or stopped. Every wait is bounded; nothing sleeps a fixed time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

__all__ = ["ADMIN_PASSWORD", "CLIENT", "MGMT", "START_TIMEOUT", "Network", "Node", "Session", "wait_until"]

ADMIN_PASSWORD = "cluster-admin-password"
MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"
START_TIMEOUT = 90.0  # seconds from spawning to serving, on a loaded machine
LEASE_TTL = 2
_URL = re.compile(r"^Management API: (\S+)/edge/management/v1$", re.MULTILINE)
_METRICS_URL = re.compile(r"^Metrics: +(\S+)$", re.MULTILINE)


def _tollgate() -> str:
    script = Path(sys.executable).with_name("tollgate")
    if not script.exists():
        raise RuntimeError(f"no tollgate script next to {sys.executable}: install the project")
    return str(script)


@dataclass
class Node:
    """One controller process of a network."""

    name: str
    directory: Path
    endpoints: Sequence[str]
    prefix: str
    tls: bool = False
    extra: Sequence[str] = ()
    cpu: int | None = None  # the core to pin the process to (taskset), if any
    lease_ttl: int = LEASE_TTL
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    starts: int = 0
    paused: bool = False

    @property
    def data_dir(self) -> Path:
        return self.directory / self.name

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self) -> None:
        """Start the process (on its data directory as it is); :meth:`wait_serving` waits for its URL. With no
        etcd endpoints it is a single controller, no cluster."""
        assert not self.running, f"{self.name} runs already"
        self.starts += 1
        out = self.directory / f"{self.name}.out"
        command = [_tollgate(), "serve", "--port", "0", "--data-dir", str(self.data_dir), *self.extra]
        if self.endpoints:
            command += ["--etcd", ",".join(self.endpoints), "--etcd-prefix", self.prefix, "--node-name", self.name,
                        "--lease-ttl", str(self.lease_ttl)]
        if not self.tls:
            command.append("--no-tls")
        if self.cpu is not None:
            command = ["taskset", "-c", str(self.cpu), *command]
        env = {**os.environ, "TOLLGATE_ADMIN_USERNAME": "admin", "TOLLGATE_ADMIN_PASSWORD": ADMIN_PASSWORD}
        with out.open("wb") as stdout, self.log.open("ab") as stderr:
            self.process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, start_new_session=True)
        self.url = ""

    @property
    def metrics_url(self) -> str | None:
        """The metrics listener's URL the process printed (started with ``--metrics-address``), if any."""
        out = self.directory / f"{self.name}.out"
        found = _METRICS_URL.search(out.read_text(errors="replace")) if out.exists() else None
        return found.group(1) if found else None

    def _announced(self) -> bool:
        """Whether the process printed its URL (noted in ``url``); RuntimeError if it exited first."""
        out = self.directory / f"{self.name}.out"
        found = _URL.search(out.read_text(errors="replace")) if out.exists() else None
        if found:
            self.url = found.group(1)
            return True
        if not self.running:
            raise RuntimeError(f"{self.name} exited with {self.process and self.process.returncode}; see {self.log}")
        return False

    async def wait_serving(self, within: float = START_TIMEOUT) -> None:
        """Return once the process serves (within ``within`` seconds); RuntimeError if it exited first. Its output
        is a file: read it again every 50 ms."""
        with trio.fail_after(within):
            while True:
                if self._announced():
                    return
                await trio.sleep(0.05)

    def wait_serving_sync(self, timeout: float = START_TIMEOUT) -> None:
        """:meth:`wait_serving` outside Trio (a session fixture)."""
        give_up = time.monotonic() + timeout
        while not self._announced():
            if time.monotonic() > give_up:
                raise TimeoutError(f"{self.name} did not serve within {timeout} s; see {self.log}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the process group, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP the process group: it runs no code (and answers nothing) until :meth:`resume`."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGCONT)
        self.paused = False

    async def stop(self) -> int:
        """SIGTERM and wait (SIGKILL after 30 s); the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with trio.move_on_after(30):
                await trio.to_thread.run_sync(self.process.wait, abandon_on_cancel=True)
            self.kill()
        return self.process.wait()

    def log_lines(self, event: str) -> list[dict[str, Any]]:
        """The log records whose event is ``event``."""
        records = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == event:
                records.append(record)
        return records


@dataclass
class Session:
    """An admin's API session on a network, and an HTTP client to reach any node with it."""

    token: str
    http: httpx.AsyncClient

    def headers(self) -> dict[str, str]:
        return {"zt-session": self.token}

    async def get(self, node: Node, path: str) -> httpx.Response:
        return await self.http.get(node.url + MGMT + path, headers=self.headers())

    async def post(self, node: Node, path: str, body: Any) -> httpx.Response:
        return await self.http.post(node.url + MGMT + path, json=body, headers=self.headers())

    async def patch(self, node: Node, path: str, body: Any) -> httpx.Response:
        return await self.http.patch(node.url + MGMT + path, json=body, headers=self.headers())

    async def delete(self, node: Node, path: str) -> httpx.Response:
        return await self.http.delete(node.url + MGMT + path, headers=self.headers())


async def login(http: httpx.AsyncClient, node: Node, username: str = "admin",
                password: str = ADMIN_PASSWORD, api: str = MGMT) -> httpx.Response:
    return await http.post(f"{node.url}{api}/authenticate?method=password",
                           json={"username": username, "password": password})


async def admin_session(http: httpx.AsyncClient, node: Node) -> Session:
    reply = await login(http, node)
    assert reply.status_code == 200, reply.text
    return Session(reply.json()["data"]["token"], http)


@dataclass
class Network:
    """Controllers sharing one prefix of the worker's etcd."""

    directory: Path
    endpoints: Sequence[str]
    size: int = 3
    prefix: str = field(default_factory=lambda: f"/tests/{uuid.uuid4().hex}/")
    tls: bool = False
    cpus: Sequence[int | None] = ()  # per node, the core it is pinned to (none beyond the sequence's end)
    extra: Sequence[str] = ()  # more options for every node's ``tollgate serve``
    lease_ttl: int = LEASE_TTL
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.nodes = [Node(f"n{i}", self.directory, self.endpoints, self.prefix, self.tls, extra=self.extra,
                           cpu=self.cpus[i] if i < len(self.cpus) else None, lease_ttl=self.lease_ttl)
                      for i in range(self.size)]

    async def start(self, within: float = START_TIMEOUT) -> None:
        """Start every node at once and wait until each serves (within ``within`` seconds)."""
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            await node.wait_serving(within)

    def start_sync(self) -> None:
        """:meth:`start` outside Trio."""
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            node.wait_serving_sync()

    async def heal(self) -> None:
        """Resume paused nodes; start again the nodes that are not running (on their data directories)."""
        for node in self.nodes:
            if node.paused and node.running:
                node.resume()
        dead = [node for node in self.nodes if not node.running]
        for node in dead:
            node.spawn()
        for node in dead:
            await node.wait_serving()

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


async def wait_until(condition: Any, within: float, *, pause: float = 0.05) -> None:
    """Wait (at most ``within`` seconds) until the async ``condition()``, asked again every ``pause``, is true: for
    what a test can only learn by asking another process."""
    with trio.fail_after(within):
        while True:
            if await condition():
                return
            await trio.sleep(pause)


def elapsed_since(started: float) -> float:
    return time.monotonic() - started
