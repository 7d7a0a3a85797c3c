"""Smoke test of the ``events`` benchmark: the quick run completes, measures T3.events, and both sides of every
round did what the scenario claims (every measured deadline decided, revoking its identity's session)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.events_bench import parts
from tests.bench.quick_result import check_targets, finite


def test_quick_run_measures_both_sides_of_every_round(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    assert main(["events", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())

    check_targets(result, "events", {"T3.events", "T3s.events.cpu"})
    rounds = result["rounds"]
    configs = parts(quick=True)
    assert sorted((r["part"], r["round"], r["events"]) for r in rounds) == sorted(
        (part, r, side) for part, config in configs.items() for r in range(config.rounds) for side in (False, True))
    for r in rounds:
        measured = configs[r["part"]].t3_measured
        assert r["undecided"] == 0 and r["revoked"] == r["deadlines"] == measured, r
    assert all(finite(row["events on"]) and finite(row["events off"]) for row in result["table"]), result["table"]
