"""Smoke test of the ``storage`` benchmark (T6): the quick run completes and writes the documented JSON shape.

Figures from a quick run mean nothing, so no target is asserted to be met; only that every target was measured.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.__main__ import main
from bench.storage_bench import CONCURRENCY

TARGETS = {"T6.throughput", "T6.throughput.writer", "T6.latency", "T6.reads"}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def test_quick_run_writes_every_target(tmp_path: Path) -> None:
    path = tmp_path / "storage.json"
    assert main(["storage", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())

    assert result["scenario"] == "storage"
    assert result["quick"] is True
    assert set(result["targets"]) == TARGETS
    for name, target in result["targets"].items():
        assert isinstance(target["met"], bool), name
        assert _finite(target["value"]) and _finite(target["baseline"]), (name, target)
        assert isinstance(target["unit"], str) and target["unit"], name
    # A read that hopped threads is counted: the baseline is the writer's own hops, which must have been seen.
    assert result["targets"]["T6.reads"]["baseline"] > 0

    assert len(result["rounds"]) >= 3
    for round_ in result["rounds"]:
        assert round_["raw"]["put"]["ops_per_s"] > 0 and round_["raw"]["batch"]["ops_per_s"] > 0
        assert set(round_["create"]) == set(round_["submit"]) == {str(n) for n in CONCURRENCY}

    rows = {(row["workload"], row["writers"]): row for row in result["table"]}
    for n in CONCURRENCY:
        for workload in ("domain.create identity", "Writer.submit small put"):
            row = rows[(workload, str(n))]
            assert row["ops/s"] > 0 and _finite(row["p50 ms"]) and _finite(row["p99 ms"]), row
            assert _finite(row["vs raw fsync/100"]) and _finite(row["vs raw fsync/put"]), row
