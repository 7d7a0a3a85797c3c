"""A deadline is delivered once, even when it fires while its actor is still busy with an earlier message."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import trio
import trio.testing

from actors.registry import ActorRegistry, OneShot


@dataclass(frozen=True)
class State:
    deadline: float | None = None
    fired_at: tuple[float, ...] = ()


@dataclass(frozen=True)
class Arm:
    at: float


@dataclass(frozen=True)
class Slow:
    """A message whose effect takes five seconds to carry out (a slow commit) and changes nothing."""


@dataclass(frozen=True)
class Fired:
    deadline: float


@dataclass(frozen=True)
class Read:
    reply: OneShot[State]


class SlowBehavior:
    def __init__(self) -> None:
        self.stored: dict[str, State] = {}

    def load(self, key: str) -> State:
        return self.stored.get(key, State())

    def handle(self, state: State, message: Any, now: float) -> tuple[State, Sequence[str]]:
        match message:
            case Arm(at):
                return replace(state, deadline=at), ["persist"]
            case Slow():
                return state, ["slow"]
            case Fired():
                return replace(state, deadline=None, fired_at=(*state.fired_at, now)), ["persist"]
            case Read(reply):
                reply.send(state)
                return state, []
        raise AssertionError(message)

    def next_deadline(self, state: State) -> float | None:
        return state.deadline

    def deadline_message(self, deadline: float) -> Fired:
        return Fired(deadline)

    def failed(self, message: Any, error: Exception) -> None:
        raise AssertionError(f"{message} failed: {error}")

    async def perform(self, key: str, before: State, after: State, effects: Sequence[str]) -> State:
        # Every write takes a second, a slow one five: time for a wrongly re-armed deadline to fire again.
        await trio.sleep(5 if "slow" in effects else 1)
        self.stored[key] = after
        return after


async def test_a_deadline_reached_during_a_slow_step_fires_once(nursery: trio.Nursery,
                                                                autojump_clock: trio.testing.MockClock) -> None:
    registry: ActorRegistry[State, Any, str] = ActorRegistry(SlowBehavior(), trio.current_time, lambda t: t)
    await nursery.start(registry.run)
    start = trio.current_time()
    registry.post("a", Arm(start + 10))
    await trio.sleep(8)
    registry.post("a", Slow())  # busy from start + 8 to start + 13; the deadline falls in between
    await trio.sleep(12)
    state = await registry.ask("a", Read)
    # Handled once, when the slow step let it: the step's state still named the deadline, which must not re-arm it.
    assert state.fired_at == (start + 13,)
    assert state.deadline is None
    assert registry.statistics()["scheduler_fired"] == 1
    assert registry.statistics()["handled"] == 4  # Arm, Slow, Fired, Read
