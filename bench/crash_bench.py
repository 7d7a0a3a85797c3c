"""Scenario ``crash``: every write acknowledged under load survives ``kill -9``, and pending MFA deadlines re-arm.

A trial starts ``tollgate serve`` (its own process group, a fresh data directory, port 0, HTTPS with its own CA),
builds the model and runs the 32 clients of ``bench/crash_load.py``, recording every acknowledged write. After a
seeded random time (and once a session behind the short MFA check exists) it kills the process group with SIGKILL,
restarts ``tollgate serve`` on the same data directory and checks through the management API (with the admin's API
session from before the crash):

* every acknowledged identity, password authenticator, API session (login) with the SDK info it reported (in the
  identity's ``/identities/{id}/posture-data``), Dial session, posture report (in the posture data), started MFA
  enrolment (the user's own ``GET /current-identity/mfa``), verified enrolment (``isMfaEnabled``) and MFA pass of
  an API session (in the posture data) is there; a write that was never acknowledged may or may not be;
* the pending MFA deadlines were re-armed: the ``mfa-short`` sessions whose deadline (``passedAt`` + timeout, from
  the posture data) passed while the controller was down disappear right after the restart; those whose deadline
  is still ahead are there at the first listing after the restart, and disappear once it passes;
* the restarted controller logged no error and stops cleanly on SIGTERM.

Full run: 20 trials of 1-4 s of load (about 3 minutes); ``--quick``: 2 trials of about a second of load.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from bench.crash_check import REVOCATION_GRACE, RestartCheck
from bench.crash_load import Endpoint, Load, admin_login, create_model
from bench.report import ScenarioResult, Target
from bench.stats import median

__all__ = ["COLUMNS", "FULL", "QUICK", "Plan", "build_result", "run", "run_trials"]

ADMIN_PASSWORD = "crash-admin-password"  # a throwaway controller's admin
START_TIMEOUT = 120.0  # seconds from spawning `tollgate serve` to its URLs being printed
STOP_TIMEOUT = 60.0  # seconds a SIGTERM may take (the graceful timeout is 10 s)
SHORT_MFA_WAIT = 30.0  # seconds the kill may wait past its random time for the first short-MFA session
_URL = re.compile(r"^Management API: (\S+)/edge/management/v1$", re.MULTILINE)
_CA = re.compile(r"^CA bundle:\s+(\S+)$", re.MULTILINE)
_ERROR_LEVELS = {"error", "critical"}


@dataclass(frozen=True, slots=True)
class Plan:
    """How many trials, how long the load runs before the kill (uniform in the range, seconds), the short MFA
    check's timeout (seconds), the number of clients, the seed of every random choice, and how long after a
    deadline (or the restart, if later) its session may still be listed before it counts as not fired."""

    trials: int
    load_seconds: tuple[float, float]
    short_timeout: int
    clients: int = 32
    seed: int = 2026
    revocation_grace: float = REVOCATION_GRACE


FULL = Plan(trials=20, load_seconds=(1.0, 4.0), short_timeout=2)
QUICK = Plan(trials=2, load_seconds=(0.6, 1.2), short_timeout=1)


@dataclass(slots=True)
class _Server:
    """A running ``tollgate serve``: its process, where clients reach it, its log, and how long it took to serve."""

    process: trio.Process
    endpoint: Endpoint
    log: Path
    start_seconds: float

    def kill(self) -> None:
        """SIGKILL the whole process group (a no-op once the process has been reaped)."""
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)

    async def stop(self) -> int:
        """SIGTERM and wait; SIGKILL if it takes longer than :data:`STOP_TIMEOUT`. Returns the exit status."""
        self.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_TIMEOUT):
            return await self.process.wait()
        self.kill()
        return await self.process.wait()


def _command() -> list[str]:
    script = Path(sys.executable).with_name("tollgate")
    if not script.exists():
        raise RuntimeError(f"no tollgate script next to {sys.executable}: install the project (make run)")
    return [str(script), "serve", "--port", "0"]


def _announced(text: str) -> Endpoint | None:
    """The endpoint a controller's standard output announces once it serves (None before the CA bundle line, which
    ``controller/runtime/task_tree.py`` prints last)."""
    url, ca = _URL.search(text), _CA.search(text)
    return Endpoint(url.group(1), Path(ca.group(1))) if url and ca else None


async def _start(data_dir: Path, name: str) -> _Server:
    """Start ``tollgate serve`` on ``data_dir`` in a new process group; return once it prints its URLs. Its output
    and log go next to ``data_dir``, as ``name.out`` and ``name.log``.

    Raises:
        RuntimeError: the process exited first; TimeoutError: it did not serve within :data:`START_TIMEOUT`.
    """
    out, log = data_dir.parent / f"{name}.out", data_dir.parent / f"{name}.log"
    env = {**os.environ, "TOLLGATE_ADMIN_USERNAME": "admin", "TOLLGATE_ADMIN_PASSWORD": ADMIN_PASSWORD}
    with out.open("wb") as stdout, log.open("wb") as stderr:
        started = time.perf_counter()
        process = await trio.lowlevel.open_process([*_command(), "--data-dir", str(data_dir)], stdout=stdout,
                                                   stderr=stderr, env=env, start_new_session=True)
    try:
        while (endpoint := _announced(out.read_text())) is None:
            if process.poll() is not None:
                raise RuntimeError(f"tollgate serve exited with {process.returncode} before serving; see {log}")
            if time.perf_counter() - started > START_TIMEOUT:
                raise TimeoutError(f"tollgate serve did not serve within {START_TIMEOUT} s; see {log}")
            await trio.sleep(0.01)
    except BaseException:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        raise
    return _Server(process, endpoint, log, time.perf_counter() - started)


def _log_errors(log: Path) -> list[str]:
    """The lines of a controller's log at level error or above, and any line that is not JSON (a traceback)."""
    errors = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            level = json.loads(line).get("level")
        except (ValueError, AttributeError):
            level = "error" if line.strip() else None
        if level in _ERROR_LEVELS:
            errors.append(line)
    return errors


