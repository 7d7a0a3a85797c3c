"""The deadline lateness recorder: its histogram's buckets and quantiles, its maxima, and its observers."""

from __future__ import annotations

import math

from actors.lateness import DeadlineOutcome, LatenessHistogram, LatenessRecorder


def test_buckets_are_powers_of_two_from_a_tenth_of_a_millisecond() -> None:
    histogram = LatenessHistogram()
    for lateness in (-0.5, 0.0, 0.0001, 0.00015, 0.0002, 0.0003, 60.0):
        histogram.add(lateness)
    # [0, 0.1 ms] (negative counts as zero), (0.1, 0.2] twice, (0.2, 0.4], and the open last bucket.
    assert histogram.counts[:3] == [3, 2, 1]
    assert histogram.counts[LatenessHistogram.BUCKETS] == 1
    assert sum(histogram.counts) == histogram.count == 7
    assert histogram.max == 60.0
    assert histogram.upper_bound(2) == 0.0004 and histogram.upper_bound(LatenessHistogram.BUCKETS) == math.inf


def test_quantiles_are_bucket_upper_bounds_capped_at_the_maximum() -> None:
    histogram = LatenessHistogram()
    assert math.isnan(histogram.quantile(0.5))
    for _ in range(98):
        histogram.add(0.001)  # bucket (0.8 ms, 1.6 ms]
    histogram.add(0.003)  # (1.6, 3.2]
    histogram.add(0.0031)
    assert histogram.quantile(0.5) == 0.0016
    assert histogram.quantile(0.98) == 0.0016
    assert histogram.quantile(0.99) == 0.0031  # the bucket's bound (3.2 ms) is above anything seen
    assert histogram.quantile(1.0) == 0.0031


def test_recorder_statistics_and_observers() -> None:
    recorder = LatenessRecorder()
    seen: list[DeadlineOutcome] = []
    recorder.add_observer(seen.append)
    first = DeadlineOutcome("a", deadline=100.0, decided=100.002, durable=100.05, revoked=1)
    recorder.record(first)
    recorder.remove_observer(seen.append)
    recorder.record(DeadlineOutcome("b", deadline=200.0, decided=200.0, durable=200.0, revoked=0))
    assert seen == [first]
    assert math.isclose(first.decision_lateness, 0.002) and math.isclose(first.durable_lateness, 0.05)
    stats = recorder.statistics()
    assert stats["deadlines"] == 2 and stats["revoked"] == 1
    assert math.isclose(stats["decision_max_ms"], 2.0) and math.isclose(stats["durable_max_ms"], 50.0)
    assert math.isclose(stats["decision_p50_ms"], 0.1)  # the on-time one: the upper bound of [0, 0.1 ms]
    assert math.isclose(stats["durable_p99_ms"], 50.0)


def test_empty_recorder_reports_no_figures() -> None:
    stats = LatenessRecorder().statistics()
    assert stats["deadlines"] == 0
    assert all(math.isnan(v) for k, v in stats.items() if k.endswith("_ms"))
