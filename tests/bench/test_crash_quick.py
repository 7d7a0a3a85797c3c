"""Smoke test of the ``crash`` benchmark: the quick run completes and writes the documented JSON shape.

Zero losses is asserted by ``tests/e2e/test_crash_safety.py``; here only that the scenario really ran: both trials
killed a loaded controller, restarted it and checked what had been acknowledged, and every target was measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.crash_bench import COLUMNS, QUICK
from tests.bench.quick_result import check_targets, finite

TARGETS = {"C1.losses", "C1.deadlines", "C1.clean"}


def test_quick_run_writes_every_target(tmp_path: Path) -> None:
    path = tmp_path / "crash.json"
    assert main(["crash", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())

    check_targets(result, "crash", TARGETS, ratio=False)
    assert len(result["rounds"]) == QUICK.trials
    for trial in result["rounds"]:
        assert trial["requests"] > 0 and trial["acknowledged"]["identity"] > 0, trial
        assert set(trial["lost"]) == set(trial["acknowledged"]), trial
        assert finite(trial["restart_s"]) and trial["restart_s"] > 0, trial

    assert all(set(row) == set(COLUMNS) for row in result["table"])
    rows = {row["measure"]: row for row in result["table"]}
    assert rows["trials (kill -9 of the process group under load, restart)"]["total"] == QUICK.trials
    assert rows["acknowledged Dial sessions"]["total"] > 0
    assert finite(rows["restart after kill -9: spawn -> serving"]["median/trial"])
