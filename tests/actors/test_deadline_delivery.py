"""A deadline is delivered once: when it falls while its actor is busy with an earlier step, and when the step that
handles it still names it (the behaviour's clock not yet there)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import trio
import trio.testing

from actors.live_actors import ActorRegistry, OneShot


@dataclass(frozen=True)
class State:
    deadline: float | None = None
    fired_at: tuple[float, ...] = ()


@dataclass(frozen=True)
class Arm:
    at: float


@dataclass(frozen=True)
class Slow:
    """A message whose step takes five seconds (CPU-bound work) and changes nothing."""


@dataclass(frozen=True)
class Fired:
    deadline: float


@dataclass(frozen=True)
class Read:
    reply: OneShot[State]


class SlowBehavior:
    """Handles ``Fired`` only once its clock has reached the deadline; until then the state keeps naming it (as the
    posture machine keeps a deadline that is still ahead of its clock)."""

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self.clock = clock
        self.stored: dict[str, State] = {}
        self.steps: list[list[Any]] = []

    def load(self, key: str) -> State:
        return self.stored.get(key, State())

    def step(self, key: str, state: State, messages: list[Any], now: float) -> State:
        self.steps.append(messages)
        for message in messages:
            match message:
                case Arm(at):
                    state = replace(state, deadline=at)
                case Slow():
                    self.clock.jump(5)  # the step's work takes five seconds of (virtual) time
                case Fired(deadline):
                    state = replace(state, fired_at=(*state.fired_at, now))
                    if now >= deadline:
                        state = replace(state, deadline=None)
                case Read(reply):
                    reply.send(state)
                case _:
                    raise AssertionError(message)
        self.stored[key] = state  # written at once: nothing is ever in flight
        return state

    def next_deadline(self, state: State) -> float | None:
        return state.deadline

    def deadline_message(self, deadline: float) -> Fired:
        return Fired(deadline)

    def failed(self, message: Any, error: Exception) -> None:
        raise AssertionError(f"{message} failed: {error}")

    async def settled(self, state: State) -> None:
        return None


async def open_registry(nursery: trio.Nursery, clock: trio.testing.MockClock, now: Callable[[], float]
                        ) -> tuple[ActorRegistry[State, Any], SlowBehavior]:
    behavior = SlowBehavior(clock)
    registry: ActorRegistry[State, Any] = ActorRegistry(behavior, now, lambda t: t)
    await nursery.start(registry.run)
    return registry, behavior


async def test_a_deadline_reached_during_a_slow_step_fires_once(nursery: trio.Nursery,
                                                                autojump_clock: trio.testing.MockClock) -> None:
    registry, behavior = await open_registry(nursery, autojump_clock, trio.current_time)
    start = trio.current_time()
    registry.post("a", Arm(start + 10))
    await trio.sleep(8)
    registry.post("a", Slow())  # busy from start + 8 to start + 13; the deadline falls in between
    await trio.sleep(12)
    state = await registry.ask("a", Read)
    # Handled once, after the slow step: that step's state still named the deadline, which must not arm it again.
    assert state.fired_at == (start + 13,)
    assert state.deadline is None
    assert registry.statistics()["scheduler_fired"] == 1
    assert registry.statistics()["handled"] == 4  # Arm, Slow, Fired, Read
    assert [[type(m).__name__ for m in messages] for messages in behavior.steps] == [
        ["Arm"], ["Slow"], ["Fired"], ["Read"]]


async def test_a_deadline_still_named_after_its_message_is_not_armed_again(
        nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    # The behaviour's clock runs a second behind Trio's: the deadline's message arrives before the behaviour
    # considers it due, and the state it returns still names the deadline that just fired.
    registry, behavior = await open_registry(nursery, autojump_clock, lambda: trio.current_time() - 1)
    start = trio.current_time()
    registry.post("a", Arm(start + 10))
    await trio.sleep(20)
    state = behavior.stored["a"]
    assert state.fired_at == (start + 9,)  # delivered once, at the Trio instant it was armed for
    assert state.deadline == start + 10
    assert registry.statistics()["scheduler_fired"] == 1
    assert registry.statistics()["handled"] == 2  # Arm, Fired
    assert registry.state_of("a") is None  # nothing armed: the actor passivated
