"""Wall-clock time derived from Trio's clock, so that tests on a virtual clock move both together.

``wall = base + (trio.current_time() - trio_base)``. Persisted deadlines are wall-clock instants; they convert back
to Trio deadlines at restore with :meth:`Clock.to_trio`.
"""

from __future__ import annotations

import math
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


# The formatted whole seconds of the latest calls: every create and update stamps the row and most stamps in a busy
# second share it, so only the milliseconds are formatted each time (datetime and strftime are most of the cost).
# A few seconds are kept, not one: an event names both the instant it happens and the one it is about (an MFA
# timeout), and alternating between two seconds must not format both every time.
_seconds: dict[float, str] = {}
_SECONDS_KEPT = 16


def format_time(epoch: float) -> str:
    """RFC 3339 in UTC with milliseconds, as the reference controller writes timestamps.

    The same text as ``datetime.fromtimestamp(epoch, UTC)`` truncated to milliseconds: the fraction is rounded to
    microseconds (half to even) first, as ``datetime`` does, so a value a hair below a second boundary rolls over
    the same way.
    """
    fraction, whole = math.modf(epoch)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    elif micros < 0:
        whole, micros = whole - 1, micros + 1_000_000
    prefix = _seconds.get(whole)
    if prefix is None:
        prefix = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        if len(_seconds) >= _SECONDS_KEPT:
            _seconds.clear()
        _seconds[whole] = prefix
    return f"{prefix}{micros // 1000:03d}Z"


def parse_time(text: str) -> float:
    """Epoch seconds of an RFC 3339 timestamp (``Z`` or an offset)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
