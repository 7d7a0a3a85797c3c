"""A real three-member etcd cluster on loopback ports for the cluster tests, and the faults tests inflict on it.

``EtcdCluster.start`` runs Debian's ``etcd`` (3.4) three times in a temporary directory, each member on its own pair
of free loopback ports, and returns once every member has joined and serves clients. The members are tuned for
tests on a small machine: heartbeat and election timeouts shorter than etcd's defaults (a lost leader or quorum shows
within about a second; still long enough that a loaded machine does not hold spurious elections),
pre-vote (a member coming back from a pause does not depose a healthy leader), watch progress notifications every
second, and no auto-compaction (tests compact when they mean to).

Faults: ``kill`` (SIGKILL, then reaped), ``pause``/``resume`` (SIGSTOP/SIGCONT), ``restart`` (a killed member comes
back on its data directory and ports), ``compact``. ``heal`` undoes every fault and waits until the cluster serves
linearizable reads on all members: the per-test fixture calls it, so each test starts on a whole cluster.

Each member's output goes to ``<name>.log`` in the cluster's directory (read it when a test fails). Members die with
the thread that started them (a parent-death signal, where ``setpriv`` exists: start them from the test's own thread,
never from a worker thread) as well as at ``stop``.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import trio

__all__ = ["ETCD", "EtcdCluster", "EtcdMember", "ServerTls", "StartFailed"]

ETCD = "etcd"
READY_LINE = b'"msg":"serving client traffic'
PEERS_LINE = b'"msg":"serving peer traffic"'
# What raft logs when a member's view of the leader changes ("<id> elected leader <id> at term N", "<id> changed
# leader from <id> to <id> at term N", "<id> lost leader <id> at term N").
LEADER_FOUND = re.compile(rb"raft\.node: \w+ (elected leader|changed leader from)")
LEADER_LOST = b"lost leader"
HEARTBEAT_MS = 50
ELECTION_MS = 600
PROGRESS_NOTIFY_INTERVAL = "1s"
START_TIMEOUT = 60.0  # a cold start takes about a second; generous for a machine running the whole suite
# Below the kernel's ephemeral range (32768-60999 by default), so an outgoing connection never takes a port between
# the moment it is chosen and the moment a member binds it.
PORT_RANGE = (20000, 32000)


class StartFailed(RuntimeError):
    """A member exited or did not become ready in time; its log tells why."""


@dataclass(frozen=True)
class ServerTls:
    """PEM files for members that serve clients over TLS and accept only client certificates signed by ``ca``.
    The certificate needs both server and client authentication: etcd's gateway presents it to etcd itself."""

    ca: Path
    cert: Path
    key: Path


