"""Smoke test of the ``replication`` benchmark: the quick run (a three-member etcd of its own, a single controller
and a node of a cluster in this process) completes and writes the documented JSON shape.

Figures from a quick run mean nothing, so no target is asserted to be met; only that every target was measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.replication_bench import WRITERS
from tests.bench.quick_result import check_targets, finite


def test_quick_run_writes_every_target(tmp_path: Path) -> None:
    path = tmp_path / "replication.json"
    assert main(["replication", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    check_targets(result, "replication", {"p50", "rate64"})
    for round_ in result["rounds"]:
        assert set(round_["single"]) == set(round_["replicated"]) == {str(n) for n in WRITERS}
    rows = {(row["store"], row["writers"]): row for row in result["table"]}
    for store in ("single", "replicated"):
        for writers in WRITERS:
            row = rows[(store, writers)]
            assert row["creates/s"] > 0 and finite(row["p50 ms"]) and finite(row["p99 ms"]), row
