"""The check every benchmark smoke test makes of a quick run's JSON: the documented shape, every target measured.

A quick run's figures mean nothing, so no target is asserted to be met.
"""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_targets(result: dict[str, Any], scenario: str, targets: set[str], *, ratio: bool = True) -> None:
    """``result`` is a quick run of ``scenario`` naming exactly ``targets``, each with a finite value and baseline
    (and ratio, unless ``ratio`` is False), a boolean ``met`` and a unit."""
    assert result["scenario"] == scenario
    assert result["quick"] is True
    assert set(result["targets"]) == targets
    for name, target in result["targets"].items():
        assert isinstance(target["met"], bool), name
        keys = ("value", "baseline", "ratio") if ratio else ("value", "baseline")
        assert all(finite(target[key]) for key in keys), (name, target)
        assert isinstance(target["unit"], str) and target["unit"], name
