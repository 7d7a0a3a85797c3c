"""Smoke tests of the ``http`` and ``sessions`` benchmarks: quick runs complete, every target gets a finite figure.

A quick run's figures mean nothing (tiny models, half-second loads from a Python client sharing the machine), so no
target is asserted to be met; what is asserted is that the scenario really ran: servers started, every measured
request succeeded, and the JSON has the documented shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.__main__ import main
from tests.bench.quick_result import check_targets


def _check_shape(result: dict[str, Any], scenario: str, targets: set[str]) -> None:
    check_targets(result, scenario, targets)
    assert result["rounds"], "no rounds recorded"
    assert not [n for n in result["notes"] if "failed requests" in n], result["notes"]


def test_http_quick(tmp_path: Path) -> None:
    path = tmp_path / "http.json"
    assert main(["http", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    _check_shape(result, "http", {"T1.rps", "T1.p99", "T2.p99", "T2.gc", "L.filter"})
    measured = {(r["endpoint"], r["server"]) for r in result["rounds"]}
    endpoints = {"GET /posture-checks?limit=10", "GET /identities/{id}", "GET /identities?limit=10",
                 "GET /identities?filter (10k)", "POST /identities"}
    assert measured == {("hello", "hello"), ("quart", "quart")} | {(e, s) for e in endpoints
                                                                   for s in ("plain", "actors")}
    assert all(r["requests"] > 0 and r["failed"] == 0 for r in result["rounds"])


def test_sessions_quick(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    assert main(["sessions", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    _check_shape(result, "sessions", {"T7.decisions", "T7.services", "T8", "T9"})
    measured = {(r["server"], r["measure"]) for r in result["rounds"]}
    assert {("large", "POST /sessions"), ("large", "GET /current-identity"), ("medium", "GET /services"),
            ("bare-on", "POST /sessions"), ("bare-off", "POST /sessions"), ("large", "POST /sessions (T9)"),
            ("large-quiet", "POST /sessions (T9)")} <= measured
    assert all(r["requests"] > 0 and r["failed"] == 0 for r in result["rounds"])
