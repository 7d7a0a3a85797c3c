"""How late deadline decisions are: from each deadline to its decision, and to the durable commit of its effects.

The point of one timer heap is that a deadline is acted on at its instant, so its lateness is the figure to watch
in production as in benchmarks. :class:`LatenessRecorder` keeps, in constant memory, the count, the maxima and a
log-scale histogram of both latenesses (what a monitoring endpoint exposes through :meth:`statistics`); whoever
needs every sample (a benchmark, a test) adds an observer and receives each :class:`DeadlineOutcome`.

Times are whatever clock the caller passes (the controller's wall clock); nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DeadlineOutcome", "LatenessHistogram", "LatenessRecorder"]


@dataclass(frozen=True, slots=True)
class DeadlineOutcome:
    """One deadline acted on.

    Attributes:
        key: the actor (identity id).
        deadline: the instant the deadline was armed for.
        decided: when the decision was computed (what to revoke is known).
        durable: when the decision's writes were committed (``decided`` when it wrote nothing).
        revoked: how many things the decision revoked.
    """

    key: str
    deadline: float
    decided: float
    durable: float
    revoked: int

    @property
    def decision_lateness(self) -> float:
        return self.decided - self.deadline

    @property
    def durable_lateness(self) -> float:
        return self.durable - self.deadline


class LatenessHistogram:
    """Counts per power-of-two bucket of lateness: bucket 0 holds [0, 0.1 ms], bucket ``k`` (0.1 * 2^(k-1),
    0.1 * 2^k] ms, the last everything above (about 52 s). Negative lateness counts as zero."""

    BASE = 1e-4
    BUCKETS = 20

    __slots__ = ("count", "counts", "max", "total")

    def __init__(self) -> None:
        self.counts = [0] * (self.BUCKETS + 1)
        self.count = 0
        self.total = 0.0
        self.max = -math.inf

    def add(self, lateness: float) -> None:
        self.count += 1
        self.total += lateness
        if lateness > self.max:
            self.max = lateness
        index = 0 if lateness <= self.BASE else min(self.BUCKETS, math.ceil(math.log2(lateness / self.BASE)))
        self.counts[index] += 1

    def upper_bound(self, index: int) -> float:
        """The largest lateness bucket ``index`` holds (infinite for the last)."""
        return math.inf if index >= self.BUCKETS else self.BASE * 2.0 ** index

    def quantile(self, q: float) -> float:
        """An upper bound of the ``q`` quantile (0-1): the upper edge of its bucket, capped at the maximum seen.
        NaN when empty."""
        if not self.count:
            return math.nan
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return min(self.upper_bound(index), self.max)
        return self.max


class LatenessRecorder:
    """Deadline lateness of one actor population, plus optional observers of every outcome."""

    def __init__(self) -> None:
        self.decision = LatenessHistogram()
        self.durable = LatenessHistogram()
        self.revoked = 0
        self._observers: list[Callable[[DeadlineOutcome], None]] = []

    def add_observer(self, observer: Callable[[DeadlineOutcome], None]) -> None:
        """Call ``observer`` with every later outcome (synchronously: it must be quick and must not raise)."""
        self._observers.append(observer)

    def remove_observer(self, observer: Callable[[DeadlineOutcome], None]) -> None:
        self._observers.remove(observer)

    def record(self, outcome: DeadlineOutcome) -> None:
        self.decision.add(outcome.decision_lateness)
        self.durable.add(outcome.durable_lateness)
        self.revoked += outcome.revoked
        for observer in self._observers:
            observer(outcome)

    def statistics(self) -> dict[str, float]:
        """Deadlines acted on, things revoked, and per lateness (milliseconds) p50/p99 upper bounds and the max."""
        stats: dict[str, float] = {"deadlines": float(self.decision.count), "revoked": float(self.revoked)}
        for name, histogram in (("decision", self.decision), ("durable", self.durable)):
            empty = not histogram.count
            stats[f"{name}_p50_ms"] = histogram.quantile(0.5) * 1e3
            stats[f"{name}_p99_ms"] = histogram.quantile(0.99) * 1e3
            stats[f"{name}_max_ms"] = math.nan if empty else histogram.max * 1e3
        return stats
