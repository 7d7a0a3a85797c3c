"""Following the event log: the kept events after a point, then the events as they commit, filtered; what every
live view of the events sends (``GET /events/stream``, the console's pages).

A follower is made inside a hub subscription taken before it reads the store (see ``controller/insight/hub.py``), so
that nothing committed in between escapes both; it skips by id what it has already passed, catches up from the store
when its subscription lagged or a published batch does not follow on from the last id it passed, and reports as a
:class:`Gap` the events it should pass next that the store no longer keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.insight.event_log import latest_id, read_after
from controller.insight.hub import Lagged, Nudged, Subscription
from controller.insight.kept import KeptEvent
from controller.insight.query import EventFilter
from storage.store import Store

__all__ = ["CATCH_UP_BATCH", "QUIET", "Arrival", "EventFollower", "Gap"]

CATCH_UP_BATCH = 500
"""Kept events read per store snapshot while catching up."""


@dataclass(frozen=True, slots=True)
class Gap:
    """Events ``first`` to ``last`` (ids, both included) are no longer kept: a reader that fell that far behind
    missed them."""

    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Arrival:
    """What one :meth:`EventFollower.next` brought.

    Attributes:
        items: the matching events (and gaps) in id order; may be empty on any wake-up.
        timed_out: nothing happened before the timeout.
        closed: the controller is stopping: the reader stops.
        lagged: the subscription fell behind and ``items`` were read back from the store.
        nudged: the subscription was nudged (the reader's other source has news).
    """

    items: list[KeptEvent | Gap] = field(default_factory=list)
    timed_out: bool = False
    closed: bool = False
    lagged: bool = False
    nudged: bool = False


QUIET = Arrival(timed_out=True)
"""What a reader takes for an :meth:`EventFollower.next` its deadline cancelled."""


class EventFollower:
    """The events matching ``wanted`` after ``resume`` (None, or an id past the last: from now on), passed once each.

    Args:
        store: where the kept events are read.
        subscription: the hub subscription the follower receives from, taken before the follower was made.
        wanted: which events to pass.
        resume: the last id the reader has (``Last-Event-ID``), or None.
    """

    def __init__(self, store: Store, subscription: Subscription, wanted: EventFilter, resume: int | None) -> None:
        self._store = store
        self._subscription = subscription
        self._wanted = wanted
        with store.read() as txn:
            latest = latest_id(txn)
        self.last = latest if resume is None or resume > latest else resume
        """The id of the last event passed (matching or not)."""

    def catch_up(self) -> list[KeptEvent | Gap]:
        """The matching kept events after :attr:`last`, read from the store a batch per snapshot."""
        items: list[KeptEvent | Gap] = []
        while True:
            with self._store.read() as txn:
                batch = read_after(txn, self.last, CATCH_UP_BATCH)
            if not batch:
                return items
            if batch[0].id != self.last + 1:
                items.append(Gap(self.last + 1, batch[0].id - 1))
            items.extend(event for event in batch if self._wanted.matches(event.fields))
            self.last = batch[-1].id

    async def next(self) -> Arrival:
        """Wait for news (see :class:`Arrival`). Cancelling the wait (the caller's deadline: :data:`QUIET` stands
        for it) loses nothing: the events stay buffered for the next call."""
        try:
            batch = await self._subscription.receive()
        except Lagged:  # fell further behind than the subscription holds: the store has what it missed
            return Arrival(self.catch_up(), lagged=True)
        except Nudged:
            return Arrival(nudged=True)
        if not batch:
            return Arrival(closed=True)
        fresh = [event for event in batch if event.id > self.last]
        items: list[KeptEvent | Gap] = []
        if fresh and fresh[0].id != self.last + 1:
            items = self.catch_up()
            fresh = [event for event in fresh if event.id > self.last]
        items.extend(event for event in fresh if self._wanted.matches(event.fields))
        if fresh:
            self.last = fresh[-1].id
        return Arrival(items)
