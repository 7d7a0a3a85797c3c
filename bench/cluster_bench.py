"""Scenario ``cluster``: what a second controller on its own core adds, what cluster mode costs per request, and how
long a failover takes, in one run.

A three-member etcd on loopback is started here. Three configurations run one after the other, each a fresh network
of ``tollgate serve`` processes: a single controller with no etcd (``single``), one cluster node (``cluster-1``) and
two cluster nodes (``cluster-2``) on the same etcd (each network under its own prefix). Every controller is pinned
to a core of its own with ``taskset`` (core 0, and core 1 for the second node); etcd's members and the load generator
are not pinned, so on this two-core machine they share the cores with the controllers.

On each: an edge router, policies, a service whose Dial policy needs a MAC posture check, and :data:`USERS` users
logged in on the Client API, spread over the nodes. Two closed-loop loads of :data:`CONNECTIONS` keep-alive
connections, split evenly over the nodes (one ``wrk`` per node, or the Python generator where ``wrk`` is missing):

* management reads: ``GET /identities?limit=10`` with an admin session;
* posture events: ``POST /posture-response``, a MAC report for each user in turn, alternately passing and failing,
  so that each one changes the identity's state and re-checks its sessions; on two nodes about half of them arrive
  at the node that does not host the user's actor and are forwarded to its owner.

Beside requests/s and latency, the controllers' CPU time (``/proc/PID/stat``) per request served, etcd's, how many
of the nodes' batches of writes met another node's write and ran again (``tollgate_cluster_write_conflicts``), and
the write txns and quorum reads the nodes sent to etcd per request (``tollgate_etcd_requests``).

Then, on ``cluster-2``, decisions at the load one node holds: posture events offered open loop
(``bench.loadgen.open_loop``: at a fixed rate, latency counted from when each was due) at the rate ``cluster-1``
served in its closed loop, and at half that rate, split evenly over the two nodes.

Then, on ``cluster-2``: failover. The node hosting some user's actor is killed (SIGKILL) and the survivor is asked for
that identity's posture data; the time from the kill to that answer (the new owner's decision) is measured against
the lease TTL (``--lease-ttl 2``).

Full run: 6 s per load; ``--quick``: 1 s and fewer users.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families

from bench.loadgen import LoadResult, Request, load, open_loop
from bench.report import ScenarioResult, Target
from controller.cluster.shards import shard_of
from controller.etcd import EtcdClient
from tests.cluster.controllers import CLIENT, LEASE_TTL, MGMT, Network, admin_session
from tests.cluster.etcd_cluster import EtcdCluster

__all__ = ["run"]

CONNECTIONS = 32
CONFIGURATIONS = {"single": 1, "cluster-1": 1, "cluster-2": 2}  # name -> controllers
COLUMNS = ["configuration", "workload", "req/s", "p50 ms", "p99 ms", "errors", "controller CPU ms/req",
           "etcd CPU ms/req", "write conflicts", "etcd txns/req", "quorum reads/req"]
WORKLOADS = ("management reads", "posture events")
GOOD_MAC, BAD_MAC = "aa:bb:cc:dd:ee:ff", "11:22:33:44:55:66"
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Plan:
    seconds: float
    users: int


FULL = Plan(seconds=6.0, users=500)
QUICK = Plan(seconds=1.0, users=8)


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _total_cpu(pids: Sequence[int]) -> float:
    return sum(_cpu_seconds(pid) for pid in pids)


@dataclass
class Setup:
    admin: str  # token
    users: list[tuple[str, str]]  # identity id, Client API token
    check: str


async def _create(http: httpx.AsyncClient, url: str, admin: str, path: str, body: dict[str, Any]) -> str:
    reply = await http.post(f"{url}{MGMT}{path}", json=body, headers={"zt-session": admin})
    if reply.status_code != 201:
        raise RuntimeError(f"{path}: {reply.status_code} {reply.text}")
    return str(reply.json()["data"]["id"])


async def _setup(net: Network, http: httpx.AsyncClient, plan: Plan) -> Setup:
    first = net.nodes[0].url
    admin = (await admin_session(http, net.nodes[0])).token
    await _create(http, first, admin, "/edge-routers", {"name": "er", "roleAttributes": ["er"]})
    await _create(http, first, admin, "/edge-router-policies", {
        "name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    await _create(http, first, admin, "/service-edge-router-policies", {
        "name": "serp", "semantic": "AnyOf", "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    await _create(http, first, admin, "/services", {"name": "svc", "encryptionRequired": True, "roleAttributes": ["s"]})
    check = await _create(http, first, admin, "/posture-checks", {
        "name": "mac", "typeId": "MAC", "roleAttributes": ["mac"], "macAddresses": [GOOD_MAC]})
    await _create(http, first, admin, "/service-policies", {
        "name": "p", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"],
        "postureCheckRoles": ["#mac"]})
    users: list[tuple[str, str] | None] = [None] * plan.users

    async def user(index: int) -> None:
        node = net.nodes[index % len(net.nodes)].url
        identity = await _create(http, node, admin, "/identities", {
            "name": f"user{index}", "type": "User", "isAdmin": False, "roleAttributes": ["u"]})
        await _create(http, node, admin, "/authenticators", {"identityId": identity, "method": "updb",
                                                             "username": f"user{index}", "password": "bench-pw-1"})
        login = await http.post(f"{node}{CLIENT}/authenticate?method=password",
                                json={"username": f"user{index}", "password": "bench-pw-1"})
        if login.status_code != 200:
            raise RuntimeError(f"login: {login.status_code} {login.text}")
        users[index] = (identity, login.json()["data"]["token"])

    limit = trio.CapacityLimiter(16)

    async def limited(index: int) -> None:
        async with limit:
            await user(index)

    async with trio.open_nursery() as nursery:
        for index in range(plan.users):
            nursery.start_soon(limited, index)
    return Setup(admin, [u for u in users if u is not None], check)


def _requests(setup: Setup, workload: str) -> list[Request]:
    if workload == "management reads":
        return [Request.make("GET", f"{MGMT}/identities?limit=10", setup.admin)]
    return [Request.make("POST", f"{CLIENT}/posture-response", token,
                         {"id": setup.check, "typeId": "MAC", "macAddresses": [mac]})
            for mac in (GOOD_MAC, BAD_MAC) for _identity, token in setup.users]


async def _counts(net: Network, http: httpx.AsyncClient) -> dict[str, float]:
    """The nodes' write conflicts, write txns and quorum reads sent to etcd so far, all nodes together (0 for a
    single controller, which has none)."""
    wanted = {("tollgate_cluster_write_conflicts", None): "conflicts",
              ("tollgate_etcd_requests", "kv/txn"): "txns", ("tollgate_etcd_requests", "kv/range"): "ranges"}
    totals = dict.fromkeys(wanted.values(), 0.0)
    for node in net.nodes:
        url = node.metrics_url
        if url is None:
            raise RuntimeError(f"{node.name} printed no metrics URL")
        for family in text_string_to_metric_families((await http.get(url)).text):
            for sample in family.samples:
                name = wanted.get((family.name, sample.labels.get("call")))
                if name is not None and sample.name.endswith("_total"):
                    totals[name] += sample.value
    return totals


async def _load(net: Network, http: httpx.AsyncClient, requests: list[Request], seconds: float,
                etcd_pids: Sequence[int]) -> dict[str, float]:
    """One load on every node at once; the figures of all nodes together."""
    pids = [node.process.pid for node in net.nodes if node.process is not None]
    per_node = max(1, CONNECTIONS // len(net.nodes))
    results: list[LoadResult] = []

    async def one(url: str) -> None:
        results.append(await trio.to_thread.run_sync(
            lambda: load(url, requests, connections=per_node, seconds=seconds)))

    controllers, etcd, counts = _total_cpu(pids), _total_cpu(etcd_pids), await _counts(net, http)
    async with trio.open_nursery() as nursery:
        for node in net.nodes:
            nursery.start_soon(one, node.url)
    controllers, etcd = _total_cpu(pids) - controllers, _total_cpu(etcd_pids) - etcd
    after = await _counts(net, http)
    served = max(1, sum(r.requests for r in results))
    return {"per_s": sum(r.rps for r in results), "p50_ms": max(r.p50_ms for r in results),
            "p99_ms": max(r.p99_ms for r in results), "errors": sum(r.failed for r in results),
            "controller_cpu_ms": controllers * 1e3 / served, "etcd_cpu_ms": etcd * 1e3 / served,
            "conflicts": after["conflicts"] - counts["conflicts"],
            "txns_per_req": (after["txns"] - counts["txns"]) / served,
            "ranges_per_req": (after["ranges"] - counts["ranges"]) / served}


async def _decisions(net: Network, requests: list[Request], rate: float, seconds: float) -> dict[str, float]:
    """Posture events offered open loop at ``rate`` per second over every node: the decisions' latency."""
    per_node = max(1, CONNECTIONS // len(net.nodes))
    result = await trio.to_thread.run_sync(lambda: open_loop(
        [node.url for node in net.nodes], requests, rate=rate, seconds=seconds, connections=per_node))
    return {"rate": rate, "per_s": result.rps, "p50_ms": result.p50_ms, "p99_ms": result.p99_ms,
            "errors": result.failed}


async def _failover(net: Network, http: httpx.AsyncClient, etcd: EtcdClient, setup: Setup) -> float:
    """Seconds from killing the owner of a user's actor to the survivor's answer for that identity."""
    survivor, victim = net.nodes
    for identity, _token in setup.users:
        holder = (await etcd.range(f"{net.prefix}owners/{shard_of(identity):03d}")).kvs
        if holder and holder[0].value.decode() == victim.name:
            break
    else:
        raise RuntimeError("the victim hosts no user")
    killed = time.perf_counter()
    victim.kill()
    reply = await http.get(f"{survivor.url}{MGMT}/identities/{identity}/posture-data",
                           headers={"zt-session": setup.admin})
    if reply.status_code != 200:
        raise RuntimeError(f"after the kill: {reply.status_code} {reply.text}")
    return time.perf_counter() - killed


async def _run(plan: Plan, base: Path) -> dict[str, Any]:
    etcd = EtcdCluster.start(base / "etcd")
    etcd_pids = [m.process.pid for m in etcd.members if m.process is not None]
    figures: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as http, \
                EtcdClient(etcd.endpoints) as client:
            for name, size in CONFIGURATIONS.items():
                endpoints = () if name == "single" else etcd.endpoints
                net = Network(base / name, endpoints, size=size, cpus=[0, 1][:size],
                              extra=("--metrics-address", "127.0.0.1:0"))
                try:
                    await net.start()
                    setup = await _setup(net, http, plan)
                    figures[name] = {workload: await _load(net, http, _requests(setup, workload), plan.seconds,
                                                           etcd_pids) for workload in WORKLOADS}
                    if name == "cluster-2":
                        held = figures["cluster-1"]["posture events"]["per_s"]
                        events = _requests(setup, "posture events")
                        figures["decisions"] = [await _decisions(net, events, rate, plan.seconds)
                                                for rate in (held, held / 2)]
                        figures["failover_s"] = await _failover(net, http, client, setup)
                finally:
                    net.stop()
    finally:
        etcd.stop()
    return figures


def build_result(figures: dict[str, Any], quick: bool) -> ScenarioResult:
    result = ScenarioResult("cluster", quick, COLUMNS, rounds=[figures])
    for name in CONFIGURATIONS:
        for workload in WORKLOADS:
            row = figures[name][workload]
            result.rows.append([name, workload, round(row["per_s"]), round(row["p50_ms"], 2), round(row["p99_ms"], 2),
                                int(row["errors"]), round(row["controller_cpu_ms"], 3), round(row["etcd_cpu_ms"], 3),
                                int(row["conflicts"]), round(row["txns_per_req"], 3),
                                round(row["ranges_per_req"], 3)])
    for key, workload in (("reads", "management reads"), ("events", "posture events")):
        result.targets.append(Target.at_least(
            f"{key}2", f"{workload}/s on 2 nodes, each on its own core, >= 1.5x on 1 node",
            figures["cluster-2"][workload]["per_s"], figures["cluster-1"][workload]["per_s"], 1.5, "req/s"))
        result.targets.append(Target.at_most(
            f"cpu.{key}", f"{workload}: a cluster node's CPU per request <= 1.3x a single controller's",
            figures["cluster-1"][workload]["controller_cpu_ms"], figures["single"][workload]["controller_cpu_ms"],
            1.3, "ms"))
    at_held, at_half = figures["decisions"]
    result.targets.append(Target.bound(
        "decision.p99", f"posture decisions' p99 on 2 nodes at the load 1 node holds ({at_held['rate']:.0f}/s, "
        f"open loop) <= 5 ms", at_held["p99_ms"], 5.0, "ms"))
    for label, row in (("the rate 1 node holds", at_held), ("half that rate", at_half)):
        result.notes.append(f"open loop on 2 nodes at {label}: {row['rate']:.0f} posture events/s offered, "
                            f"{row['per_s']:.0f}/s answered, p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
                            f"{int(row['errors'])} failed or unanswered")
    result.targets.append(Target.bound(
        "failover", f"kill -9 to the new owner's first decision <= lease TTL ({LEASE_TTL} s) + 1 s",
        figures["failover_s"], LEASE_TTL + 1.0, "s"))
    errors = sum(figures[name][w]["errors"] for name in CONFIGURATIONS for w in WORKLOADS)
    result.notes.append(f"{CONNECTIONS} connections split over the nodes; {len(figures['single'])} loads per "
                        f"configuration; requests answered other than 2xx: {errors}")
    result.notes.append("etcd CPU ms/req: etcd's three members' CPU per request served (the read barrier's quorum "
                        "reads, the posture writes' txns, leases, watches); zero work for the single controller")
    return result


def run(quick: bool) -> ScenarioResult:
    plan = QUICK if quick else FULL
    base = Path(tempfile.mkdtemp(prefix="tollgate-bench-cluster-"))
    try:
        figures = trio.run(_run, plan, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return build_result(figures, quick)

