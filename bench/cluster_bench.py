"""Scenario ``cluster``: what three controller processes serve against one, in one run, and how long a failover takes.

A three-member etcd on loopback is started here; on it, a network of one ``tollgate serve --etcd`` process, then a
network of three (each under its own prefix). On each: an edge router, policies, a service whose Dial policy needs a
MAC posture check, and :data:`USERS` users logged in on the Client API, spread over the nodes. Two closed loops of
:data:`CLIENTS` concurrent HTTP clients, their requests spread round-robin over the nodes:

* management reads: ``GET /identities?limit=10`` with an admin session;
* posture events: ``POST /posture-response`` (a MAC report, alternately passing and failing, so that each one
  changes the identity's state and re-checks its sessions) for a random user; on three nodes two thirds of them
  arrive at a node that does not host the user's actor and are forwarded to its owner.

Then, on the three-node network only, failover: one node is killed (SIGKILL) and a survivor is asked for the posture
data of an identity the dead node hosted; the time from the kill to that answer (the new owner's decision) is
measured against the lease TTL (``--lease-ttl 2``).

Everything shares this machine's two cores (etcd's members, the controllers and this load generator, which is
itself CPU-bound in Python): the ratio says what a second and third process add when they share the same cores, not
what three machines would serve.

Full run: 6 s per loop; ``--quick``: 1 s.
"""

from __future__ import annotations

import itertools
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.report import ScenarioResult, Target
from bench.stats import percentile
from bench.storage_bench import closed_loop
from controller.cluster.shards import shard_of
from controller.etcd import EtcdClient
from tests.cluster.controllers import CLIENT, LEASE_TTL, MGMT, Network, admin_session
from tests.cluster.etcd_cluster import EtcdCluster

__all__ = ["run"]

USERS = 24
CLIENTS = 32
COLUMNS = ["nodes", "workload", "req/s", "p50 ms", "p99 ms", "errors"]
WORKLOADS = ("management reads", "posture events")


@dataclass(frozen=True, slots=True)
class Plan:
    seconds: float


FULL = Plan(seconds=6.0)
QUICK = Plan(seconds=1.0)


@dataclass
class Setup:
    admin: dict[str, str]
    users: list[tuple[str, dict[str, str]]]  # identity id, client session headers
    check: str


async def _create(http: httpx.AsyncClient, url: str, admin: dict[str, str], path: str, body: dict[str, Any]) -> str:
    reply = await http.post(f"{url}{MGMT}{path}", json=body, headers=admin)
    if reply.status_code != 201:
        raise RuntimeError(f"{path}: {reply.status_code} {reply.text}")
    return str(reply.json()["data"]["id"])


