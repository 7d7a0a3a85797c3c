"""A lean mailbox: a queue allocated only while messages wait, and at most one parked receiver.

A parked actor's mailbox is almost always empty, so its queue (a list, which the consumer takes whole) exists only
while it holds something, and an idle mailbox is two slots. Single consumer.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

import outcome
import trio

__all__ = ["Mailbox"]

M = TypeVar("M")


class SingleWaiter:
    """At most one task parked on this object until the subclass wakes it: the parking both :class:`Mailbox` and
    :class:`actors.live_actors.OneShot` use, with no ``trio.Event`` (an Event, its waiter set and the closure of its
    ``wait`` would be kept by every waiting actor)."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: trio.lowlevel.Task | None = None

    def _park(self, busy: str) -> Coroutine[Any, Any, Any]:
        """Register the calling task and return Trio's parking coroutine, which the caller awaits at once (so no
        frame of ours stays parked). Its result is what :meth:`_wake` passes.

        Raises:
            RuntimeError: another task is already parked here (``busy`` says what that means).
        """
        if self._waiter is not None:
            raise RuntimeError(busy)
        self._waiter = trio.lowlevel.current_task()
        return trio.lowlevel.wait_task_rescheduled(self._abort)  # noqa: ASYNC105

    def _wake(self, value: object = None, error: BaseException | None = None) -> None:
        """Resume the parked task, if any, with ``value`` (or raising ``error`` in it)."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            trio.lowlevel.reschedule(waiter, outcome.Error(error) if error is not None else outcome.Value(value))

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED


class Mailbox(SingleWaiter, Generic[M]):
    """An unbounded single-consumer queue; ``put_nowait`` never blocks, ``get`` parks until a message arrives, and
    :meth:`drain` takes everything queued at once."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        super().__init__()
        self._items: list[M] | None = None

    def __len__(self) -> int:
        items = self._items
        return 0 if items is None else len(items)

    def put_nowait(self, message: M) -> None:
        items = self._items
        if items is None:
            self._items = [message]
            self._wake()  # only an empty mailbox can have a parked consumer
        else:
            items.append(message)

    def get_nowait(self) -> M:
        """The oldest message; raises ``trio.WouldBlock`` when empty."""
        items = self._items
        if not items:
            raise trio.WouldBlock
        message = items.pop(0)
        if not items:
            self._items = None  # give the queue back: most mailboxes stay empty for long stretches
        return message

    def drain(self) -> list[M]:
        """Every queued message, oldest first, leaving the mailbox empty (an empty list when it was)."""
        items = self._items
        self._items = None
        return items if items is not None else []

    async def get(self) -> M:
        """The oldest message, waiting for one if needed. Cancellation leaves the mailbox intact."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._items:
            await self.wait()
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return self.get_nowait()

    def wait(self) -> Coroutine[Any, Any, object]:
        """Park until a message is put: ``await mailbox.wait()``, only while the mailbox is empty.

        A plain function returning Trio's parking coroutine, so a parked consumer holds no frame of ours.

        Raises:
            RuntimeError: the mailbox is not empty, or another task is already parked on it.
        """
        if self._items:
            raise RuntimeError("wait on a mailbox that holds messages")
        # Returned, not awaited here: the caller awaits it at once (no frame of ours stays parked). It parks with a
        # bound method rather than a closure: it lives as long as the actor is parked, in every parked actor.
        return self._park("a mailbox has one consumer")
