"""Actors keyed by id: spawned on their first message, passivated when idle, restarted after a crash.

The runtime is generic: a :class:`Behavior` supplies the pure transition (``handle``), the next deadline, how to
load persisted state and how to carry out effects. Each live actor is one Trio task reading its own
:class:`~actors.mailbox.Mailbox`; all deadlines share one :class:`~actors.scheduler.Scheduler` heap, which posts a
deadline message into the actor's mailbox (spawning the actor if it was passivated).

An actor passivates as soon as its mailbox is empty and it has no deadline: its state is persisted by ``perform``
after every change, so the next message simply loads it again. One actor's exception is logged and the actor is
restarted from persisted state; the message that raised is dropped, the rest of its mailbox is kept. ``Cancelled``
always propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import trio

from actors.mailbox import Mailbox, SingleWaiter
from actors.scheduler import Scheduler

__all__ = ["ActorRegistry", "Behavior", "OneShot"]

log = logging.getLogger("tollgate.actors")

S = TypeVar("S")
M = TypeVar("M")
E = TypeVar("E")
T = TypeVar("T")


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


class Behavior(Protocol[S, M, E]):
    """What an actor does; everything but :meth:`perform` is pure and synchronous."""

    def load(self, key: str) -> S:
        """The persisted state of ``key`` (a fresh one when nothing is stored)."""

    def handle(self, state: S, message: M, now: float) -> tuple[S, Sequence[E]]:
        """The transition: new state and the effects to carry out."""

    def next_deadline(self, state: S) -> float | None:
        """The wall-clock instant at which this actor must next be woken, if any."""

    def deadline_message(self, deadline: float) -> M:
        """The message posted when the deadline armed at ``deadline`` is reached."""

    async def perform(self, key: str, before: S, after: S, effects: Sequence[E]) -> S:
        """Carry out effects (persist, revoke, notify) in the actor's task; returns the state to keep.

        The returned state is ``after`` or ``after`` enriched with what only the shell can know (for example the
        next deadline derived from the current policies); it must not undo the transition.
        """

    def failed(self, message: M, error: Exception) -> None:
        """Handling ``message`` raised ``error`` (or the state to handle it with could not be loaded): fail the
        message's reply slot, if it has one, with the error (:meth:`OneShot.fail`). The actor restarts from its
        persisted state; a request waiting for the reply must not wait forever."""


@dataclass(slots=True)
class _Actor(Generic[S]):
    mailbox: Mailbox[Any]
    running: bool = False
    generation: int = 0
    deadline: float | None = None
    fired: float | None = None


class ActorRegistry(Generic[S, M, E]):
    """Owns every actor of one behaviour.

    Args:
        behavior: the actor logic.
        now: wall-clock time (the controller's clock), passed to ``handle``.
        to_trio: converts a wall-clock deadline into Trio time for the scheduler.
    """

    def __init__(self, behavior: Behavior[S, M, E], now: Callable[[], float],
                 to_trio: Callable[[float], float]) -> None:
        self._behavior = behavior
        self._now = now
        self._to_trio = to_trio
        self._actors: dict[str, _Actor[S]] = {}
        self._scheduler: Scheduler[str] = Scheduler(self._deadline_reached)
        self._nursery: trio.Nursery | None = None
        self._live = 0
        self.spawned = 0
        self.crashed = 0
        self.handled = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the actors and the scheduler until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._scheduler.run)
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def statistics(self) -> dict[str, int]:
        """Live actors, pending deadlines, and counters since start."""
        return {"live": self._live, "known": len(self._actors),
                "spawned": self.spawned, "crashed": self.crashed, "handled": self.handled,
                **{f"scheduler_{k}": v for k, v in self._scheduler.statistics().items()}}

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

    def _spawn(self, key: str, actor: _Actor[S]) -> None:
        if self._nursery is None:
            raise RuntimeError("the actor registry is not running")
        actor.running = True
        self._live += 1
        self.spawned += 1
        self._nursery.start_soon(self._actor_task, key, actor)

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

    async def _actor_task(self, key: str, actor: _Actor[S]) -> None:
        consumed = consumed_any = False
        mailbox = actor.mailbox
        try:
            state = self._behavior.load(key)
            while True:
                consumed = False
                if not len(mailbox):
                    if actor.deadline is None:
                        return  # passivate: nothing queued, nothing to wake for
                    # Parked: this frame holds only the state (the last message and its effects died with _step).
                    await mailbox.wait()
                elif consumed_any:
                    await trio.lowlevel.checkpoint()  # a long mailbox must not keep the other actors waiting
                consumed = consumed_any = True
                state = await self._step(key, actor, state, mailbox.get_nowait())
        except Exception as exc:
            # The actor boundary: one identity's failure must not take down the others.
            self.crashed += 1
            log.exception("actor crashed; restarting from persisted state", extra={"actor": key})
            self._stopped(actor)
            if not consumed and len(mailbox):
                # The state could not even load: fail one message so this ends (a failed step failed its own).
                self._behavior.failed(mailbox.get_nowait(), exc)
            if len(mailbox) or actor.deadline is not None:
                self._spawn(key, actor)
            return
        finally:
            if actor.running and not (len(mailbox) or actor.deadline is not None):
                self._stopped(actor)
                if actor.deadline is None and not len(mailbox):
                    self._actors.pop(key, None)

    async def _step(self, key: str, actor: _Actor[S], state: S, message: M) -> S:
        """Handle one message: transition, effects, re-arm. Its own frame, so nothing of it outlives the step."""
        behavior = self._behavior
        try:
            new_state, effects = behavior.handle(state, message, self._now())
            self.handled += 1
            if effects or new_state is not state:
                new_state = await behavior.perform(key, state, new_state, effects)
        except Exception as exc:
            behavior.failed(message, exc)
            raise
        self._set_deadline(key, actor, behavior.next_deadline(new_state))
        return new_state

    def _stopped(self, actor: _Actor[S]) -> None:
        actor.running = False
        self._live -= 1

    def live(self, key: str) -> bool:
        actor = self._actors.get(key)
        return bool(actor and actor.running)


