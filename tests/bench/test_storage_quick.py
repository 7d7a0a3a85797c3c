"""Smoke test of the ``storage`` benchmark (T6): the quick run completes and writes the documented JSON shape.

Figures from a quick run mean nothing, so no target is asserted to be met; only that every target was measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.storage_bench import CONCURRENCY
from tests.bench.quick_result import check_targets, finite

TARGETS = {"T6.throughput", "T6.throughput.writer", "T6.latency", "T6.reads"}


def test_quick_run_writes_every_target(tmp_path: Path) -> None:
    path = tmp_path / "storage.json"
    assert main(["storage", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())

    check_targets(result, "storage", TARGETS, ratio=False)
    # A read that hopped threads is counted: the baseline is the probe task's hops, which must have been seen.
    assert result["targets"]["T6.reads"]["baseline"] > 0

    assert len(result["rounds"]) >= 3
    for round_ in result["rounds"]:
        assert round_["raw"]["put"]["ops_per_s"] > 0 and round_["raw"]["batch"]["ops_per_s"] > 0
        assert set(round_["create"]) == set(round_["submit"]) == {str(n) for n in CONCURRENCY}

    rows = {(row["workload"], row["writers"]): row for row in result["table"]}
    for n in CONCURRENCY:
        for workload in ("domain.create identity", "Writer.submit small put"):
            row = rows[(workload, str(n))]
            assert row["ops/s"] > 0 and finite(row["p50 ms"]) and finite(row["p99 ms"]), row
            assert finite(row["vs raw fsync/100"]) and finite(row["vs raw fsync/put"]), row
