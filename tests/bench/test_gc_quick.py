"""Smoke test of the ``gc`` benchmark: the quick run measures both workloads with the young collections and
without them, and writes the documented JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.gc_bench import COLUMNS
from tests.bench.quick_result import check_targets, finite


def test_quick_run_measures_both_workloads_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "gc.json"
    assert main(["gc", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    check_targets(result, "gc", {"gc.pause"})
    rows = result["table"]
    assert all(set(row) == set(COLUMNS) for row in rows)
    assert [(row["workload"], row["rounds"]) for row in rows] == [("T3", 1), ("T3", 1), ("re-checks", 1),
                                                                  ("re-checks", 1)]
    assert len({row["young collections"] for row in rows}) == 2
    for row in rows:
        assert finite(row["longest collection ms"]) and finite(row["collections ms"]), row
    assert all(finite(row["decision p99 ms"]) and finite(row["msg/s"]) for row in rows[:2])
    assert all(finite(row["CPU s"]) and row["CPU s"] > 0 for row in rows[2:])
