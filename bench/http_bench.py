"""Scenario ``http``: the real controller against a bare ASGI hello app on the same hypercorn Trio worker.

Four servers run side by side, each pinned to core 0 with the load generator (``wrk``) on core 1, and only one is
under load at a time:

* the hello app (the baseline);
* a bare quart-trio app answering a static list (the framework's own cost, for reference);
* the controller with the ``http`` model (10k identities, posture checks of every type) plus 100k parked
  identities, durable LMDB, INFO request logging as ``tollgate serve`` runs;
* the same controller with the 100k identities' actors alive, parked on MFA deadlines two hours ahead.

A round loads the hello app, the controller's posture-check list, the hello app again and the quart app, then the
other endpoints on each controller; rounds repeat, and every figure is the median over rounds. T1 is the median of
per-round ratios against the mean of the two hello runs around its endpoint (the machine's speed drifts within a
round: in one run the same hello measured 1,265 and 1,015 req/s two rounds apart).

Targets: T1 (posture-check list >= 50 % of hello's requests/s, p99 <= 3x hello's) and T2 (with 100k actors loaded
every endpoint's p99 <= 1.5x its p99 without; no garbage-collection pause over 50 ms while serving).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.client import MGMT, admin_token
from bench.loadgen import LoadResult, Request, load
from bench.report import ScenarioResult, Target
from bench.servers import Server, Spec, running_all, wait_idle
from bench.stats import median

__all__ = ["run"]

ACTORS = 100_000
T1_KEY = ("GET /posture-checks?limit=10", "plain")
LIST_KEY = "GET /identities?limit=10"
FILTER_KEY = "GET /identities?filter (10k)"


def _endpoints(server: Server, token: str, round_id: str) -> dict[str, list[Request]]:
    ids = server.model["identity_ids"]
    step = max(1, len(ids) // 1000)
    return {
        "GET /posture-checks?limit=10": [Request.make("GET", f"{MGMT}/posture-checks?limit=10", token)],
        "GET /identities/{id}": [Request.make("GET", f"{MGMT}/identities/{i}", token) for i in ids[::step]],
        LIST_KEY: [Request.make("GET", f"{MGMT}/identities?limit=10", token)],
        # The role attribute narrows the candidates to the model's 10k users through the index; `contains` has no
        # index, so each of those 10k is then read and matched (and counted for the page's totalCount).
        FILTER_KEY: [
            Request.make("GET", f"{MGMT}/identities?limit=10&filter="
                         + quote(f'anyOf(roleAttributes) = "users" and name contains "{n:03d}7"'), token)
            for n in range(100)],
        "POST /identities": [
            Request.make("POST", f"{MGMT}/identities", token,
                         {"name": f"new-{round_id}-{n}", "type": "Device", "isAdmin": False,
                          "roleAttributes": ["bench"]})
            for n in range(60_000)],
    }


def run(quick: bool = False) -> ScenarioResult:
    rounds = 1 if quick else 3
    seconds = 0.3 if quick else 5.0
    connections = 4 if quick else 16
    actors = 200 if quick else ACTORS
    work = Path(tempfile.mkdtemp(prefix="tollgate-bench-http-"))
    model = ("--model", "http") + (("--scale", "0.02") if quick else ())
    result = ScenarioResult("http", quick, ["endpoint", "server", "req/s", "p50 ms", "p99 ms", "vs hello req/s",
                                            "p99 vs no actors"])
    try:
        # Both controllers hold the same rows; only the second has the parked identities' actors alive.
        model = (*model, "--actors", str(actors))
        specs = {"hello": Spec("hello", work / "hello"), "quart": Spec("quart", work / "quart"),
                 "plain": Spec("controller", work / "plain", model),
                 "actors": Spec("controller", work / "actors", (*model, "--wake"))}
        # Pinning matters for figures, not for a smoke run, where the servers start faster on both cores.
        with running_all(specs, cpu=None if quick else 0) as started:
            plain, loaded = started["plain"], started["actors"]
            tokens = {"plain": admin_token(plain.url), "actors": admin_token(loaded.url)}
            servers = {"plain": plain, "actors": loaded}
            samples: dict[tuple[str, str], list[LoadResult]] = {}

            def measure(server: Server, requests: Sequence[Request]) -> LoadResult:
                outcome = load(server.url, requests, connections=connections, seconds=seconds, cpu=1,
                               prefer_wrk=not quick)
                # wrk leaves requests in flight when it stops; let them finish before the next measurement.
                wait_idle(server)
                return outcome

            def bare(r: int, name: str) -> None:
                outcome = measure(started[name], [Request.make("GET", f"/{name}")])
                samples.setdefault((name, name), []).append(outcome)
                result.rounds.append({"round": r, "endpoint": name, "server": name, **_asdict(outcome)})

            for r in range(rounds):
                # The hello brackets T1's endpoint (measured first on the plain controller): the machine's speed
                # drifts within a round, so T1 compares each round with the hello just before and just after it.
                bare(r, "hello")
                for name in ("plain", "actors"):
                    for endpoint, requests in _endpoints(servers[name], tokens[name], f"{r}{name}").items():
                        outcome = measure(servers[name], requests)
                        if outcome.failed:
                            result.notes.append(f"round {r}: {outcome.failed} failed requests on {endpoint} "
                                                f"({name})")
                        samples.setdefault((endpoint, name), []).append(outcome)
                        result.rounds.append({"round": r, "endpoint": endpoint, "server": name,
                                              **_asdict(outcome)})
                        if (endpoint, name) == T1_KEY:
                            bare(r, "hello")
                            bare(r, "quart")
        gc_pauses = loaded.gc
        _summarize(result, samples, gc_pauses, actors)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _bracketed(name: str, goal: str, samples: dict[tuple[str, str], list[LoadResult]], attr: str,
               meets: Callable[[float], bool], unit: str) -> Target:
    """T1 against the hello measured just before and just after it in each round (two hello samples per round)."""
    return Target.bracketed(name, goal, [getattr(s, attr) for s in samples[T1_KEY]],
                            [getattr(s, attr) for s in samples[("hello", "hello")]], meets, unit)


def _asdict(outcome: LoadResult) -> dict[str, Any]:
    return {"generator": outcome.generator, "requests": outcome.requests, "rps": outcome.rps,
            "p50_ms": outcome.p50_ms, "p99_ms": outcome.p99_ms, "failed": outcome.failed}


def _summarize(result: ScenarioResult, samples: dict[tuple[str, str], list[LoadResult]], gc_pauses: dict[str, Any],
               actors: int) -> None:
    def med(key: tuple[str, str], attr: str) -> float:
        return median(getattr(s, attr) for s in samples[key])

    hello_rps, hello_p99 = med(("hello", "hello"), "rps"), med(("hello", "hello"), "p99_ms")
    result.rows.append(["hello", "hello", hello_rps, med(("hello", "hello"), "p50_ms"), hello_p99, 1.0, "-"])
    result.rows.append(["static 10-item list", "bare quart-trio", med(("quart", "quart"), "rps"),
                        med(("quart", "quart"), "p50_ms"), med(("quart", "quart"), "p99_ms"),
                        med(("quart", "quart"), "rps") / hello_rps, "-"])
    endpoints = sorted({e for e, s in samples if s not in ("hello", "quart")},
                       key=list(dict.fromkeys(e for e, _ in samples)).index)
    def loaded_p99(endpoint: str) -> float:
        """The median over rounds of p99 with the actors over p99 without: each round measures both servers."""
        pairs = zip(samples[(endpoint, "actors")], samples[(endpoint, "plain")], strict=True)
        return median(loaded.p99_ms / bare.p99_ms for loaded, bare in pairs)

    for endpoint in endpoints:
        for name in ("plain", "actors"):
            label = "controller" if name == "plain" else f"controller + {actors:,} actors"
            p99 = med((endpoint, name), "p99_ms")
            vs = loaded_p99(endpoint) if name == "actors" else "-"
            result.rows.append([endpoint, label, med((endpoint, name), "rps"), med((endpoint, name), "p50_ms"), p99,
                                med((endpoint, name), "rps") / hello_rps, vs])
    result.targets.append(_bracketed("T1.rps", "posture-check list req/s >= 50% of the hello's just before and "
                                     "after (stretch 60%)", samples, "rps", lambda r: r >= 0.5, "req/s"))
    result.targets.append(_bracketed("T1.p99", "posture-check list p99 <= 3x the hello's just before and after",
                                     samples, "p99_ms", lambda r: r <= 3.0, "ms"))
    # The filtered list against the unfiltered first page, each round's ratio on each server (both lists at once).
    ratios = [f.rps / plain.rps for name in ("plain", "actors")
              for f, plain in zip(samples[(FILTER_KEY, name)], samples[(LIST_KEY, name)], strict=True)]
    worst_ratio = min(ratios)
    result.targets.append(Target(
        "L.filter", "filtered identities list (role attribute and name contains, 10k users) req/s >= 25% of "
        "GET /identities?limit=10 req/s, in every round on both servers (worst shown)",
        worst_ratio >= 0.25, med((FILTER_KEY, "plain"), "rps"), med((LIST_KEY, "plain"), "rps"), worst_ratio,
        "req/s"))
    worst = max(endpoints, key=loaded_p99)
    ratio = loaded_p99(worst)
    result.targets.append(Target(
        "T2.p99", f"with {actors:,} actors every endpoint's p99 <= 1.5x without (worst: {worst})",
        not math.isnan(ratio) and ratio <= 1.5, med((worst, "actors"), "p99_ms"), med((worst, "plain"), "p99_ms"),
        ratio, "ms"))
    result.targets.append(Target.bound("T2.gc", f"longest GC pause while serving with {actors:,} actors <= 50 ms",
                                       float(gc_pauses.get("max_ms", float("nan"))), 50.0, "ms"))
    result.notes.append(f"GC while serving with {actors:,} actors: {gc_pauses}")
    result.notes.append("'p99 vs no actors' (and T2) is the median over rounds of each round's ratio: every round "
                        "measures both controllers, minutes apart at most, while the rounds themselves drift")
    result.notes.append("plain HTTP on every server (TLS would cost each the same handshake and record work); "
                        "16 keep-alive connections; both controllers hold the 10k-identity model plus the "
                        f"{actors:,} parked identities; the filtered list narrows to the 10k users by role "
                        "attribute (index) and then matches `name contains` on each (no index)")
