"""Releasing actors (their keys move to another process), on Trio's virtual clock: they stop, their deadlines never
fire, what waited for them fails, and the idle ones end a chunk at a time."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from actors.live_actors import REAP_CHUNK, OneShot
from tests.actors.counter_actors import Counter, Read, SetDeadline, live, open_registry


class Gone(Exception):
    pass


async def test_released_actors_stop_and_their_deadlines_never_fire(nursery: trio.Nursery,
                                                                   autojump_clock: trio.testing.MockClock) -> None:
    registry, _ = await open_registry(nursery, write_seconds=1000, releasable=True)
    start = trio.current_time()
    for key in ("a1", "a2", "b1"):
        registry.post(key, SetDeadline(start + 50))
    await trio.sleep(1)
    assert all(live(registry, key) for key in ("a1", "a2", "b1"))  # parked, their writes in flight
    waiting = OneShot[Counter]()
    registry.post("a1", Read(waiting))  # queued, not yet handled
    assert registry.release(lambda key: key.startswith("a"), Gone()) == 2
    with pytest.raises(Gone):
        await waiting.receive()
    await trio.sleep(100)
    assert not live(registry, "a1") and not live(registry, "a2")
    assert (await registry.ask("b1", Read)).fired_at == (start + 50,)  # the others go on
    assert registry.statistics()["live"] == 1
    # Posted to again, a released key is a new actor, loaded from what is stored.
    assert (await registry.ask("a1", Read)).fired_at == ()


async def test_a_registry_not_made_releasable_refuses_to_release(nursery: trio.Nursery,
                                                                 autojump_clock: trio.testing.MockClock) -> None:
    registry, _ = await open_registry(nursery)
    registry.post("a1", SetDeadline(trio.current_time() + 50))
    await trio.sleep(1)
    with pytest.raises(RuntimeError):
        registry.release(lambda key: True, Gone())
    assert live(registry, "a1")  # nothing stopped


async def test_released_parked_actors_end_a_chunk_at_a_time(nursery: trio.Nursery,
                                                            autojump_clock: trio.testing.MockClock) -> None:
    registry, _ = await open_registry(nursery, releasable=True)
    count = 4 * REAP_CHUNK
    keys = [f"k{i}" for i in range(count)]
    for key in keys:
        registry.post(key, SetDeadline(trio.current_time() + 50))
    await trio.testing.wait_all_tasks_blocked()
    assert registry.statistics()["parked"] == count
    assert registry.release(lambda key: True, Gone()) == count
    assert not any(live(registry, key) for key in keys)  # released at once: nothing of theirs is known
    seen = [registry.statistics()["live"]]
    while seen[-1]:
        await trio.lowlevel.checkpoint()
        seen.append(registry.statistics()["live"])
    # The tasks end over several turns of the event loop: a chunk per turn, and a turn of this task may see two
    # (Trio runs the tasks of a turn in any order).
    assert seen[0] == count
    assert all(0 <= before - after <= 2 * REAP_CHUNK for before, after in itertools.pairwise(seen))
    assert len([n for n in seen if 0 < n < count]) >= 2
    await trio.sleep(100)
    assert registry.statistics()["scheduler_fired"] == 0  # no released actor's deadline fired
