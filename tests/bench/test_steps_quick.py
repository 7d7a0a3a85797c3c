"""Smoke test of the ``steps`` benchmark: every step kind runs and does what its name says, and is counted.

Whether a kind meets its instruction budget is the full run's figure (``bench/RESULTS.md``); here only that the
quick run measured every kind, each step had the outcome the kind promises, and instructions were counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.callgrind import available
from bench.steps_bench import COLUMNS, KINDS, QUICK
from tests.bench.quick_result import check_targets, finite

OUTCOMES = {
    "posture-unchanged": "answered, 1 session(s) left",
    "posture-changed": "answered, 1 session(s) left",
    "posture-revokes": "answered, 0 session(s) left",
    "wake-unlock": "answered, 1 session(s) left",
    "deadline-revokes": "revoked 1",
    "session-granted": "session, 1 session(s) left",
    "session-refused": "INVALID_POSTURE, 0 session(s) left",
}


def test_quick_run_measures_every_step_kind(tmp_path: Path) -> None:
    assert available() is None, "valgrind and its callgrind.h are part of the bench's requirements"
    path = tmp_path / "steps.json"
    assert main(["steps", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())

    check_targets(result, "steps", {f"S.{kind}" for kind in KINDS}, ratio=False)
    assert set(OUTCOMES) == set(KINDS)
    rows = {row["step kind"]: row for row in result["table"]}
    assert all(set(row) == set(COLUMNS) for row in result["table"])
    for kind, outcome in OUTCOMES.items():
        row = rows[kind]
        assert row["steps"] == QUICK.steps, row
        assert row["outcome"] == outcome, row
        assert finite(row["instructions/step"]) and row["instructions/step"] > 0, row
        assert result["targets"][f"S.{kind}"]["value"] == row["instructions/step"]