async def _setup(net: Network, http: httpx.AsyncClient) -> Setup:
    first = net.nodes[0].url
    admin = (await admin_session(http, net.nodes[0])).headers()
    await _create(http, first, admin, "/edge-routers", {"name": "er", "roleAttributes": ["er"]})
    await _create(http, first, admin, "/edge-router-policies", {
        "name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    await _create(http, first, admin, "/service-edge-router-policies", {
        "name": "serp", "semantic": "AnyOf", "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    await _create(http, first, admin, "/services", {"name": "svc", "encryptionRequired": True, "roleAttributes": ["s"]})
    check = await _create(http, first, admin, "/posture-checks", {
        "name": "mac", "typeId": "MAC", "roleAttributes": ["mac"], "macAddresses": ["aa:bb:cc:dd:ee:ff"]})
    await _create(http, first, admin, "/service-policies", {
        "name": "p", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"],
        "postureCheckRoles": ["#mac"]})
    users = []
    for index in range(USERS):
        node = net.nodes[index % len(net.nodes)].url
        identity = await _create(http, first, admin, "/identities", {
            "name": f"user{index}", "type": "User", "isAdmin": False, "roleAttributes": ["u"]})
        await _create(http, first, admin, "/authenticators", {"identityId": identity, "method": "updb",
                                                              "username": f"user{index}", "password": "bench-pw-1"})
        login = await http.post(f"{node}{CLIENT}/authenticate?method=password",
                                json={"username": f"user{index}", "password": "bench-pw-1"})
        if login.status_code != 200:
            raise RuntimeError(f"login: {login.status_code} {login.text}")
        users.append((identity, {"zt-session": login.json()["data"]["token"]}))
    return Setup(admin, users, check)


async def _loop(seconds: float, request: Callable[[str], Awaitable[httpx.Response]],
                urls: list[str]) -> dict[str, float]:
    turn = itertools.cycle(urls)
    errors = 0

    async def op() -> None:
        nonlocal errors
        reply = await request(next(turn))
        if reply.status_code >= 300:
            errors += 1

    await closed_loop(CLIENTS, seconds / 4, op)  # warm up
    errors = 0
    run = await closed_loop(CLIENTS, seconds, op)
    return {"per_s": run.ops / run.seconds, "p50_ms": percentile(run.latencies, 50) * 1e3,
            "p99_ms": percentile(run.latencies, 99) * 1e3, "errors": errors}


async def _measure(net: Network, http: httpx.AsyncClient, plan: Plan) -> dict[str, dict[str, float]]:
    setup = await _setup(net, http)
    urls = [node.url for node in net.nodes]
    flip = itertools.count()

    async def read(url: str) -> httpx.Response:
        return await http.get(f"{url}{MGMT}/identities?limit=10", headers=setup.admin)

    async def report(url: str) -> httpx.Response:
        _identity, user = random.choice(setup.users)
        mac = "AA:BB:CC:DD:EE:FF" if next(flip) % 2 else "11:22:33:44:55:66"
        return await http.post(f"{url}{CLIENT}/posture-response", headers=user,
                               json={"id": setup.check, "typeId": "MAC", "macAddresses": [mac]})

    return {"management reads": await _loop(plan.seconds, read, urls),
            "posture events": await _loop(plan.seconds, report, urls)}


async def _failover(net: Network, http: httpx.AsyncClient, etcd: EtcdClient) -> float:
    """Seconds from killing a node to a survivor's answer for an identity that node hosted."""
    admin = (await admin_session(http, net.nodes[0])).headers()
    victim = net.nodes[-1]
    listed = await http.get(f"{net.nodes[0].url}{MGMT}/identities?limit=-1", headers=admin)
    for row in listed.json()["data"]:
        holder = (await etcd.range(f"{net.prefix}owners/{shard_of(row['id']):03d}")).kvs
        if holder and holder[0].value.decode() == victim.name:
            identity = row["id"]
            break
    else:
        raise RuntimeError("the victim hosts no identity")
    killed = time.perf_counter()
    victim.kill()
    reply = await http.get(f"{net.nodes[0].url}{MGMT}/identities/{identity}/posture-data", headers=admin)
    if reply.status_code != 200:
        raise RuntimeError(f"after the kill: {reply.status_code} {reply.text}")
    return time.perf_counter() - killed


async def _run(plan: Plan, base: Path) -> dict[str, Any]:
    etcd = EtcdCluster.start(base / "etcd")
    figures: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=CLIENTS * 2)) as http, \
                EtcdClient(etcd.endpoints) as client:
            for size in (1, 3):
                net = Network(base / f"net{size}", etcd.endpoints, size=size)
                try:
                    await net.start()
                    figures[str(size)] = await _measure(net, http, plan)
                    if size == 3:
                        figures["failover_s"] = await _failover(net, http, client)
                finally:
                    net.stop()
    finally:
        etcd.stop()
    return figures


def build_result(figures: dict[str, Any], quick: bool) -> ScenarioResult:
    result = ScenarioResult("cluster", quick, COLUMNS, rounds=[figures])
    for size in ("1", "3"):
        for workload in WORKLOADS:
            row = figures[size][workload]
            result.rows.append([int(size), workload, round(row["per_s"]), round(row["p50_ms"], 2),
                                round(row["p99_ms"], 2), int(row["errors"])])
    for key, workload in (("reads", "management reads"), ("events", "posture events")):
        result.targets.append(Target.at_least(
            f"{key}3", f"{workload}/s on 3 nodes >= 1.5x on 1 node (the same 2 cores)",
            figures["3"][workload]["per_s"], figures["1"][workload]["per_s"], 1.5, "req/s"))
    result.targets.append(Target.bound(
        "failover", f"kill -9 to the new owner's first decision <= lease TTL ({LEASE_TTL} s) + 1 s",
        figures["failover_s"], LEASE_TTL + 1.0, "s"))
    return result


def run(quick: bool) -> ScenarioResult:
    plan = QUICK if quick else FULL
    base = Path(tempfile.mkdtemp(prefix="tollgate-bench-cluster-"))
    try:
        figures = trio.run(_run, plan, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return build_result(figures, quick)
