"""Smoke test of the ``console`` benchmark: a quick run logs in to the console, measures both pages with every
request answered 200, and reports its target with finite figures (a quick run's figures mean nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from tests.bench.quick_result import check_targets


def test_console_quick(tmp_path: Path) -> None:
    path = tmp_path / "console.json"
    assert main(["console", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    check_targets(result, "console", {"C1"})
    assert {r["page"] for r in result["rounds"]} == {"GET /edge/management/v1/identities?limit=100",
                                                     "GET /console/identities?limit=100"}
    assert all(r["requests"] > 0 and r["failed"] == 0 for r in result["rounds"])
    assert not [n for n in result["notes"] if "failed requests" in n], result["notes"]
