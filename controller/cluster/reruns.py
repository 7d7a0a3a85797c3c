"""A step that runs again whenever what it depends on changes: marked from anywhere (a membership listener, another
task), run by one task, once for all the marks made before it began, and again after a pause when etcd failed it. It
waits on nothing timed while nothing changes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from controller.etcd import EtcdError

__all__ = ["RETRY_PAUSE", "Rerun"]

log = logging.getLogger("tollgate.cluster")

RETRY_PAUSE = 0.5
"""Seconds before a step etcd failed runs again."""


class Rerun:
    """The marks of one step; ``failed`` is what the log says when etcd fails it. The first run is due at once."""

    def __init__(self, *, failed: str) -> None:
        self._failed = failed
        self._marked = True
        self._lot = trio.lowlevel.ParkingLot()

    def mark(self) -> None:
        """Ask for a run (quick, never blocking)."""
        self._marked = True
        self._lot.unpark_all()

    async def marked(self) -> None:
        """Return at the next mark (for another task that waits on the same changes)."""
        await self._lot.park()

    async def run(self, step: Callable[[], Awaitable[None]]) -> NoReturn:
        """Run ``step`` now and after every mark made since it last began, until cancelled; one that etcd failed runs
        again after :data:`RETRY_PAUSE`."""
        while True:
            while not self._marked:
                await self._lot.park()
            self._marked = False
            try:
                await step()
            except EtcdError as error:
                log.warning(self._failed, extra={"error": str(error)})
                await trio.sleep(RETRY_PAUSE)
                self._marked = True
