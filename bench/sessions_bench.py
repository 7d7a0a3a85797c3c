"""Scenario ``sessions``: session decisions and service lists at OpenZiti's medium and large model sizes.

Four controllers run side by side (each pinned to core 0, ``wrk`` on core 1, one under load at a time): the medium
and the large model with posture checks of every type (``bench/model.py``), and the large model with no posture
check defined, once with posture evaluation on and once switched off (``--no-posture-evaluation``). The driven
clients are identities with an API session that passed MFA; on the models with checks each first reports passing
posture (``POST /posture-response-bulk``), as a real client does after login.

Every ``POST /edge/client/v1/sessions`` of a run asks for a (client, service) pair not asked before, so each is a
real decision (policies, posture, routers) ending in a durable session row, never the idempotent shortcut. Rounds
interleave every measurement on every server; figures are medians over rounds. T8 runs off, on, on, off in each
round and is the median of the per-round ratios of the two "on" runs' mean to the two "off" runs' mean (T1 in the
http scenario likewise brackets its endpoint with the hello): the machine's speed drifts within a round (T8 swung
from 0.93 to 1.27 between runs when each round measured off, then on), and both servers must also hold as many
session rows, which one run each per round would not give them.

Targets: T7 (decisions/s at the large model >= 50 % of ``GET /current-identity`` req/s on the same server; the
service list's median latency grows by at most 2x from medium to large), T8 (no posture check defined: decisions/s
>= 95 % of those with posture evaluation switched off) and T9 (the large model with checks of every type: decisions/s
with events recorded >= 95 % of the same server's with ``--no-events``, bracketed as T8; each decision records its
session's event).

The events-off server of T9 also serves, in each round, a run of decisions like the one the large server serves for
T7: a decision loads its identity's sessions and checks each again, so its cost grows with the sessions the identity
already holds, and T9 must compare two servers holding about as many.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.client import CLIENT, call
from bench.loadgen import LoadResult, Request, load
from bench.model import posture_responses
from bench.report import ScenarioResult, Target
from bench.servers import Server, Spec, running_all, seed, wait_idle
from bench.stats import median

__all__ = ["run"]

_EVENTS = "POST /sessions (T9)"


class _Pairs:
    """Hands out (client, service) pairs in order, never the same pair twice."""

    def __init__(self, clients: list[dict[str, Any]]) -> None:
        self._iterator = self._all(clients)

    @staticmethod
    def _all(clients: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        depth = max((len(c["services"]) for c in clients), default=0)
        for k in range(depth):
            for client in clients:
                if k < len(client["services"]):
                    yield client["token"], client["services"][k]

    def take(self, count: int) -> list[Request]:
        pairs = list(itertools.islice(self._iterator, count))
        if len(pairs) < count:
            raise RuntimeError("the model has too few (client, service) pairs for this run")
        return [Request.make("POST", f"{CLIENT}/sessions", token, {"serviceId": service})
                for token, service in pairs]


def _report_posture(server: Server) -> None:
    checks = server.model.get("posture_check_ids") or {}
    if not checks:
        return
    body = posture_responses(checks)
    for client in server.model["clients"]:
        status, reply = call(server.url, "POST", f"{CLIENT}/posture-response-bulk", client["token"], body)
        if status != 201:
            raise RuntimeError(f"posture report failed: {status} {reply}")


def run(quick: bool = False) -> ScenarioResult:
    rounds = 1 if quick else 3
    seconds = 0.3 if quick else 5.0
    connections = 4 if quick else 16
    # More pairs than one run uses at up to 1.2k decisions/s (a run that used more would repeat pairs, and a repeat is
    # answered by the idempotent shortcut: the run is then flagged in the notes); a quick run may repeat some.
    per_run = 20 if quick else 6_000
    scale = ("--scale", "0.01") if quick else ()
    work = Path(tempfile.mkdtemp(prefix="tollgate-bench-sessions-"))
    result = ScenarioResult("sessions", quick, ["server", "measure", "req/s", "p50 ms", "p99 ms", "ratio",
                                                "compared with"])
    samples: dict[tuple[str, str], list[LoadResult]] = {}
    try:
        seed(work / "bare-on", ("--model", "large", "--no-posture-checks", *scale))
        shutil.copytree(work / "bare-on", work / "bare-off")
        seed(work / "large", ("--model", "large", *scale))
        shutil.copytree(work / "large", work / "large-quiet")
        specs = {"medium": Spec("controller", work / "medium", ("--model", "medium", *scale)),
                 "large": Spec("controller", work / "large", ("--model", "large", *scale)),
                 "large-quiet": Spec("controller", work / "large-quiet", ("--model", "large", "--no-events")),
                 "bare-on": Spec("controller", work / "bare-on", ("--model", "large")),
                 "bare-off": Spec("controller", work / "bare-off", ("--model", "large", "--no-posture-evaluation"))}
        # Pinning matters for figures, not for a smoke run, where the servers start faster on both cores.
        with running_all(specs, cpu=None if quick else 0) as servers:
            for server in servers.values():
                _report_posture(server)
            pairs = {name: _Pairs(server.model["clients"]) for name, server in servers.items()}
            tokens = {name: [c["token"] for c in server.model["clients"]] for name, server in servers.items()}

            def measure(name: str, what: str, requests: list[Request], r: int) -> None:
                outcome = load(servers[name].url, requests, connections=connections, seconds=seconds, cpu=1,
                               prefer_wrk=not quick)
                wait_idle(servers[name])  # what wrk left in flight finishes before the next measurement
                if outcome.failed:
                    result.notes.append(f"round {r}: {outcome.failed} failed requests: {what} on {name}")
                if what == "POST /sessions" and outcome.requests > len(requests) and not quick:
                    result.notes.append(f"round {r}: {outcome.requests - len(requests)} session requests on {name} "
                                        "repeated a pair (idempotent answers)")
                samples.setdefault((name, what), []).append(outcome)
                result.rounds.append({"round": r, "server": name, "measure": what, "rps": outcome.rps,
                                      "p50_ms": outcome.p50_ms, "p99_ms": outcome.p99_ms,
                                      "requests": outcome.requests, "failed": outcome.failed,
                                      "generator": outcome.generator})

            for r in range(rounds):
                for name in ("medium", "large"):
                    measure(name, "GET /current-identity",
                            [Request.make("GET", f"{CLIENT}/current-identity", t) for t in tokens[name]], r)
                    measure(name, "POST /sessions", pairs[name].take(per_run), r)
                    measure(name, "GET /services",
                            [Request.make("GET", f"{CLIENT}/services", t) for t in tokens[name]], r)
                # T9's baseline gets the decisions the large server just served for T7 (see the module docstring).
                measure("large-quiet", "POST /sessions", pairs["large-quiet"].take(per_run), r)
                # T8 runs off, on, on, off: the machine's speed drifts within a round, and a fixed order (off,
                # then on) charged the drift to one side. Both servers get as many runs, so both also hold as many
                # session rows (each decision adds one, and an API session's earlier sessions are read on every
                # request for the idempotent answer): bracketing with one subject run would favour it.
                for name in ("bare-off", "bare-on", "bare-on", "bare-off"):
                    measure(name, "POST /sessions", pairs[name].take(per_run), r)
                # T9, bracketed as T8: events recorded (the default) against none, on the same large model.
                for name in ("large-quiet", "large", "large", "large-quiet"):
                    measure(name, _EVENTS, pairs[name].take(per_run), r)
        _summarize(result, samples)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _summarize(result: ScenarioResult, samples: dict[tuple[str, str], list[LoadResult]]) -> None:
    def med(name: str, what: str, attr: str) -> float:
        return median(getattr(s, attr) for s in samples[(name, what)])

    labels = {"medium": "medium, checks of every type", "large": "large, checks of every type",
              "large-quiet": "large, checks of every type, events off",
              "bare-on": "large, no checks, evaluation on", "bare-off": "large, no checks, evaluation off"}
    compared = {("medium", "POST /sessions"): ("medium", "GET /current-identity", "rps"),
                ("large", "POST /sessions"): ("large", "GET /current-identity", "rps"),
                ("large", "GET /services"): ("medium", "GET /services", "p50_ms"),
                ("bare-on", "POST /sessions"): ("bare-off", "POST /sessions", "rps"),
                ("large", _EVENTS): ("large-quiet", _EVENTS, "rps")}
    for (name, what) in samples:
        base = compared.get((name, what))
        value = med(name, what, base[2]) if base else float("nan")
        ratio = value / med(base[0], base[1], base[2]) if base else float("nan")
        result.rows.append([labels[name], what, med(name, what, "rps"), med(name, what, "p50_ms"),
                            med(name, what, "p99_ms"), ratio,
                            f"{base[1]} {base[2]} on {labels[base[0]]}" if base else "-"])
    result.targets.append(Target.at_least(
        "T7.decisions", "large model: session decisions/s >= 50% of GET /current-identity req/s",
        med("large", "POST /sessions", "rps"), med("large", "GET /current-identity", "rps"), 0.5, "req/s"))
    result.targets.append(Target.at_most(
        "T7.services", "GET /services median latency, large <= 2x medium", med("large", "GET /services", "p50_ms"),
        med("medium", "GET /services", "p50_ms"), 2.0, "ms"))
    on = [s.rps for s in samples[("bare-on", "POST /sessions")]]
    result.targets.append(Target.bracketed(
        "T8", "no posture checks: decisions/s >= 95% of posture evaluation off (measured just before and after)",
        [(on[2 * r] + on[2 * r + 1]) / 2 for r in range(len(on) // 2)],
        [s.rps for s in samples[("bare-off", "POST /sessions")]], lambda r: r >= 0.95, "req/s"))
    events = [s.rps for s in samples[("large", _EVENTS)]]
    result.targets.append(Target.bracketed(
        "T9", "events on: decisions/s >= 95% of events off (--no-events), large model with checks of every type "
        "(measured just before and after)", [(events[2 * r] + events[2 * r + 1]) / 2 for r in range(len(events) // 2)],
        [s.rps for s in samples[("large-quiet", _EVENTS)]], lambda r: r >= 0.95, "req/s"))
    result.notes.append("every POST /sessions asks for a new (client, service) pair: a full decision and one "
                        "durable session row each; 1,000 driven clients on each model, 16 keep-alive connections")
