"""Scenario ``cluster``: what a second controller on its own core adds, what cluster mode costs per request, and how
long a failover takes, in one run, on a network of :data:`IDENTITIES` identities.

A three-member etcd on loopback is started here. Three configurations run one after the other, each a fresh network
of ``tollgate serve`` processes: a single controller with no etcd (``single``), one cluster node (``cluster-1``) and
two cluster nodes (``cluster-2``) on the same etcd (each network under its own prefix). Every controller is pinned
to a core of its own with ``taskset`` (core 0, and core 1 for the second node); etcd's members and the load generator
are not pinned, so on this two-core machine they share the cores with the controllers.

Each network holds :data:`IDENTITIES` identities before its controllers start (``bench/identity_seeding.py``: each
with an API session that passed MFA, a Dial session and an MFA deadline, all more than 45 minutes ahead, so that
every identity has a live actor and none of the deadlines falls during the run). A single controller's are loaded
into its data directory; a cluster's are written through a node of this process, its replicated writes, before the
controllers start, which then build their replicas from etcd. Then, through the API: an edge router, policies, a
service whose Dial policy needs a MAC posture check. Two closed-loop loads of :data:`CONNECTIONS` keep-alive
connections, split evenly over the nodes (one ``wrk`` per node, or the Python generator where ``wrk`` is missing):

* management reads: ``GET /identities?limit=10`` with an admin session;
* posture events: ``POST /posture-response``, MAC reports from :data:`REPORTERS` of the identities (spread over the
  whole population), each identity's reports alternately passing and failing, so that each one changes the identity's
  state; on two nodes about half of them arrive at the node that does not host the identity's actor and are forwarded
  to its owner.

Beside requests/s and latency, the controllers' CPU time (``/proc/PID/stat``) per request served, etcd's, how many
of the nodes' batches of writes met another node's write and ran again (``tollgate_cluster_write_conflicts``), and
the write txns and quorum reads the nodes sent to etcd per request (``tollgate_etcd_requests``), and the read
barrier's rounds that a write txn answered instead of a quorum read (``tollgate_cluster_read_barrier_rounds``).

Then, on ``cluster-2``, decisions at the load one node holds: posture events offered open loop
(``bench.loadgen.open_loop``: at a fixed rate, latency counted from when each was due) at the rate ``cluster-1``
served in its closed loop, and at half that rate, split evenly over the two nodes.

Then, on ``cluster-2``: failover. The node hosting some identity's actor is killed (SIGKILL) and the survivor is asked
for that identity's posture data; the time from the kill to that answer (the new owner's decision) is measured
against the lease TTL (``--lease-ttl 3``, the default).

Full run: 6 s per load; ``--quick``: 1 s and a few hundred identities.
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

from bench.controller_run import running_controller
from bench.identity_seeding import SeededLogin, seed_mfa_logins
from bench.loadgen import LoadResult, Request, load, open_loop
from bench.replication_bench import running_node
from bench.report import ScenarioResult, Target
from controller.cluster.shards import shard_of
from controller.etcd import EtcdClient
from controller.runtime.composition import Controller
from tests.cluster.controllers import ADMIN_PASSWORD, CLIENT, MGMT, Network, admin_session
from tests.cluster.etcd_cluster import EtcdCluster

__all__ = ["run"]

CONNECTIONS = 32
CONFIGURATIONS = {"single": 1, "cluster-1": 1, "cluster-2": 2}  # name -> controllers
COLUMNS = ["configuration", "workload", "req/s", "p50 ms", "p99 ms", "errors", "controller CPU ms/req",
           "etcd CPU ms/req", "write conflicts", "etcd txns/req", "quorum reads/req",
           "barrier rounds on txns/req"]
WORKLOADS = ("management reads", "posture events")
GOOD_MAC, BAD_MAC = "aa:bb:cc:dd:ee:ff", "11:22:33:44:55:66"
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Plan:
    seconds: float
    identities: int
    reporters: int


IDENTITIES = 100_000
REPORTERS = 10_000
FULL = Plan(seconds=6.0, identities=IDENTITIES, reporters=REPORTERS)
QUICK = Plan(seconds=1.0, identities=300, reporters=100)
LEASE_TTL = 3  # seconds: the default of ``tollgate serve``
START_WITHIN = 300.0  # seconds for a controller to serve: a cluster node first reads every identity from etcd
SETUP_TIMEOUT = 600.0  # seconds for one of the setup's writes
# Deadlines from 50 minutes ahead, at 1,000/s: later than any run lasts, and within the MFA check's hour.
_DEADLINES_FROM, _DEADLINES_PER_SECOND, _MFA_TIMEOUT = 3_000.0, 1_000.0, 3_600


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _total_cpu(pids: Sequence[int]) -> float:
    return sum(_cpu_seconds(pid) for pid in pids)


@dataclass
class Setup:
    admin: str  # token
    reporters: list[SeededLogin]
    check: str


async def _create(http: httpx.AsyncClient, url: str, admin: str, path: str, body: dict[str, Any]) -> str:
    # A change of access is answered once every identity has re-checked: a minute or more at 100,000.
    reply = await http.post(f"{url}{MGMT}{path}", json=body, headers={"zt-session": admin}, timeout=SETUP_TIMEOUT)
    if reply.status_code != 201:
        raise RuntimeError(f"{path}: {reply.status_code} {reply.text}")
    return str(reply.json()["data"]["id"])


async def _seeded(net: Network, plan: Plan) -> list[SeededLogin]:
    """``plan.identities`` identities in the network before its controllers start (see the module's docstring)."""
    async def seed(controller: Controller) -> list[SeededLogin]:
        return await seed_mfa_logins(controller, plan.identities, deadlines_per_second=_DEADLINES_PER_SECOND,
                                     start_in=_DEADLINES_FROM, timeout_seconds=_MFA_TIMEOUT)

    if not net.endpoints:
        async with running_controller(net.nodes[0].data_dir, admin_password=ADMIN_PASSWORD) as running:
            return await seed(running.controller)
    async with running_node(net.endpoints, net.directory / "seeding", prefix=net.prefix,
                            admin_password=ADMIN_PASSWORD) as controller:
        return await seed(controller)


async def _setup(net: Network, http: httpx.AsyncClient, seeded: list[SeededLogin], plan: Plan) -> Setup:
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
        "name": "p", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#all"], "serviceRoles": ["#s"],
        "postureCheckRoles": ["#mac"]})
    stride = max(1, len(seeded) // plan.reporters)
    return Setup(admin, seeded[::stride][:plan.reporters], check)


def _requests(setup: Setup, workload: str) -> list[Request]:
    if workload == "management reads":
        return [Request.make("GET", f"{MGMT}/identities?limit=10", setup.admin)]
    return [Request.make("POST", f"{CLIENT}/posture-response", login.api_token,
                         {"id": setup.check, "typeId": "MAC", "macAddresses": [mac]})
            for login in setup.reporters for mac in (GOOD_MAC, BAD_MAC)]


async def _counts(net: Network, http: httpx.AsyncClient) -> dict[str, float]:
    """The nodes' write conflicts, write txns and quorum reads sent to etcd so far, all nodes together (0 for a
    single controller, which has none)."""
    wanted = {("tollgate_cluster_write_conflicts", None): "conflicts",
              ("tollgate_etcd_requests", "kv/txn"): "txns", ("tollgate_etcd_requests", "kv/range"): "ranges",
              ("tollgate_cluster_read_barrier_rounds", "write txn"): "ridden"}
    totals = dict.fromkeys(wanted.values(), 0.0)
    for node in net.nodes:
        url = node.metrics_url
        if url is None:
            raise RuntimeError(f"{node.name} printed no metrics URL")
        for family in text_string_to_metric_families((await http.get(url)).text):
            for sample in family.samples:
                name = wanted.get((family.name, sample.labels.get("call", sample.labels.get("answer"))))
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
            "ranges_per_req": (after["ranges"] - counts["ranges"]) / served,
            "ridden_per_req": (after["ridden"] - counts["ridden"]) / served}


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
    for login in setup.reporters:
        identity = login.identity_id
        holder = (await etcd.range(f"{net.prefix}owners/{shard_of(identity):03d}")).kvs
        if holder and holder[0].value.decode() == victim.name:
            break
    else:
        raise RuntimeError("the victim hosts no identity")
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
    figures: dict[str, Any] = {"identities": plan.identities, "reporters": plan.reporters}
    try:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as http, \
                EtcdClient(etcd.endpoints) as client:
            for name, size in CONFIGURATIONS.items():
                endpoints = () if name == "single" else etcd.endpoints
                net = Network(base / name, endpoints, size=size, cpus=[0, 1][:size],
                              extra=("--metrics-address", "127.0.0.1:0"), lease_ttl=LEASE_TTL)
                try:
                    began = time.perf_counter()
                    seeded = await _seeded(net, plan)
                    seeded_at = time.perf_counter()
                    await net.start(START_WITHIN)
                    started_at = time.perf_counter()
                    setup = await _setup(net, http, seeded, plan)
                    figures[name] = {workload: await _load(net, http, _requests(setup, workload), plan.seconds,
                                                           etcd_pids) for workload in WORKLOADS}
                    figures[name]["seconds"] = {"seeding": seeded_at - began, "starting": started_at - seeded_at,
                                                "setup": time.perf_counter() - started_at}
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
                                round(row["ranges_per_req"], 3), round(row["ridden_per_req"], 3)])
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
    for name in CONFIGURATIONS:
        took = figures[name]["seconds"]
        result.notes.append(f"{name}: seeding {took['seeding']:.1f} s, controllers serving {took['starting']:.1f} s "
                            f"later (a cluster node reads every identity from etcd), the setup's policies and check "
                            f"(each re-checked by every identity) {took['setup']:.1f} s and both loads")
    errors = sum(figures[name][w]["errors"] for name in CONFIGURATIONS for w in WORKLOADS)
    result.notes.append(f"{figures['identities']:,} identities with live actors in each network; posture events from "
                        f"{figures['reporters']:,} of them")
    result.notes.append(f"{CONNECTIONS} connections split over the nodes; {len(WORKLOADS)} loads per "
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