async def _trial(plan: Plan, number: int, base: Path) -> dict[str, Any]:
    """One trial on a fresh data directory under ``base``; its figures (see :func:`build_result`)."""
    rng = random.Random(f"crash:{plan.seed}:{number}")
    load_seconds = rng.uniform(*plan.load_seconds)
    data_dir = base / f"trial-{number}"
    first = await _start(data_dir, f"trial-{number}-first")
    try:
        admin = await admin_login(first.endpoint, ADMIN_PASSWORD)
        model = await create_model(first.endpoint, admin, plan.clients, plan.short_timeout)
        load = Load(first.endpoint, model, f"{plan.seed}:{number}")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(load.run, plan.clients)
            await trio.sleep(load_seconds)
            # Not before a short-MFA session exists (on a slow machine the random time may come first): the kill
            # must leave deadlines pending for the restart to re-arm.
            with trio.move_on_after(SHORT_MFA_WAIT):
                await load.ledger.short_mfa_dialled.wait()
            load.killed = True
            first.kill()
            kill_wall = time.time()
            nursery.cancel_scope.cancel()
    finally:
        first.kill()
        await first.process.wait()
    second = await _start(data_dir, f"trial-{number}-restart")
    try:
        serving_wall = time.time()
        async with second.endpoint.client() as client:
            checked = await RestartCheck(client, model, load.ledger, plan.revocation_grace).run(kill_wall, serving_wall)
        exit_code = await second.stop()
    finally:
        second.kill()
        await second.process.wait()
    ledger = load.ledger
    return {"trial": number, "load_s": load_seconds, "requests": ledger.requests,
            "acknowledged": ledger.acknowledged(), **checked, "unanswered": ledger.unanswered,
            "failed_before_kill": ledger.failed_before_kill, "refused": dict(sorted(ledger.refused.items())),
            "start_s": first.start_seconds, "restart_s": second.start_seconds, "exit_code": exit_code,
            "restart_errors": _log_errors(second.log), "errors_under_load": len(_log_errors(first.log))}


async def run_trials(plan: Plan, base: Path) -> list[dict[str, Any]]:
    """Run ``plan.trials`` trials one after another, each on a fresh data directory under ``base`` (which keeps
    their data directories and the controllers' logs); returns each trial's figures as plain JSON-ready values:
    what was acknowledged and lost by kind (``acknowledged``, ``lost``, ``lost_ids``), the short-MFA deadlines
    (``deadlines``, ``not_fired``), the restart (``restart_s``, ``restart_errors``, ``check_errors``, ``exit_code``)
    and how the requests ended."""
    return [await _trial(plan, number, base) for number in range(1, plan.trials + 1)]


_LABELS = {"identity": "identities created", "authenticator": "password authenticators created",
           "api-session": "logins (API sessions)", "login-sdk-info": "logins' SDK info (API session posture data)",
           "session": "Dial sessions", "posture-report": "posture reports (single and bulk)",
           "mfa-enrolment": "MFA enrolments started", "mfa-verified": "MFA enrolments verified",
           "mfa-pass": "MFA passes (API session posture data)"}
COLUMNS = ["measure", "total", "lost", "median/trial", "max/trial", "unit"]
_NAN = math.nan


def _row(label: str, per_trial: list[float], lost: float, unit: str) -> list[Any]:
    return [label, sum(per_trial), lost, median(per_trial), max(per_trial, default=_NAN), unit]


def _spread(label: str, values: list[float], unit: str) -> list[Any]:
    """A row of a pooled sample: how many, its median and its maximum."""
    return [label, len(values), _NAN, median(values), max(values, default=_NAN), unit]


