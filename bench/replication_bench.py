"""Scenario ``replication``: what a replicated identity create costs against a single node's, in one run.

The subject is a node of a cluster in this process (its replica's writer committing every batch to a real
three-member etcd on loopback, started here, and applying it to its LMDB replica), built and started as
``tollgate serve --etcd`` builds it, minus HTTP. The baseline is a single controller on the same disk (durable LMDB,
commits on the writer's pinned thread). Both run ``domain.create("identities", ...)`` (validation, references,
indexes, the answer read back) in closed loops: one writer (the latency of a lone create) and 64 concurrent writers
(throughput and latency under load). Rounds alternate baseline and subject on fresh data directories (and a fresh
etcd prefix); every figure is the median over rounds.

etcd's three members, the node and the load share this machine's cores: the figures include their CPU, as a real
deployment's would not.

Full run: 3 rounds of about 8 s each (plus etcd's start); ``--quick``: one short round.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from bench.controller_run import running_controller
from bench.report import ScenarioResult, Target
from bench.stats import median, percentile
from bench.storage_bench import closed_loop
from controller.cluster import ClusterNode, connect
from controller.runtime import memory
from controller.runtime.composition import Controller
from controller.runtime.settings import Settings
from controller.runtime.task_tree import cluster_config, start_services
from tests.cluster.etcd_cluster import EtcdCluster

__all__ = ["run"]

WRITERS = (1, 64)
COLUMNS = ["store", "writers", "creates/s", "p50 ms", "p99 ms", "writes per commit"]


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    seconds: dict[int, float]  # per writer count


FULL = Plan(rounds=3, seconds={1: 2.0, 64: 3.0})
QUICK = Plan(rounds=1, seconds={1: 0.2, 64: 0.3})


@asynccontextmanager
async def running_node(endpoints: Sequence[str], data_dir: Path, *, prefix: str | None = None,
                       admin_password: str = "bench-admin-password") -> AsyncIterator[Controller]:
    """A node named ``bench`` of the network under ``prefix`` on ``endpoints`` (a new prefix by default), started as
    ``serve_controller`` starts one; the first node of a network creates its admin with ``admin_password``."""
    settings = Settings(data_dir=data_dir, tls=False, admin_password=admin_password, etcd=tuple(endpoints),
                        etcd_prefix=prefix or f"/bench/{uuid.uuid4().hex}/", node_name="bench")
    config = cluster_config(settings)
    async with connect(config) as etcd, trio.open_nursery() as membership:
        node = ClusterNode(config, etcd)
        await membership.start(node.membership.run)
        await node.join(data_dir / "pki", (), settings.server_key_type)
        controller = Controller.open(settings, node=node)
        try:
            with memory.runtime_policy(controller.engine.actors):
                async with trio.open_nursery() as services:
                    await start_services(controller, services)
                    memory.settle()
                    yield controller
                    services.cancel_scope.cancel()
        finally:
            controller.close()
        membership.cancel_scope.cancel()


async def _measure(controller: Controller, plan: Plan) -> dict[str, dict[str, float]]:
    serial = 0

    async def create() -> None:
        nonlocal serial
        serial += 1
        await controller.domain.create("identities", {"name": f"bench-{serial:08d}", "type": "User",
                                                      "isAdmin": False, "roleAttributes": ["bench"]})

    figures: dict[str, dict[str, float]] = {}
    for writers in WRITERS:
        await closed_loop(writers, plan.seconds[writers] / 4, create)  # warm up
        writer = controller.writer
        commits, mutations = writer.commits, writer.mutations
        run = await closed_loop(writers, plan.seconds[writers], create)
        batched = (writer.mutations - mutations) / max(1, writer.commits - commits)
        figures[str(writers)] = {"per_s": run.ops / run.seconds, "p50_ms": percentile(run.latencies, 50) * 1e3,
                                 "p99_ms": percentile(run.latencies, 99) * 1e3, "per_commit": batched}
    return figures


async def _rounds(plan: Plan, base: Path) -> list[dict[str, Any]]:
    etcd = EtcdCluster.start(base / "etcd")
    rounds = []
    try:
        for index in range(plan.rounds):
            async with running_controller(base / f"single-{index}") as single:
                baseline = await _measure(single.controller, plan)
            async with running_node(etcd.endpoints, base / f"node-{index}") as node:
                subject = await _measure(node, plan)
            rounds.append({"single": baseline, "replicated": subject})
    finally:
        etcd.stop()
    return rounds


def _median(rounds: list[dict[str, Any]], store: str, writers: int, figure: str) -> float:
    return median(r[store][str(writers)][figure] for r in rounds)


def build_result(rounds: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    result = ScenarioResult("replication", quick, COLUMNS, rounds=rounds)
    for store in ("single", "replicated"):
        for writers in WRITERS:
            result.rows.append([store, writers, round(_median(rounds, store, writers, "per_s")),
                                round(_median(rounds, store, writers, "p50_ms"), 2),
                                round(_median(rounds, store, writers, "p99_ms"), 2),
                                round(_median(rounds, store, writers, "per_commit"), 1)])
    result.targets += [
        Target.at_most("p50", "a lone replicated create's p50 <= 3x a single node's",
                       _median(rounds, "replicated", 1, "p50_ms"), _median(rounds, "single", 1, "p50_ms"), 3.0, "ms"),
        Target.at_least("rate64", "replicated creates/s at 64 writers >= 50% of a single node's",
                        _median(rounds, "replicated", 64, "per_s"), _median(rounds, "single", 64, "per_s"), 0.5,
                        "creates/s"),
    ]
    loaded_p50 = [_median(rounds, store, 64, "p50_ms") for store in ("replicated", "single")]
    result.notes.append(f"at 64 writers the replicated p50 is {loaded_p50[0]:.1f} ms against {loaded_p50[1]:.1f} ms "
                        f"({loaded_p50[0] / loaded_p50[1]:.2f}x)")
    return result


def run(quick: bool) -> ScenarioResult:
    plan = QUICK if quick else FULL
    base = Path(tempfile.mkdtemp(prefix="tollgate-bench-replication-"))
    try:
        rounds = trio.run(_rounds, plan, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return build_result(rounds, quick)
