"""The actor runtime on Trio's virtual clock: spawn on demand, passivation, one heap for deadlines, crashes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
import trio

from actors.mailbox import Mailbox
from actors.registry import ActorRegistry, OneShot


@dataclass(frozen=True)
class Counter:
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
    """A toy behaviour whose state is 'persisted' in a dict, like LMDB in production."""

    def __init__(self) -> None:
        self.stored: dict[str, Counter] = {}
        self.loads = 0

    def load(self, key: str) -> Counter:
        self.loads += 1
        if key == "unloadable":
            raise ValueError("corrupt state")
        return self.stored.get(key, Counter())

    def handle(self, state: Counter, message: Any, now: float) -> tuple[Counter, Sequence[str]]:
        match message:
            case Add(n):
                return replace(state, count=state.count + n), ["persist"]
            case SetDeadline(at):
                return replace(state, deadline=at), ["persist"]
            case Fired():
                return replace(state, deadline=None, fired_at=(*state.fired_at, now)), ["persist"]
            case Read(reply):
                reply.send(state)
                return state, []
            case Boom():
                raise RuntimeError("boom")
            case BrokenLoad():
                raise AssertionError("never handled: the state does not load")
        raise AssertionError(message)

    def next_deadline(self, state: Counter) -> float | None:
        return state.deadline

    def deadline_message(self, deadline: float) -> Fired:
        return Fired(deadline)

    def failed(self, message: Any, error: Exception) -> None:
        if isinstance(message, Boom | BrokenLoad) and message.reply is not None:
            message.reply.fail(error)

    async def perform(self, key: str, before: Counter, after: Counter, effects: Sequence[str]) -> Counter:
        self.stored[key] = after
        return after


async def open_registry(nursery: trio.Nursery) -> tuple[ActorRegistry[Counter, Any, str], CounterBehavior]:
    behavior = CounterBehavior()
    registry: ActorRegistry[Counter, Any, str] = ActorRegistry(behavior, trio.current_time, lambda t: t)
    await nursery.start(registry.run)
    return registry, behavior


async def test_spawns_on_demand_and_passivates_when_idle(nursery: trio.Nursery) -> None:
    registry, behavior = await open_registry(nursery)
    registry.post("a", Add(2))
    registry.post("a", Add(3))
    state = await registry.ask("a", Read)
    assert state.count == 5
    await trio.testing.wait_all_tasks_blocked()
    assert not registry.live("a")
    assert registry.statistics()["known"] == 0
    assert (await registry.ask("a", Read)).count == 5  # reloaded from the persisted state
    assert behavior.loads == 2


async def test_deadline_fires_at_exact_virtual_time(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
                                                    ) -> None:
    registry, _ = await open_registry(nursery)
    start = trio.current_time()
    registry.post("a", SetDeadline(start + 600))
    await trio.sleep(1)
    assert registry.live("a")  # a pending deadline keeps the actor parked
    await trio.sleep(700)
    state = await registry.ask("a", Read)
    assert state.fired_at == (start + 600,)
    await trio.testing.wait_all_tasks_blocked()
    assert not registry.live("a")


async def test_rearming_replaces_the_old_deadline(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
                                                  ) -> None:
    registry, _ = await open_registry(nursery)
    start = trio.current_time()
    registry.post("a", SetDeadline(start + 100))
    registry.post("a", SetDeadline(start + 50))
    registry.post("b", SetDeadline(start + 75))
    await trio.sleep(200)
    assert (await registry.ask("a", Read)).fired_at == (start + 50,)
    assert (await registry.ask("b", Read)).fired_at == (start + 75,)
    registry.post("c", SetDeadline(start + 300))
    registry.post("c", SetDeadline(None))
    await trio.sleep(200)
    assert (await registry.ask("c", Read)).fired_at == ()
    assert registry.statistics()["scheduler_fired"] == 2


async def test_arm_without_running_spawns_at_the_deadline(nursery: trio.Nursery,
                                                          autojump_clock: trio.testing.MockClock) -> None:
    registry, behavior = await open_registry(nursery)
    start = trio.current_time()
    behavior.stored["r"] = Counter(count=7, deadline=start + 30)
    registry.arm("r", start + 30)
    assert not registry.live("r")
    await trio.sleep(31)
    state = await registry.ask("r", Read)
    assert state.count == 7
    assert state.fired_at == (start + 30,)


async def test_a_crash_restarts_only_that_actor(nursery: trio.Nursery, caplog: pytest.LogCaptureFixture) -> None:
    registry, _ = await open_registry(nursery)
    registry.post("a", Add(1))
    registry.post("b", Add(10))
    registry.post("a", Boom())
    registry.post("a", Add(1))
    assert (await registry.ask("a", Read)).count == 2
    assert (await registry.ask("b", Read)).count == 10
    assert registry.crashed == 1
    assert any("actor crashed" in r.getMessage() for r in caplog.records)


async def test_a_crash_answers_the_waiting_request_with_its_error(nursery: trio.Nursery) -> None:
    registry, _ = await open_registry(nursery)
    registry.post("a", Add(1))
    with pytest.raises(RuntimeError, match="boom"):
        await registry.ask("a", Boom)
    assert (await registry.ask("a", Read)).count == 1  # restarted from its persisted state
    with pytest.raises(ValueError, match="corrupt state"):
        await registry.ask("unloadable", BrokenLoad)
    assert registry.crashed == 2


async def test_many_actors_with_deadlines(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    registry, _ = await open_registry(nursery)
    start = trio.current_time()
    for i in range(2000):
        registry.post(f"id{i}", SetDeadline(start + 1 + (i % 97)))
    await trio.sleep(100)
    for i in range(0, 2000, 97):
        assert (await registry.ask(f"id{i}", Read)).fired_at == (start + 1 + (i % 97),)
    await trio.testing.wait_all_tasks_blocked()
    assert registry.statistics()["live"] == 0
    assert registry.statistics()["scheduler_pending"] == 0


async def test_mailbox_get_waits_and_survives_cancellation() -> None:
    box: Mailbox[int] = Mailbox()
    with trio.move_on_after(0.01):
        await box.get()
    box.put_nowait(1)
    assert await box.get() == 1
    async with trio.open_nursery() as nursery:
        got: list[int] = []

        async def consume() -> None:
            got.append(await box.get())

        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        box.put_nowait(2)
    assert got == [2]


async def test_one_shot_delivers_before_or_after_the_wait_and_survives_a_cancelled_receiver(
        autojump_clock: trio.testing.MockClock) -> None:
    early: OneShot[str] = OneShot()
    early.send("early")
    assert await early.receive() == "early"

    late: OneShot[str] = OneShot()
    with trio.move_on_after(1) as scope:
        await late.receive()  # nothing sent: the receiver gives up
    assert scope.cancelled_caught
    got: list[str] = []
    async with trio.open_nursery() as nursery:

        async def receive() -> None:
            got.append(await late.receive())

        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="one receiver"):
            await late.receive()
        late.send("late")
    assert got == ["late"]