def build_result(rounds: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    """The table, targets and notes of the measured trials (``rounds``, as :func:`run_trials` returns them)."""
    result = ScenarioResult("crash", quick, COLUMNS, rounds=rounds)
    rows = result.rows
    rows.append(["trials (kill -9 of the process group under load, restart)", len(rounds), _NAN, _NAN, _NAN,
                 "trials"])
    for kind, label in _LABELS.items():
        rows.append(_row(f"acknowledged {label}", [r["acknowledged"][kind] for r in rounds],
                         sum(r["lost"][kind] for r in rounds), "writes"))
    for key, label in (("before_kill", "passed before the kill"), ("while_down", "passed while down"),
                       ("ahead", "ahead at the first listing"),
                       ("at_first_listing", "between serving and the first listing")):
        rows.append(_row(f"short-MFA sessions, deadline {label}", [r["deadlines"][key] for r in rounds], _NAN,
                         "sessions"))
    rows.append(_row("requests sent", [r["requests"] for r in rounds], _NAN, "requests"))
    rows.append(_row("refused (not 2xx)", [sum(r["refused"].values()) for r in rounds], _NAN, "requests"))
    rows.append(_row("unanswered at the kill (may or may not be stored)", [r["unanswered"] for r in rounds], _NAN,
                     "requests"))
    rows.append(_spread("first start, fresh data directory: spawn -> serving", [r["start_s"] for r in rounds], "s"))
    rows.append(_spread("restart after kill -9: spawn -> serving", [r["restart_s"] for r in rounds], "s"))
    rows.append(_spread("deadline passed while down: revoked, after serving",
                        [v for r in rounds for v in r["revoked_after_restart_s"]], "s"))
    rows.append(_spread("deadline ahead at the restart: revoked, after the deadline",
                        [v for r in rounds for v in r["fired_after_deadline_s"]], "s"))
    acknowledged = sum(sum(r["acknowledged"].values()) for r in rounds)
    losses = sum(sum(r["lost"].values()) for r in rounds)
    pending = sum(r["deadlines"]["pending_at_kill"] for r in rounds)
    not_fired = sum(len(r["not_fired"]) for r in rounds)
    unclean = sum(bool(r["restart_errors"] or r["check_errors"]) or r["exit_code"] != 0 for r in rounds)
    result.targets = [
        Target.bound("C1.losses", f"acknowledged writes missing after the restart = 0 (of {acknowledged:,} checked)",
                     float(losses), 0.0, "writes"),
        Target.bound("C1.deadlines", f"short-MFA sessions still there {REVOCATION_GRACE:.0f} s after their deadline "
                     f"= 0 ({pending} deadlines were pending at the kill)", float(not_fired), 0.0, "sessions"),
        Target.bound("C1.clean", "restarts that logged an error, failed a request or did not stop cleanly = 0",
                     float(unclean), 0.0, "restarts"),
    ]
    result.notes += _notes(rounds)
    return result


def _notes(rounds: list[dict[str, Any]]) -> list[str]:
    refused: dict[str, int] = {}
    for r in rounds:
        for key, count in r["refused"].items():
            refused[key] = refused.get(key, 0) + count
    loads = [r["load_s"] for r in rounds]
    notes = [f"{len(rounds)} trials, each on a fresh data directory: 32 HTTPS clients for {min(loads):.2f}-"
             f"{max(loads):.2f} s (seeded), then SIGKILL to the process group; every acknowledged write is looked "
             "up through the management API of the restarted controller",
             f"requests with no answer before the kill: {sum(r['failed_before_kill'] for r in rounds)}; error lines "
             f"logged under load (before the kill): {sum(r['errors_under_load'] for r in rounds)}",
             "refused requests: " + (", ".join(f"{k} x{v}" for k, v in sorted(refused.items())) or "none")]
    for r in rounds:
        if r["lost_ids"] or r["not_fired"] or r["restart_errors"] or r["check_errors"] or r["exit_code"] != 0:
            notes.append(f"trial {r['trial']}: lost {r['lost_ids']}, deadlines not fired {r['not_fired']}, exit "
                         f"{r['exit_code']}, failed requests {r['check_errors'][:3]}, restart log errors "
                         f"{r['restart_errors'][:3]}")
    return notes


def run(quick: bool) -> ScenarioResult:
    """Run the scenario (``quick``: two short trials, a smoke run)."""
    plan = QUICK if quick else FULL
    base = Path(tempfile.mkdtemp(prefix="tollgate-bench-crash-"))
    try:
        rounds = trio.run(run_trials, plan, base)
    except BaseException:
        print(f"crash scenario failed: its data directories and logs are kept in {base}", file=sys.stderr)
        raise
    shutil.rmtree(base, ignore_errors=True)
    return build_result(rounds, quick)
