"""The live side of the event log: committed events handed to every subscriber (the file sink, each open event
stream) as they commit.

Publishing costs the writer's task a list append per subscriber and a wake-up; it never waits. Each subscription
buffers at most ``capacity`` events: a subscriber that falls further behind is told it lagged
(:class:`Lagged`) and catches up from the events the store keeps, where nothing is lost while it keeps up with the
log's ``keep``. A subscriber that reads the store first must subscribe before it reads, so that nothing committed in
between escapes both (and skip what it has already seen by id).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

from controller.insight.kept import KeptEvent

__all__ = ["EventHub", "Lagged", "Subscription"]

DEFAULT_CAPACITY = 4096
"""Events a subscription buffers before it lags."""


class Lagged(Exception):
    """Events were dropped from a subscription that fell behind: its reader catches up from the store."""


class Subscription:
    """Committed events for one reader, in id order (see :meth:`EventHub.subscribe`)."""

    __slots__ = ("_buffer", "_capacity", "_hub", "_lot", "ends_on_close", "lagged")

    def __init__(self, hub: EventHub, capacity: int, ends_on_close: bool) -> None:
        self._hub = hub
        self._capacity = capacity
        self.ends_on_close = ends_on_close
        self._buffer: list[KeptEvent] = []
        self._lot = trio.lowlevel.ParkingLot()
        self.lagged = False

    def offer(self, events: list[KeptEvent]) -> None:
        """Buffer ``events`` (on the publisher's task); past the capacity, drop everything and mark the lag."""
        if self.lagged:
            return
        if len(self._buffer) + len(events) > self._capacity:
            self.lagged = True
            self._buffer.clear()
        else:
            self._buffer.extend(events)
        self._lot.unpark_all()

    def wake(self) -> None:
        self._lot.unpark_all()

    async def receive(self) -> list[KeptEvent]:
        """The events published since the last call, waiting for at least one; [] once the hub is closed (for a
        subscription that ends on close).

        Raises:
            Lagged: events were dropped since the last call (the subscription then starts afresh: the next call
                waits for new events).
        """
        while not self._buffer:
            if self.lagged:
                self.lagged = False
                raise Lagged
            if self._hub.closed and self.ends_on_close:
                return []
            await self._lot.park()
        batch, self._buffer = self._buffer, []
        return batch


class EventHub:
    """Hands committed events to subscribers; see the module docstring."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self.closed = False

    @contextmanager
    def subscribe(self, capacity: int = DEFAULT_CAPACITY, *, ends_on_close: bool = True) -> Iterator[Subscription]:
        """A subscription to every event committed from now until the block ends. One that ``ends_on_close`` (an
        event stream) stops receiving once the controller starts stopping (:meth:`close`); the others (the file
        sink) go on until cancelled."""
        subscription = Subscription(self, capacity, ends_on_close)
        self._subscriptions.add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)

    @property
    def subscribers(self) -> int:
        return len(self._subscriptions)

    def publish(self, events: list[KeptEvent]) -> None:
        """Events just committed, in id order (called on the writer's task)."""
        for subscription in self._subscriptions:
            subscription.offer(events)

    def close(self) -> None:
        """The controller is stopping: the :meth:`Subscription.receive` of every subscription that ends on close
        returns [] from now on, so that open streams end and let the server stop."""
        self.closed = True
        for subscription in self._subscriptions:
            subscription.wake()
