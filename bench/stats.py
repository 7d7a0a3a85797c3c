"""Small statistics for benchmark rounds: percentiles, medians and a latency summary."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LatencySummary", "median", "percentile", "summarize"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Iterable[float]) -> float:
    """The median of the finite values (the middle one, or the mean of the two middle ones); NaN if none."""
    ordered = sorted(v for v in values if not math.isnan(v))
    if not ordered:
        return math.nan
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Percentiles of a latency sample, in milliseconds."""

    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def summarize(seconds: Sequence[float]) -> LatencySummary:
    """p50, p99 and max of a sample given in seconds, reported in milliseconds."""
    if not seconds:
        return LatencySummary(0, math.nan, math.nan, math.nan)
    return LatencySummary(len(seconds), percentile(seconds, 50) * 1e3, percentile(seconds, 99) * 1e3,
                          max(seconds) * 1e3)
