"""A counting actor behaviour, its messages and a registry of it started in a nursery: what the actor runtime's tests
(tests/actors/test_registry.py, tests/actors/test_registry_release.py) drive."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import trio

from actors.live_actors import ActorRegistry, OneShot

__all__ = ["Add", "Boom", "BrokenLoad", "Counter", "CounterBehavior", "Fired", "Read", "SetDeadline", "live",
           "open_registry"]


@dataclass(frozen=True)
class Counter:
    key: str
    count: int = 0
    deadline: float | None = None
    fired_at: tuple[float, ...] = ()


@dataclass(frozen=True)
class Add:
    n: int


@dataclass(frozen=True)
class SetDeadline:
    at: float | None


@dataclass(frozen=True)
class Fired:
    deadline: float


@dataclass(frozen=True)
class Read:
    reply: OneShot[Counter]


@dataclass(frozen=True)
class BrokenLoad:
    reply: OneShot[Counter]


@dataclass(frozen=True)
class Boom:
    reply: OneShot[Counter] | None = None


class CounterBehavior:
    """A toy behaviour whose state is 'persisted' in a dict, like LMDB in production: a step queues its state's
    write, which lands in :attr:`stored` ``write_seconds`` later, when :meth:`settled` is awaited."""

    def __init__(self, write_seconds: float = 0) -> None:
        self.stored: dict[str, Counter] = {}
        self.queued: dict[str, Counter] = {}
        self.write_seconds = write_seconds
        self.loads = 0
        self.steps = 0

    def load(self, key: str) -> Counter:
        self.loads += 1
        if key == "unloadable":
            raise ValueError("corrupt state")
        return self.stored.get(key, Counter(key))

    def step(self, key: str, state: Counter, messages: list[Any], now: float) -> Counter:
        self.steps += 1
        for message in messages:
            match message:
                case Add(n):
                    state = replace(state, count=state.count + n)
                case SetDeadline(at):
                    state = replace(state, deadline=at)
                case Fired():
                    state = replace(state, deadline=None, fired_at=(*state.fired_at, now))
                case Read(reply):
                    reply.send(state)
                case Boom():
                    raise RuntimeError("boom")
                case BrokenLoad():
                    raise AssertionError("never handled: the state does not load")
                case _:
                    raise AssertionError(message)
        self.queued[key] = state
        return state

    def next_deadline(self, state: Counter) -> float | None:
        return state.deadline

    def deadline_message(self, deadline: float) -> Fired:
        return Fired(deadline)

    def failed(self, message: Any, error: Exception) -> None:
        reply = getattr(message, "reply", None)
        if reply is not None:
            reply.fail(error)

    async def settled(self, state: Counter) -> None:
        if state.key in self.queued:
            await trio.sleep(self.write_seconds)
            self.stored[state.key] = self.queued.pop(state.key)


async def open_registry(nursery: trio.Nursery, write_seconds: float = 0, *, releasable: bool = False
                        ) -> tuple[ActorRegistry[Counter, Any], CounterBehavior]:
    behavior = CounterBehavior(write_seconds)
    registry: ActorRegistry[Counter, Any] = ActorRegistry(behavior, trio.current_time, lambda t: t,
                                                          releasable=releasable)
    await nursery.start(registry.run)
    return registry, behavior


def live(registry: ActorRegistry[Counter, Any], key: str) -> bool:
    return registry.state_of(key) is not None
