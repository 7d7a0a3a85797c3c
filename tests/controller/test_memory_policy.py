"""The garbage-collection policy of a running controller (controller/runtime/memory.py): however a workload moves
CPython's allocation count, the young generation is collected before it holds more than a few task steps' objects.

The workload is the one that defeats CPython's own trigger: long-lived (frozen) objects replaced by new ones, one
freed for each allocated, as actors replace their states."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from controller.runtime import memory

REPLACED = 60_000
PER_STEP = 4  # objects replaced per task step, each of 4 containers


class _State:
    """A stand-in for an actor's state: a few container objects that live until replaced."""

    __slots__ = ("checks", "sessions")

    def __init__(self) -> None:
        self.sessions = [1]
        self.checks = {"mac": [2]}


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


async def _replace_frozen(states: list[_State]) -> int:
    """Replace every state, :data:`PER_STEP` per task step; returns the young generation's size at the end."""
    for index in range(len(states)):
        states[index] = _State()
        if index % PER_STEP == 0:
            await trio.lowlevel.checkpoint()
    return len(gc.get_objects(generation=0))


def test_replacing_frozen_objects_leaves_the_young_generation_to_cpython_alone() -> None:
    """The defect the policy answers, shown with CPython's trigger only: no collection comes, and the young
    generation ends up holding every new object."""

    async def main() -> tuple[int, list[int]]:
        states = [_State() for _ in range(REPLACED)]
        policy = memory.GcPolicy().install()
        try:
            memory.settle()
            with _young_sizes() as sizes:
                young = await _replace_frozen(states)
            return young, sizes
        finally:
            policy.uninstall()

    young, sizes = trio.run(main)
    # Whatever collections another thread's allocations may bring, the young generation held tens of thousands of
    # objects at some point: far past what the policy lets it hold (the next test).
    assert max([young, *sizes]) >= REPLACED


def test_the_runtime_policy_collects_the_young_generation_every_few_task_steps() -> None:
    async def main() -> tuple[int, list[int], int]:
        states = [_State() for _ in range(REPLACED)]
        with memory.runtime_policy() as policy:
            memory.settle()
            with _young_sizes() as sizes:
                young = await _replace_frozen(states)
            return young, sizes, policy.refreezes

    young, sizes, refreezes = trio.run(main)
    # At most YOUNG_STEPS steps' objects (4 states of 4 containers each) besides what CPython's count lets in,
    # whatever the number replaced.
    bound = memory.YOUNG_STEPS * PER_STEP * 4 + 2 * gc.get_threshold()[0]
    assert len(sizes) >= REPLACED * 4 // bound
    assert max(sizes) <= bound
    assert young <= bound
    assert refreezes > 0  # the older generations are collected (and frozen) in turn, not only the young one


def test_the_young_collections_stop_with_the_policy() -> None:
    async def main() -> tuple[int, list[int]]:
        with memory.runtime_policy():
            pass
        states = [_State() for _ in range(REPLACED // 4)]
        memory.settle()
        try:
            with _young_sizes() as sizes:
                young = await _replace_frozen(states)
        finally:
            gc.unfreeze()
        return young, sizes

    young, sizes = trio.run(main)
    assert max([young, *sizes]) >= REPLACED // 4  # the replacements piled up again, as in the first test
