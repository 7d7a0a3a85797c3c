"""The actor runtime on Trio's virtual clock: spawn on demand, passivation, one heap for deadlines, crashes."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.live_actors import OneShot
from actors.mailbox import Mailbox
from tests.actors.counter_actors import (
    Add,
    Boom,
    BrokenLoad,
    Counter,
    Read,
    SetDeadline,
    live,
    open_registry,
)


async def test_spawns_on_demand_and_passivates_when_idle(nursery: trio.Nursery) -> None:
    registry, behavior = await open_registry(nursery)
    registry.post("a", Add(2))
    registry.post("a", Add(3))
    state = await registry.ask("a", Read)
    assert state.count == 5
    assert behavior.steps == 1  # everything queued is handled in one step
    await trio.testing.wait_all_tasks_blocked()
    assert not live(registry, "a")
    assert registry.statistics()["known"] == 0
    assert (await registry.ask("a", Read)).count == 5  # reloaded from the persisted state
    assert behavior.loads == 2


async def test_passivation_waits_for_the_state_to_settle(nursery: trio.Nursery,
                                                         autojump_clock: trio.testing.MockClock) -> None:
    registry, behavior = await open_registry(nursery, write_seconds=1)
    registry.post("a", Add(4))
    await trio.sleep(0.5)
    assert live(registry, "a")  # its write is still in flight
    assert "a" not in behavior.stored
    registry.post("a", Add(1))  # a message during the wait is handled before the actor passivates
    await trio.sleep(1)
    assert live(registry, "a")  # the first write landed; the second is in flight
    assert behavior.stored["a"].count == 4
    await trio.sleep(1)
    assert not live(registry, "a")
    assert behavior.stored["a"].count == 5
    assert (await registry.ask("a", Read)).count == 5
    assert behavior.loads == 2


async def test_deadline_fires_at_exact_virtual_time(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
                                                    ) -> None:
    registry, _ = await open_registry(nursery)
    start = trio.current_time()
    registry.post("a", SetDeadline(start + 600))
    await trio.sleep(1)
    assert live(registry, "a")  # a pending deadline keeps the actor parked
    await trio.sleep(700)
    state = await registry.ask("a", Read)
    assert state.fired_at == (start + 600,)
    await trio.testing.wait_all_tasks_blocked()
    assert not live(registry, "a")


async def test_rearming_replaces_the_old_deadline(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
                                                  ) -> None:
    registry, _ = await open_registry(nursery)
    start = trio.current_time()
    registry.post("a", SetDeadline(start + 100))
    await trio.sleep(1)  # armed at +100 by its own step
    registry.post("a", SetDeadline(start + 50))
    registry.post("b", SetDeadline(start + 75))
    await trio.sleep(200)
    assert (await registry.ask("a", Read)).fired_at == (start + 50,)
    assert (await registry.ask("b", Read)).fired_at == (start + 75,)
    registry.post("c", SetDeadline(start + 300))
    await trio.sleep(1)
    registry.post("c", SetDeadline(None))
    await trio.sleep(400)
    assert (await registry.ask("c", Read)).fired_at == ()
    assert registry.statistics()["scheduler_fired"] == 2


async def test_arm_without_running_spawns_at_the_deadline(nursery: trio.Nursery,
                                                          autojump_clock: trio.testing.MockClock) -> None:
    registry, behavior = await open_registry(nursery)
    start = trio.current_time()
    behavior.stored["r"] = Counter("r", count=7, deadline=start + 30)
    registry.arm("r", start + 30)
    assert not live(registry, "r")
    await trio.sleep(29)
    assert not live(registry, "r")
    await trio.sleep(2)
    state = await registry.ask("r", Read)
    assert state.count == 7
    assert state.fired_at == (start + 30,)


async def test_a_crash_fails_its_step_and_touches_no_other_actor(nursery: trio.Nursery,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    registry, _ = await open_registry(nursery)
    registry.post("a", Add(1))
    registry.post("b", Add(10))
    assert (await registry.ask("a", Read)).count == 1
    registry.post("a", Boom())
    registry.post("a", Add(100))  # handled in the same step as the crash: lost with it
    await trio.testing.wait_all_tasks_blocked()
    registry.post("a", Add(1))
    assert (await registry.ask("a", Read)).count == 2
    assert (await registry.ask("b", Read)).count == 10
    assert registry.crashed == 1
    assert any("actor crashed" in r.getMessage() for r in caplog.records)


async def test_a_crash_answers_the_waiting_request_with_its_error(nursery: trio.Nursery) -> None:
    registry, behavior = await open_registry(nursery)
    registry.post("a", Add(1))
    registry.post("a", SetDeadline(trio.current_time() + 10**9))  # keeps the actor parked, never fires here
    assert (await registry.ask("a", Read)).count == 1
    with pytest.raises(RuntimeError, match="boom"):
        await registry.ask("a", Boom)
    # Every request of the crashing step learns the error, those before the crash included.
    boom: OneShot[Counter] = OneShot()
    read: OneShot[Counter] = OneShot()
    registry.post("a", Add(5))
    registry.post("a", Boom(boom))
    registry.post("a", Read(read))
    for reply in (boom, read):
        with pytest.raises(RuntimeError, match="boom"):
            await reply.receive()
    # It goes on from its state before that step, kept in memory: not even reloaded.
    assert (await registry.ask("a", Read)).count == 1
    assert behavior.loads == 1
    assert registry.crashed == 2
    with pytest.raises(ValueError, match="corrupt state"):
        await registry.ask("unloadable", BrokenLoad)
    assert registry.crashed == 3


async def test_a_state_that_does_not_load_fails_each_message(nursery: trio.Nursery) -> None:
    registry, behavior = await open_registry(nursery)
    replies: list[OneShot[Counter]] = [OneShot(), OneShot()]
    for reply in replies:
        registry.post("unloadable", BrokenLoad(reply))
    for reply in replies:
        with pytest.raises(ValueError, match="corrupt state"):
            await reply.receive()
    assert behavior.loads == 2  # one attempt per message
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


async def test_mailbox_drain_takes_everything_queued() -> None:
    box: Mailbox[int] = Mailbox()
    assert box.drain() == []
    for n in (1, 2, 3):
        box.put_nowait(n)
    assert len(box) == 3
    assert box.drain() == [1, 2, 3]
    assert len(box) == 0
    with pytest.raises(trio.WouldBlock):
        box.get_nowait()


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


async def test_one_shot_fail_raises_in_the_receiver_unless_answered_first() -> None:
    failed: OneShot[str] = OneShot()
    failed.fail(KeyError("gone"))
    with pytest.raises(KeyError, match="gone"):
        await failed.receive()

    answered: OneShot[str] = OneShot()
    answered.send("first")
    answered.fail(KeyError("ignored"))
    assert await answered.receive() == "first"

    waiting: OneShot[str] = OneShot()
    async with trio.open_nursery() as nursery:

        async def receive() -> None:
            with pytest.raises(KeyError, match="gone"):
                await waiting.receive()

        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        waiting.fail(KeyError("gone"))


async def test_upcoming_lists_the_earliest_pending_deadlines(nursery: trio.Nursery,
                                                            autojump_clock: trio.testing.MockClock) -> None:
    registry, _ = await open_registry(nursery)
    start = trio.current_time()
    for key, after in (("c", 30), ("a", 10), ("b", 20), ("d", 40)):
        registry.post(key, SetDeadline(start + after))
    registry.arm("parked", start + 15)  # restored after a restart, its actor not running
    await trio.testing.wait_all_tasks_blocked()
    assert registry.upcoming(3) == [(start + 10, "a"), (start + 15, "parked"), (start + 20, "b")]
    registry.post("a", SetDeadline(None))
    await trio.sleep(16)  # "parked" fired; "a" was disarmed
    assert registry.upcoming(10) == [(start + 20, "b"), (start + 30, "c"), (start + 40, "d")]
