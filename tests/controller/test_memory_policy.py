"""The garbage-collection policy of a running controller (controller/runtime/memory.py): however a workload moves
CPython's allocation count, the young generation is collected before it holds more than a few actor steps' objects.

The workload is the one that defeats CPython's own trigger: actors of a real registry (``actors.ActorRegistry``)
whose long-lived (frozen) states each step replaces with new ones, one object freed for each allocated."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import trio
import trio.testing

from actors.live_actors import ActorRegistry
from controller.runtime import memory

ACTORS = 20_000
OBJECTS = 4  # container objects in a state
FAR = 1e9  # every actor's deadline, so that it stays parked with its state instead of passivating


class _State:
    """A stand-in for an identity's state: a few container objects that live until replaced."""

    __slots__ = ("checks", "sessions")

    def __init__(self) -> None:
        self.sessions = [1]
        self.checks = {"mac": [2]}


class _Replacing:
    """Each step replaces the actor's state with a new one."""

    def load(self, key: str) -> _State:
        return _State()

    def step(self, key: str, state: _State, messages: list[str], now: float) -> _State:
        return _State()

    def next_deadline(self, state: _State) -> float | None:
        return FAR

    def deadline_message(self, deadline: float) -> str:
        raise AssertionError("no deadline falls during the test")

    def failed(self, message: str, error: Exception) -> None:
        raise AssertionError(f"a step failed: {error!r}")

    async def settled(self, state: _State) -> None:
        raise AssertionError("no actor passivates during the test")


@contextmanager
def _young_sizes() -> Iterator[list[int]]:
    """The young generation's size when each collection of the process started."""
    sizes: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            sizes.append(len(gc.get_objects(generation=0)))

    gc.callbacks.append(record)
    try:
        yield sizes
    finally:
        gc.callbacks.remove(record)


async def _step_every_actor(registry: ActorRegistry[_State, str]) -> None:
    """One message to each actor, and return once every one has handled it."""
    handled = registry.handled
    for number in range(ACTORS):
        registry.post(f"i{number}", "replace")
    while registry.handled < handled + ACTORS:
        await trio.testing.wait_all_tasks_blocked()


async def _replaced(registry: ActorRegistry[_State, str]) -> tuple[int, list[int]]:
    """Load every actor, freeze what lives, then have each replace its state: the young generation's size at the
    end, and at the start of each collection meanwhile."""
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        await _step_every_actor(registry)
        memory.settle()
        with _young_sizes() as sizes:
            await _step_every_actor(registry)
            young = len(gc.get_objects(generation=0))
        nursery.cancel_scope.cancel()
    return young, sizes


def _registry() -> ActorRegistry[_State, str]:
    return ActorRegistry(_Replacing(), lambda: 0.0, lambda deadline: deadline)


def test_replacing_frozen_states_leaves_the_young_generation_to_cpython_alone() -> None:
    """The defect the policy answers, shown with CPython's trigger only: no collection comes, and the young
    generation ends up holding every new state."""

    async def main() -> tuple[int, list[int]]:
        policy = memory.GcPolicy().install()
        try:
            return await _replaced(_registry())
        finally:
            policy.uninstall()

    young, sizes = trio.run(main)
    # Whatever collections another thread's allocations may bring, the young generation held the new states of
    # thousands of actors at some point: far past what the policy lets it hold (the next test).
    assert max([young, *sizes]) >= ACTORS


def test_the_runtime_policy_collects_the_young_generation_every_few_actor_steps() -> None:
    async def main() -> tuple[int, list[int], int, bool]:
        registry = _registry()
        with memory.runtime_policy(registry) as policy:
            young, sizes = await _replaced(registry)
            return young, sizes, policy.refreezes, registry.after_step is not None

    young, sizes, refreezes, counted = trio.run(main)
    # At most YOUNG_STEPS steps' states (and what else a step leaves until the next collection: its message, the
    # mailbox's list) besides what CPython's count lets in, whatever the number of actors.
    bound = memory.YOUNG_STEPS * OBJECTS * 2 + 2 * gc.get_threshold()[0]
    assert counted
    assert len(sizes) >= ACTORS * OBJECTS // bound
    assert max(sizes) <= bound
    assert young <= bound
    assert refreezes > 0  # the older generations are collected (and frozen) in turn, not only the young one


def test_the_young_collections_stop_with_the_policy() -> None:
    async def main() -> tuple[int, list[int], bool]:
        registry = _registry()
        with memory.runtime_policy(registry):
            pass
        try:
            young, sizes = await _replaced(registry)
        finally:
            gc.unfreeze()
        return young, sizes, registry.after_step is None

    young, sizes, detached = trio.run(main)
    assert detached
    assert max([young, *sizes]) >= ACTORS  # the replacements piled up again, as in the first test
