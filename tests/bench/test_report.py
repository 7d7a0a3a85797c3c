"""Targets computed from rounds: the bracketed ratio the http and sessions scenarios use."""

from __future__ import annotations

import math

import pytest

from bench.report import Target


def test_bracketed_cancels_drift_within_each_round() -> None:
    # The machine slows down through each round (baseline 100 before, 80 after): the subject, measured between
    # them at 81, is 0.9 of the bracket's mean, whereas against the first baseline run alone it would be 0.81.
    target = Target.bracketed("T8", "goal", [81.0, 45.0, 90.0], [100.0, 80.0, 50.0, 50.0, 100.0, 100.0],
                              lambda r: r >= 0.85, "req/s")
    assert target.ratio == pytest.approx(0.9)  # per round: 0.9, 0.9, 0.9
    assert target.met
    assert target.value == 81.0 and target.baseline == 90.0  # medians of the subject and of the bracket means


def test_bracketed_takes_the_median_of_the_rounds_and_checks_the_goal() -> None:
    target = Target.bracketed("T1", "goal", [40.0, 60.0, 55.0], [100.0] * 6, lambda r: r >= 0.56, "req/s")
    assert target.ratio == pytest.approx(0.55)
    assert not target.met


def test_bracketed_needs_two_baseline_runs_per_round() -> None:
    with pytest.raises(ValueError, match="expected two each"):
        Target.bracketed("T8", "goal", [1.0, 2.0], [1.0, 1.0, 1.0], lambda r: True, "req/s")


def test_bracketed_without_a_baseline_is_not_met() -> None:
    target = Target.bracketed("T8", "goal", [10.0], [0.0, 0.0], lambda r: True, "req/s")
    assert math.isnan(target.ratio) and not target.met
