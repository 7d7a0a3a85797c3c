"""Actors keyed by id: spawned on their first message, passivated when idle, restarted after a crash.

The runtime is generic: a :class:`Behavior` loads an actor's state and carries out one step over every message
queued for it. Each live actor is one Trio task reading its own :class:`~actors.mailbox.Mailbox`, taking everything
queued at once; all deadlines share one :class:`~actors.scheduler.Scheduler` heap, which posts a deadline message
into the actor's mailbox (spawning the actor if it was passivated). A live actor's state stays in memory
(:meth:`ActorRegistry.state_of`).

An actor passivates once its mailbox is empty, it has no deadline and what its state still has in flight has
settled (:meth:`Behavior.settled`): the next message loads it again. A step that raises is logged, every message of
it is failed (:meth:`Behavior.failed`) and the actor goes on from the state it had before that step; a state that
cannot be loaded fails one message at a time. ``Cancelled`` always propagates.
"""

from __future__ import annotations

import collections
import heapq
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import trio

from actors.mailbox import Mailbox, SingleWaiter
from actors.scheduler import Scheduler

__all__ = ["REAP_CHUNK", "ActorRegistry", "Behavior", "OneShot"]

log = logging.getLogger("tollgate.actors")

S = TypeVar("S")
M = TypeVar("M")
E = TypeVar("E")
T = TypeVar("T")

REAP_CHUNK = 256
"""Released actors' tasks cancelled at once (:meth:`ActorRegistry.release`)."""


class OneShot(SingleWaiter, Generic[T]):
    """A reply slot of size one: one side calls :meth:`send`, one task awaits :meth:`receive`.

    The receiver parks as a mailbox's consumer does (:class:`actors.mailbox.SingleWaiter`): an Event, its set of
    waiters and the closure its ``wait`` creates were a fifth of the objects each in-flight actor step and write
    left for the garbage collector. A waiting receiver gets the first value sent; a later ``send`` only changes what
    a later :meth:`receive` returns. A cancelled receiver stops waiting. :meth:`fail` answers with an exception
    instead, raised in the receiver.
    """

    __slots__ = ("_error", "_sent", "_value")

    def __init__(self) -> None:
        super().__init__()
        self._sent = False
        self._value: T | None = None
        self._error: BaseException | None = None

    def send(self, value: T) -> None:
        self._value = value
        self._sent = True
        self._wake(value)

    def fail(self, error: BaseException) -> None:
        """Answer with ``error`` raised in the receiver, unless a value was already sent (the first answer wins)."""
        if self._sent:
            return
        self._error = error
        self._sent = True
        self._wake(error=error)

    def receive(self) -> Awaitable[T]:
        """Await the value sent, waiting for it if needed (a checkpoint either way).

        A plain method returning Trio's parking coroutine, as :meth:`actors.mailbox.Mailbox.wait` does: a waiting
        receiver holds no frame of ours (every actor step waits on one for its write). It registers the calling
        task as the receiver, so await the result at once, in that task.

        Raises:
            RuntimeError: another task is already waiting on this slot.
        """
        if self._sent:
            return _checkpointed(self._value, self._error)  # type: ignore[arg-type]
        return self._park("a one-shot reply has one receiver")


async def _checkpointed(value: T, error: BaseException | None) -> T:
    await trio.lowlevel.checkpoint()
    if error is not None:
        raise error
    return value


class Behavior(Protocol[S, M]):
    """What an actor does."""

    def load(self, key: str) -> S:
        """The state of ``key`` as stored (a fresh one when nothing is stored)."""

    def step(self, key: str, state: S, messages: list[M], now: float) -> S:
        """Handle ``messages`` (every one queued, oldest first) at ``now``: answer them, queue what must be
        written, and return the new state. Synchronous: what must wait (a durable write) is handed on, not
        awaited."""

    def next_deadline(self, state: S) -> float | None:
        """The wall-clock instant at which this actor must next be woken, if any."""

    def deadline_message(self, deadline: float) -> M:
        """The message posted when the deadline armed at ``deadline`` is reached."""

    def failed(self, message: M, error: Exception) -> None:
        """Handling ``message`` raised ``error`` (or the state to handle it with could not be loaded): fail the
        message's reply slot, if it has one, with the error (:meth:`OneShot.fail`); a request waiting for the
        reply must not wait forever."""

    async def settled(self, state: S) -> None:
        """Return once nothing the state has in flight (a queued write) can still change what :meth:`load`
        would find: awaited before the actor passivates."""


