"""Smoke test of the ``adoption`` benchmark: the quick run (500 identities seeded, one restart) completes, writes the
documented JSON shape, and the restart's re-checks revoked none of the seeded sessions (that is a property, not a
figure: a re-check of what the rules still grant changes nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from bench.adoption_bench import COLUMNS
from tests.bench.quick_result import check_targets, finite


def test_quick_run_restarts_and_keeps_every_session(tmp_path: Path) -> None:
    path = tmp_path / "adoption.json"
    assert main(["adoption", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    check_targets(result, "adoption", {"kept"})
    assert result["targets"]["kept"]["met"] is True
    [row] = result["table"]
    assert set(row) == set(COLUMNS)
    assert row["identities"] == row["sessions kept"] == 500
    assert row["actor messages"] == 2 * 500  # every identity's re-check ran, with the settle that paces it
    assert all(finite(row[column]) and row[column] >= 0 for column in COLUMNS[3:7]), row
