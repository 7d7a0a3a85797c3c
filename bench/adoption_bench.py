"""Scenario ``adoption``: what a restart costs now that every identity holding API sessions re-checks them as it is
adopted (``PostureEngine.adopt``), measured against the same restart's own start.

A controller (``bench/controller_run.py``: in-process, durable LMDB, as ``tollgate serve`` starts it minus HTTP) is
loaded with ``N`` identities (``bench/identity_seeding.py``: each with an API session that passed MFA, a Dial session
and a persisted MFA deadline an hour ahead), stopped, and started again on the same data directory, several times.
Each restart reports:

* open -> services up (what a restart took before the re-checks existed, less the actors' work);
* services up -> every adopted identity's re-check settled (``PostureEngine.adoptions_rechecked``: the re-checks
  run on the engine's own task, a chunk at a time, while the controller already serves);
* the messages the identity actors handled (each adopted identity's re-check and the settle that paces them: two
  per identity, or the re-checks did not run);
* the process's CPU time over both, and per identity;
* the Dial sessions left: a re-check of what the rules still grant revokes nothing, so all ``N`` must remain.

Full run: 20,000 identities, 3 restarts; ``--quick``: 500 identities, 1 restart.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.controller_run import running_controller
from bench.identity_seeding import seed_mfa_identities
from bench.report import ScenarioResult, Target
from bench.stats import median

__all__ = ["COLUMNS", "run", "seed"]

COLUMNS = ["restart", "identities", "actor messages", "services up s", "re-checks settled s", "CPU s",
           "CPU us/identity", "sessions kept"]
_FULL = (20_000, 3)
_QUICK = (500, 1)
_DEADLINES_PER_SECOND = 1_000.0
_START_IN = 3_600.0  # every seeded deadline lies far past the measurement
_TIMEOUT_SECONDS = 7_200


async def seed(data_dir: Path, count: int) -> None:
    """``count`` identities in a new data directory, each an API session that passed MFA, a Dial session and a
    deadline an hour ahead: every one re-checked when a controller is next started on it."""
    async with running_controller(data_dir) as running:
        await seed_mfa_identities(running.controller, count, deadlines_per_second=_DEADLINES_PER_SECOND,
                                  start_in=_START_IN, timeout_seconds=_TIMEOUT_SECONDS, role="bench-adoption")


async def _restart(data_dir: Path) -> dict[str, Any]:
    cpu = time.process_time()
    async with running_controller(data_dir) as running:
        up = time.perf_counter()
        await running.controller.engine.adoptions_rechecked()
        settled = time.perf_counter() - up
        spent = time.process_time() - cpu
        handled = running.controller.engine.actors.handled
        with running.controller.store.read() as txn:
            kept = txn.count("sessions")
    return {"ready_seconds": running.ready_seconds, "settled_seconds": settled, "cpu_seconds": spent,
            "sessions": kept, "handled": handled}


async def _rounds(count: int, restarts: int) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="tollgate-bench-adoption-"))
    try:
        data_dir = base / "data"
        await seed(data_dir, count)
        return [await _restart(data_dir) for _ in range(restarts)]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def build_result(count: int, rounds: list[dict[str, Any]], quick: bool) -> ScenarioResult:
    """The table (one row per restart) and the one target: no session revoked by the re-checks."""
    result = ScenarioResult("adoption", quick, COLUMNS, rounds=rounds)
    for number, round_ in enumerate(rounds, 1):
        result.rows.append([number, count, round_["handled"], round(round_["ready_seconds"], 3),
                            round(round_["settled_seconds"], 3), round(round_["cpu_seconds"], 3),
                            round(round_["cpu_seconds"] / count * 1e6, 1), round_["sessions"]])
    kept = min(round_["sessions"] for round_ in rounds)
    result.targets.append(Target.bound("kept", "Dial sessions left after the adoption re-checks >= those seeded",
                                       kept, count, "sessions", below=False))
    result.notes.append(f"median of {len(rounds)} restarts: services up after "
                        f"{median(r['ready_seconds'] for r in rounds):.3f} s, re-checks settled "
                        f"{median(r['settled_seconds'] for r in rounds):.3f} s later")
    return result


def run(*, quick: bool) -> ScenarioResult:
    count, restarts = _QUICK if quick else _FULL
    return build_result(count, trio.run(_rounds, count, restarts), quick)
