"""Scenario ``console``: the cost of rendering a console list page against the same list from the API.

One controller (in its own process, pinned to core 0 with the load generator on core 1) holds the ``http`` model
(10k identities). Each round measures ``GET /edge/management/v1/identities?limit=100`` (the API's JSON), then
``GET /console/identities?limit=100`` (the console's whole HTML page of the same 100 rows, logged in with a console
cookie), then the API again; one connection each, closed loop. Target C1: the console page's median latency is at
most twice the API list's, as the median over rounds of the ratio to the mean of the two API runs around it (the
machine's speed drifts within a round).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench.client import MGMT, admin_token
from bench.loadgen import LoadResult, Request, load
from bench.report import ScenarioResult, Target
from bench.servers import ADMIN_PASSWORD, Server, Spec, running_all, wait_idle
from bench.stats import median

__all__ = ["PAGE_SIZE", "run"]

PAGE_SIZE = 100
API_KEY = f"GET {MGMT}/identities?limit={PAGE_SIZE}"
CONSOLE_KEY = f"GET /console/identities?limit={PAGE_SIZE}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _cookie(headers: Any, name: str) -> str:
    for header in headers.get_all("Set-Cookie") or []:
        if header.startswith(f"{name}="):
            return str(header.split(";")[0].split("=", 1)[1])
    raise RuntimeError(f"no {name} cookie in the answer")


def console_cookie(base_url: str) -> str:
    """Log the default admin in to the console through its form (a real login); the console session's cookie."""
    opener = urllib.request.build_opener(_NoRedirect)
    with opener.open(f"{base_url}/console/login", timeout=60) as response:
        login_token = _cookie(response.headers, "tollgate_console_login")
        page = response.read().decode()
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    if found is None or found.group(1) != login_token:
        raise RuntimeError("the login form has no token of its own")
    form = urlencode({"username": "admin", "password": ADMIN_PASSWORD, "csrf_token": login_token}).encode()
    request = urllib.request.Request(f"{base_url}/console/login", data=form, method="POST",
                                     headers={"Cookie": f"tollgate_console_login={login_token}",
                                              "Content-Type": "application/x-www-form-urlencoded"})
    try:
        opener.open(request, timeout=60)
    except urllib.error.HTTPError as answer:  # the 303 to the overview, which this opener does not follow
        if answer.code != 303:
            raise
        return _cookie(answer.headers, "tollgate_console")
    raise RuntimeError("the console login did not redirect")


def run(quick: bool = False) -> ScenarioResult:
    rounds = 1 if quick else 5
    seconds = 0.5 if quick else 5.0
    work = Path(tempfile.mkdtemp(prefix="tollgate-bench-console-"))
    model = ("--model", "http") + (("--scale", "0.02") if quick else ())
    result = ScenarioResult("console", quick, ["page", "requests", "req/s", "p50 ms", "p99 ms", "p50 vs API"])
    try:
        with running_all({"controller": Spec("controller", work / "controller", model)},
                         cpu=None if quick else 0) as started:
            server = started["controller"]
            token = admin_token(server.url)
            cookie = console_cookie(server.url)
            api = [Request.make("GET", f"{MGMT}/identities?limit={PAGE_SIZE}", token)]
            console = [Request("GET", f"/console/identities?limit={PAGE_SIZE}",
                               (("cookie", f"tollgate_console={cookie}"),))]
            samples: dict[str, list[LoadResult]] = {API_KEY: [], CONSOLE_KEY: []}
            for r in range(rounds):
                for key, requests in ((API_KEY, api), (CONSOLE_KEY, console), (API_KEY, api)):
                    outcome = _measure(server, requests, seconds, quick)
                    if outcome.failed or set(outcome.statuses) - {200}:
                        result.notes.append(f"round {r}: {key}: {outcome.failed} failed requests, statuses "
                                            f"{outcome.statuses}")
                    samples[key].append(outcome)
                    result.rounds.append({"round": r, "page": key, "requests": outcome.requests, "rps": outcome.rps,
                                          "p50_ms": outcome.p50_ms, "p99_ms": outcome.p99_ms,
                                          "failed": outcome.failed})
        _summarize(result, samples)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _measure(server: Server, requests: list[Request], seconds: float, quick: bool) -> LoadResult:
    outcome = load(server.url, requests, connections=1, seconds=seconds, cpu=None if quick else 1,
                   prefer_wrk=not quick)
    wait_idle(server)
    return outcome


def _summarize(result: ScenarioResult, samples: dict[str, list[LoadResult]]) -> None:
    api, console = samples[API_KEY], samples[CONSOLE_KEY]
    api_p50 = median(s.p50_ms for s in api)
    for key, runs in samples.items():
        p50 = median(s.p50_ms for s in runs)
        result.rows.append([key, sum(s.requests for s in runs), median(s.rps for s in runs), p50,
                            median(s.p99_ms for s in runs), p50 / api_p50 if api_p50 else float("nan")])
    result.targets.append(Target.bracketed(
        "C1", f"the console's list page of {PAGE_SIZE} of 10k identities renders in <= 2x the time of the same "
        "API list (median latency, against the API runs just before and after it)",
        [s.p50_ms for s in console], [s.p50_ms for s in api], lambda r: r <= 2.0, "ms"))
    result.notes.append("plain HTTP, one keep-alive connection per page, the controller pinned to core 0 and the "
                        "load generator to core 1; both pages hold the same 100 rows (the console's is the whole "
                        "HTML page: navigation, filter form, table, pager)")
