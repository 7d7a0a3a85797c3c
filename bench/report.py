"""What a scenario returns: a table, the targets it checks, and its raw rounds; printed, or written as JSON.

The JSON shape is fixed so that a script can check targets without parsing tables::

    {"scenario": NAME, "quick": bool,
     "targets": {"T1": {"met": bool, "value": float, "baseline": float, "ratio": float, "unit": str, ...}},
     "rounds": [...], "table": [...], "notes": [...]}
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.stats import median

__all__ = ["ScenarioResult", "Target", "format_table", "ratio"]


def ratio(value: float, baseline: float) -> float:
    """``value / baseline``; NaN when the baseline is zero or missing."""
    if not baseline or math.isnan(baseline) or math.isnan(value):
        return math.nan
    return value / baseline


@dataclass(frozen=True, slots=True)
class Target:
    """One target of the issue, checked by a scenario.

    Attributes:
        name: "T1" ... "T8", with a suffix when a target has several parts ("T1.p99").
        goal: the target in words, e.g. "req/s >= 50% of hello".
        met: whether the measured figure meets the goal.
        value: the measured figure; baseline: the same-run baseline it is compared with (NaN if the target is an
            absolute bound); ratio: value / baseline (NaN for absolute bounds); unit: of value and baseline.
    """

    name: str
    goal: str
    met: bool
    value: float
    baseline: float
    ratio: float
    unit: str

    @classmethod
    def at_least(cls, name: str, goal: str, value: float, baseline: float, fraction: float, unit: str) -> Target:
        """Met when ``value >= fraction * baseline``."""
        r = ratio(value, baseline)
        return cls(name, goal, not math.isnan(r) and r >= fraction, value, baseline, r, unit)

    @classmethod
    def at_most(cls, name: str, goal: str, value: float, baseline: float, factor: float, unit: str) -> Target:
        """Met when ``value <= factor * baseline``."""
        r = ratio(value, baseline)
        return cls(name, goal, not math.isnan(r) and r <= factor, value, baseline, r, unit)

    @classmethod
    def bracketed(cls, name: str, goal: str, values: Sequence[float], baselines: Sequence[float],
                  meets: Callable[[float], bool], unit: str) -> Target:
        """A subject measured once per round between two runs of its baseline (``baselines`` holds two per round,
        before and after): the median of the per-round ratios of the subject to the mean of its bracket. Linear
        drift of the machine's speed within a round cancels out; value and baseline are the medians of the
        subject and of the bracket means.

        Raises:
            ValueError: ``baselines`` does not hold exactly two runs per value.
        """
        if len(baselines) != 2 * len(values):
            raise ValueError(f"{name}: {len(baselines)} baseline runs for {len(values)} rounds, expected two each")
        brackets = [(baselines[2 * r] + baselines[2 * r + 1]) / 2 for r in range(len(values))]
        r = median(ratio(v, b) for v, b in zip(values, brackets, strict=True))
        return cls(name, goal, not math.isnan(r) and meets(r), median(values), median(brackets), r, unit)

    @classmethod
    def bound(cls, name: str, goal: str, value: float, limit: float, unit: str, *, below: bool = True) -> Target:
        """An absolute bound: met when ``value <= limit`` (or ``>=`` with ``below=False``)."""
        met = not math.isnan(value) and (value <= limit if below else value >= limit)
        return cls(name, goal, met, value, limit, ratio(value, limit), unit)


@dataclass(slots=True)
class ScenarioResult:
    """Everything one scenario measured."""

    scenario: str
    quick: bool
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "quick": self.quick,
            "targets": {t.name: {k: _finite(v) for k, v in asdict(t).items() if k != "name"} for t in self.targets},
            "rounds": self.rounds,
            "table": [dict(zip(self.columns, row, strict=True)) for row in self.rows],
            "notes": self.notes,
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, default=_finite) + "\n")

    def text(self) -> str:
        """The table, the targets and the notes as plain text (what the command prints)."""
        parts = [f"== {self.scenario}{' (quick smoke run: figures are not evidence)' if self.quick else ''}",
                 format_table(self.columns, self.rows), "", target_table(self.targets)]
        parts += [f"note: {n}" for n in self.notes]
        return "\n".join(parts)


def target_table(targets: Sequence[Target]) -> str:
    return format_table(["target", "goal", "value", "baseline", "ratio", "unit", "met"],
                        [[t.name, t.goal, t.value, t.baseline, t.ratio, t.unit, "met" if t.met else "MISSED"]
                         for t in targets])


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, markdown: bool = False) -> str:
    """A fixed-width (or Markdown) table; floats get three significant decimals."""
    cells = [[_cell(v) for v in row] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines)
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == 0 or abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


def _finite(value: Any) -> Any:
    """JSON has no NaN: absent figures are written as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
