"""A lean mailbox: a deque and at most one parked receiver.

A memory channel pair costs about 1.9 KB per actor; a deque plus a reference to the parked task costs a few
hundred bytes, which keeps a parked actor near 2.6 KB in all (architecture.md, section 4). Single consumer only.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import trio

__all__ = ["Mailbox"]

M = TypeVar("M")


class Mailbox(Generic[M]):
    """An unbounded single-consumer queue; ``put_nowait`` never blocks, ``get`` parks until a message arrives."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[M] = deque()
        self._waiter: trio.lowlevel.Task | None = None

    def __len__(self) -> int:
        return len(self._items)

    def put_nowait(self, message: M) -> None:
        self._items.append(message)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            trio.lowlevel.reschedule(waiter)

    def get_nowait(self) -> M:
        """The oldest message; raises ``trio.WouldBlock`` when empty."""
        if not self._items:
            raise trio.WouldBlock
        return self._items.popleft()

    async def get(self) -> M:
        """The oldest message, waiting for one if needed. Cancellation leaves the mailbox intact."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._items:
            if self._waiter is not None:
                raise RuntimeError("a mailbox has one consumer")
            self._waiter = trio.lowlevel.current_task()

            def abort(_: object) -> trio.lowlevel.Abort:
                self._waiter = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return self._items.popleft()
