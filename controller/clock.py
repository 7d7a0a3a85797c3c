"""Wall-clock time derived from Trio's clock, so that tests on a virtual clock move both together.

``wall = base + (trio.current_time() - trio_base)``. Persisted deadlines are wall-clock instants; they convert back
to Trio deadlines at restore with :meth:`Clock.to_trio`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import trio

__all__ = ["Clock", "format_time", "parse_time"]


class Clock:
    """Maps Trio time to wall-clock seconds since the epoch. Create it inside ``trio.run``."""

    def __init__(self, wall_base: float | None = None) -> None:
        self._wall_base = time.time() if wall_base is None else wall_base
        self._trio_base = trio.current_time()

    def now(self) -> float:
        """Current wall-clock time, epoch seconds."""
        return self._wall_base + (trio.current_time() - self._trio_base)

    def to_trio(self, wall: float) -> float:
        """The Trio deadline of a wall-clock instant."""
        return self._trio_base + (wall - self._wall_base)


def format_time(epoch: float) -> str:
    """RFC 3339 in UTC with milliseconds, as the reference controller writes timestamps."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(text: str) -> float:
    """Epoch seconds of an RFC 3339 timestamp (``Z`` or an offset)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