@dataclass(slots=True)
class _Actor(Generic[S]):
    mailbox: Mailbox[Any]
    state: S | None = None
    running: bool = False
    parked: bool = False  # waiting for its mailbox, between two steps
    generation: int = 0
    deadline: float | None = None
    fired: float | None = None
    scope: trio.CancelScope | None = None


class ActorRegistry(Generic[S, M]):
    """Owns every actor of one behaviour.

    Args:
        behavior: the actor logic.
        now: wall-clock time (the controller's clock), passed to ``step``.
        to_trio: converts a wall-clock deadline into Trio time for the scheduler.
        releasable: whether :meth:`release` may stop actors (their keys move to another process). Each actor's task
            then runs in a cancel scope of its own; a registry whose actors never move spawns them without one.
    """

    def __init__(self, behavior: Behavior[S, M], now: Callable[[], float],
                 to_trio: Callable[[float], float], *, releasable: bool = False) -> None:
        self._behavior = behavior
        self._releasable = releasable
        self._now = now
        self._to_trio = to_trio
        self._actors: dict[str, _Actor[S]] = {}
        self._scheduler: Scheduler[str] = Scheduler(self._deadline_reached)
        self._nursery: trio.Nursery | None = None
        self._live = 0
        self._parked = 0
        self._unreaped: collections.deque[trio.CancelScope] = collections.deque()  # released while parked: release()
        self._released = trio.lowlevel.ParkingLot()
        self.spawned = 0
        self.crashed = 0
        self.handled = 0
        # Called after each step of any actor: the runtime's garbage-collection policy counts them, since a step
        # replaces a long-lived state with a new one, which CPython's own allocation count does not see.
        self.after_step: Callable[[], None] | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the actors and the scheduler until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._scheduler.run)
            self._nursery = nursery
            task_status.started()
            await self._reap()

    async def _reap(self) -> None:
        """End the tasks of released actors that were parked, :data:`REAP_CHUNK` at a time: each ends once its
        scope is cancelled, and a few at a time they never hold the event loop for long."""
        while True:
            while not self._unreaped:
                await self._released.park()
            for _ in range(min(REAP_CHUNK, len(self._unreaped))):
                self._unreaped.popleft().cancel()
            await trio.lowlevel.checkpoint()  # the chunk's tasks end before the next chunk is cancelled

    def statistics(self) -> dict[str, int]:
        """Live actors (``parked`` of them waiting for a message or their deadline), pending deadlines, and counters
        since start."""
        return {"live": self._live, "parked": self._parked, "known": len(self._actors),
                "spawned": self.spawned, "crashed": self.crashed, "handled": self.handled,
                **{f"scheduler_{k}": v for k, v in self._scheduler.statistics().items()}}

    def upcoming(self, limit: int) -> list[tuple[float, str]]:
        """The ``limit`` earliest pending deadlines (wall-clock, as armed) with their actors' keys, earliest first."""
        return heapq.nsmallest(limit, ((actor.deadline, key) for key, actor in self._actors.items()
                                       if actor.deadline is not None))

    def state_of(self, key: str) -> S | None:
        """The in-memory state of a live actor (None when it is not loaded)."""
        actor = self._actors.get(key)
        return None if actor is None else actor.state

    def post(self, key: str, message: M) -> None:
        """Deliver ``message`` to the actor ``key``, spawning it if it is not running. Never blocks."""
        actor = self._actors.get(key)
        if actor is None:
            actor = self._actors[key] = _Actor(Mailbox())
        actor.mailbox.put_nowait(message)
        if not actor.running:
            self._spawn(key, actor)

    async def ask(self, key: str, make: Callable[[OneShot[T]], M]) -> T:
        """Post the message ``make(reply)`` and wait for the actor's reply."""
        reply: OneShot[T] = OneShot()
        self.post(key, make(reply))
        return await reply.receive()

    def arm(self, key: str, deadline: float) -> None:
        """Arm a deadline for an actor that is not running (restore after a restart)."""
        actor = self._actors.get(key)
        if actor is None:
            actor = self._actors[key] = _Actor(Mailbox())
        self._set_deadline(key, actor, deadline)

    def release(self, select: Callable[[str], bool], error: Exception) -> int:
        """Stop the actors whose key ``select`` accepts (another process hosts them from now on): their deadlines
        are disarmed, their queued messages failed with ``error``, their state dropped, and each task cancelled: at
        once if it was in a step; later, a chunk at a time (:meth:`_reap`), if it was parked, since nothing can wake
        it any more (a message for its key starts a new actor). Cancelling a hundred thousand tasks at once would
        hold the event loop for seconds. A write one of them queued is not recalled (it is the caller's to fence).
        Returns how many.

        Raises:
            RuntimeError: the registry was not made ``releasable``.
        """
        if not self._releasable:
            raise RuntimeError("this actor registry was not made releasable")
        released = 0
        for key in [key for key in self._actors if select(key)]:
            actor = self._actors.pop(key)
            if actor.deadline is not None:
                self._scheduler.disarm(key)
            actor.deadline = None
            actor.generation += 1
            for message in actor.mailbox.drain() if len(actor.mailbox) else ():
                self._behavior.failed(message, error)
            if actor.scope is not None:
                if actor.parked:
                    self._unreaped.append(actor.scope)
                else:
                    actor.scope.cancel()
            released += 1
        if self._unreaped:
            self._released.unpark_all()
        return released

    def _spawn(self, key: str, actor: _Actor[S]) -> None:
        if self._nursery is None:
            raise RuntimeError("the actor registry is not running")
        actor.running = True
        self._live += 1
        self.spawned += 1
        self._nursery.start_soon(self._releasable_actor_task if self._releasable else self._actor_task, key, actor)

    def _set_deadline(self, key: str, actor: _Actor[S], deadline: float | None) -> None:
        if deadline == actor.deadline or (deadline is not None and deadline == actor.fired):
            # The second case: the deadline fired while a step was in flight, and that step's state still names
            # it. Its message is already queued; arming it again would deliver it twice.
            return
        actor.deadline = deadline
        actor.generation += 1
        if deadline is None:
            self._scheduler.disarm(key)
        else:
            self._scheduler.arm(key, self._to_trio(deadline), actor.generation)

    def _deadline_reached(self, key: str, generation: int) -> None:
        actor = self._actors.get(key)
        if actor is None or actor.generation != generation or actor.deadline is None:
            return
        deadline = actor.deadline
        actor.deadline = None
        actor.fired = deadline
        self.post(key, self._behavior.deadline_message(deadline))

    async def _releasable_actor_task(self, key: str, actor: _Actor[S]) -> None:
        with trio.CancelScope() as actor.scope:  # cancelled when the actor is released (:meth:`release`)
            await self._actor_task(key, actor)
        actor.scope = None
        if self._actors.get(key) is not actor and actor.running:  # released while running
            self._stopped(actor)

    async def _actor_task(self, key: str, actor: _Actor[S]) -> None:
        # Awaited directly as the task's coroutine when the registry is not releasable: a wrapper's frame would be
        # resumed and suspended with every message the actor waits for.
        behavior = self._behavior
        mailbox = actor.mailbox
        loaded = actor.state is not None
        try:
            if not loaded:
                actor.state = behavior.load(key)
                loaded = True
            while True:
                if not len(mailbox):
                    if actor.deadline is None:
                        await behavior.settled(actor.state)  # type: ignore[arg-type]
                        if not len(mailbox) and actor.deadline is None:
                            return  # passivate: nothing queued, nothing to wake for, nothing in flight
                        continue
                    # Parked: this frame holds only the actor record.
                    self._parked += 1
                    actor.parked = True
                    try:
                        await mailbox.wait()
                    finally:
                        actor.parked = False
                        self._parked -= 1
                messages = mailbox.drain()
                try:
                    actor.state = behavior.step(key, actor.state, messages, self._now())  # type: ignore[arg-type]
                except Exception as exc:
                    for message in messages:
                        behavior.failed(message, exc)
                    raise
                self.handled += len(messages)
                self._set_deadline(key, actor, behavior.next_deadline(actor.state))
                after_step = self.after_step
                if after_step is not None:
                    after_step()
        except Exception as exc:
            # The actor boundary: one identity's failure must not take down the others.
            self.crashed += 1
            log.exception("actor crashed; going on from its state before that step", extra={"actor": key})
            self._stopped(actor)
            if not loaded and len(mailbox):
                # The state could not even load: fail one message so this ends.
                behavior.failed(mailbox.get_nowait(), exc)
            if len(mailbox) or actor.deadline is not None:
                self._spawn(key, actor)
            return
        finally:
            if actor.running and not (len(mailbox) or actor.deadline is not None):
                self._stopped(actor)
                if actor.deadline is None and not len(mailbox) and self._actors.get(key) is actor:
                    self._actors.pop(key, None)

    def _stopped(self, actor: _Actor[S]) -> None:
        actor.running = False
        self._live -= 1