@dataclass
class EtcdMember:
    """One member: its name, ports, directories and (while it runs) its process.

    A thread copies the member's output to its log and follows it: whether the member serves clients yet, whether
    its raft node knows a leader, and whether it has exited. Waiting on these is waiting for the member to say so,
    never a poll."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    tls: ServerTls | None = None
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    _state: threading.Condition = field(default_factory=threading.Condition)
    _serving_peers: bool = False
    _ready: bool = False
    _has_leader: bool = False
    _exited: bool = False
    _drain: threading.Thread | None = None

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self, initial_cluster: str, token: str) -> None:
        """Start the member (its data directory decides whether it joins as new or resumes as itself)."""
        assert not self.running, f"{self.name} is already running"
        command = [
            ETCD, "--name", self.name, "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster, "--initial-cluster-token", token,
            "--initial-cluster-state", "new",
            "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_MS), "--pre-vote",
            "--experimental-watch-progress-notify-interval", PROGRESS_NOTIFY_INTERVAL,
            "--auto-compaction-retention", "0",
            "--logger", "zap", "--log-outputs", "stderr",
        ]
        if self.tls:
            command += ["--cert-file", str(self.tls.cert), "--key-file", str(self.tls.key),
                        "--trusted-ca-file", str(self.tls.ca), "--client-cert-auth"]
        setpriv = shutil.which("setpriv")
        if setpriv:  # the member dies with this process even if the session's teardown never runs
            command = [setpriv, "--pdeathsig", "KILL", *command]
        environment = {key: value for key, value in os.environ.items() if not key.startswith("ETCD_")}
        with self._state:
            self._serving_peers = self._ready = self._has_leader = self._exited = False
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, env=environment)
        assert self.process.stderr is not None
        self._drain = threading.Thread(target=self._follow_log, args=(self.process.stderr,), daemon=True,
                                       name=f"etcd-{self.name}-log")
        self._drain.start()

    def _follow_log(self, stream: IO[bytes]) -> None:
        """Copy the member's output to its log (so the pipe never fills) and note what it says about its state."""
        with stream, open(self.log_path, "ab") as log:
            for line in stream:
                log.write(line)
                log.flush()
                changes: dict[str, bool] = {}
                if PEERS_LINE in line:
                    changes["_serving_peers"] = True
                if READY_LINE in line:
                    changes["_ready"] = True
                if LEADER_FOUND.search(line):
                    changes["_has_leader"] = True
                elif LEADER_LOST in line:
                    changes["_has_leader"] = False
                if changes:
                    with self._state:
                        for name, value in changes.items():
                            setattr(self, name, value)
                        self._state.notify_all()
        with self._state:
            self._exited = True
            self._state.notify_all()

    def wait_ready(self, timeout: float, *, peers_only: bool = False) -> None:
        """Block until the member serves clients (or, with ``peers_only``, its peers); StartFailed if it exits or
        takes longer than ``timeout``."""
        with self._state:
            if not self._state.wait_for(lambda: self._exited or (self._serving_peers if peers_only else self._ready),
                                        timeout):
                raise StartFailed(f"{self.name} not ready after {timeout} s; see {self.log_path}")
            if self._exited:
                raise StartFailed(f"{self.name} exited; see {self.log_path}")

    def wait_leader(self) -> None:
        """Block until the member's raft node knows a leader; StartFailed if it exits."""
        with self._state:
            self._state.wait_for(lambda: self._has_leader or self._exited)
            if self._exited:
                raise StartFailed(f"{self.name} exited; see {self.log_path}")

    def kill(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        if self._drain is not None:
            self._drain.join()
        self.process = None
        self.paused = False

    def pause(self) -> None:
        assert self.running and not self.paused, f"{self.name} is not running"
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        # A stop takes effect once every thread of the member has stopped, which a loaded machine delays by
        # milliseconds: wait for the kernel to report the member stopped, so that it does nothing after pause().
        _, status = os.waitpid(self.process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), f"{self.name} did not stop: {status}"
        self.paused = True

    def resume(self) -> None:
        assert self.process is not None and self.paused, f"{self.name} is not paused"
        self.process.send_signal(signal.SIGCONT)
        self.paused = False


def _free_ports(count: int) -> list[int]:
    """Ports in PORT_RANGE that nothing listens on now (a member failing to bind one is retried by ``start``)."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randrange(*PORT_RANGE)
        if port in ports:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    return ports


class EtcdCluster:
    """Three etcd members on loopback: endpoints for clients, and faults for tests."""

    def __init__(self, members: Sequence[EtcdMember], token: str) -> None:
        self.members = list(members)
        self._token = token
        self._initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in members)

    @classmethod
    def start(cls, directory: Path, size: int = 3, *, tls: ServerTls | None = None, attempts: int = 3) -> EtcdCluster:
        """Start ``size`` members in ``directory`` and wait until all serve; new ports on a failed start. With
        ``tls``, clients must use TLS and a client certificate (the helpers below speak plain HTTP only)."""
        for attempt in range(attempts):
            ports = _free_ports(2 * size)
            base = directory / f"attempt-{attempt}"
            base.mkdir(parents=True)
            members = [EtcdMember(name=f"m{i}", client_port=ports[2 * i], peer_port=ports[2 * i + 1],
                                  data_dir=base / f"m{i}", log_path=base / f"m{i}.log", tls=tls)
                       for i in range(size)]
            cluster = cls(members, token=f"tollgate-test-{os.getpid()}-{attempt}")
            try:
                # One after the other: a new member first asks its peers whether it was already bootstrapped, and
                # waits a second for each peer that listens but does not serve yet.
                for member in members:
                    member.spawn(cluster._initial_cluster, cluster._token)
                    member.wait_ready(START_TIMEOUT, peers_only=True)
                for member in members:
                    member.wait_ready(START_TIMEOUT)
            except StartFailed:
                cluster.stop()
                if attempt == attempts - 1:
                    raise
                continue
            return cluster
        raise AssertionError("unreachable")

    @property
    def endpoints(self) -> list[str]:
        """Every member's client URL, in member order."""
        return [member.client_url for member in self.members]

    def kill(self, index: int) -> None:
        """SIGKILL member ``index`` (it stays down until ``restart``)."""
        self.members[index].kill()

    def pause(self, index: int) -> None:
        """SIGSTOP member ``index``: its sockets stay open and nothing answers."""
        self.members[index].pause()

    def resume(self, index: int) -> None:
        """SIGCONT a paused member."""
        self.members[index].resume()

    async def restart(self, index: int) -> None:
        """Start a killed member again on its data directory; return once it serves clients."""
        member = self.members[index]
        member.spawn(self._initial_cluster, self._token)
        await trio.to_thread.run_sync(member.wait_ready, START_TIMEOUT, abandon_on_cancel=True)

    async def wait_healthy(self) -> None:
        """Return once every running, unpaused member answers a linearizable read: it knows a leader and has caught
        up. A member is asked once its log says it knows a leader, and again if that read fails."""
        with trio.fail_after(START_TIMEOUT):
            async with httpx.AsyncClient(timeout=None) as http, trio.open_nursery() as nursery:
                for member in self.members:
                    if member.running and not member.paused:
                        nursery.start_soon(_until_serving, http, member)

    async def heal(self) -> None:
        """Resume paused members, restart killed ones and wait until every member serves."""
        for index, member in enumerate(self.members):
            if member.paused:
                member.resume()
            if not member.running:
                member.kill()  # reap an exited process, if any
                await self.restart(index)
        await self.wait_healthy()

    async def leader(self) -> int:
        """The index of the member that leads now (asked of the first running, unpaused member)."""
        async with httpx.AsyncClient(timeout=10) as http:
            for member in self.members:
                if member.running and not member.paused:
                    status = (await http.post(f"{member.client_url}/v3/maintenance/status", json={})).json()
                    leader_id = int(status["leader"])
                    break
            else:
                raise AssertionError("no member runs")
            for index, member in enumerate(self.members):
                if member.running and not member.paused:
                    status = (await http.post(f"{member.client_url}/v3/maintenance/status", json={})).json()
                    if int(status["header"]["member_id"]) == leader_id:
                        return index
        raise AssertionError(f"the leader {leader_id} is not a running member")

    async def compact(self, revision: int) -> None:
        """Compact the key-value history up to ``revision`` on every member (physically, before returning)."""
        member = next(m for m in self.members if m.running and not m.paused)
        async with httpx.AsyncClient(timeout=30) as http:
            reply = await http.post(f"{member.client_url}/v3/kv/compaction",
                                    json={"revision": revision, "physical": True})
            reply.raise_for_status()

    def stop(self) -> None:
        """Kill every member (paused ones too) and reap them."""
        for member in self.members:
            member.kill()


async def _until_serving(http: httpx.AsyncClient, member: EtcdMember) -> None:
    while True:
        await trio.to_thread.run_sync(member.wait_leader, abandon_on_cancel=True)
        # The header makes a member that lost its leader since its log said otherwise answer at once.
        reply = await http.post(f"{member.client_url}/v3/kv/range", json={"key": "aGVhbHRo", "count_only": True},
                                headers={"Grpc-Metadata-hasleader": "true"})
        if reply.status_code == 200:
            return
