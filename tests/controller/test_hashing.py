"""controller.authentication.hashing: password work is bounded in how much runs and how much waits."""

from __future__ import annotations

import threading

import pytest
import trio

from controller.authentication import hashing, password_hashing
from controller.errors import ApiError


async def test_a_full_queue_refuses_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    release, started = threading.Event(), threading.Event()
    real = password_hashing.hash_password

    def held(password: str) -> str:
        started.set()
        release.wait(10)
        return real(password)

    monkeypatch.setattr(hashing.passwords, "hash_password", held)
    work = hashing.PasswordHashing(in_thread=True, max_concurrent=1, max_waiting=2)
    outcomes: list[str] = []
    two_refused = trio.Event()

    async def one() -> None:
        try:
            await work.hash("a-password")
            outcomes.append("hashed")
        except ApiError as exc:
            assert exc.status == 429 and exc.headers == {"Retry-After": "1"}
            outcomes.append("refused")
            if outcomes.count("refused") == 2:
                two_refused.set()

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
        # One runs and two wait: the fourth and fifth are refused without waiting.
        with trio.fail_after(10):
            await two_refused.wait()
            await trio.to_thread.run_sync(started.wait)
        stats = work.statistics()
        assert (stats.running, stats.waiting, stats.refused) == (1, 2, 2)
        release.set()
    assert sorted(outcomes) == ["hashed"] * 3 + ["refused"] * 2
    assert work.statistics().peak == 1


async def test_verification_of_a_missing_hash_costs_a_real_one() -> None:
    work = hashing.PasswordHashing(in_thread=False)
    stored = password_hashing.hash_password("right-one")
    assert await work.verify("right-one", stored)
    assert not await work.verify("wrong-one", stored)
    assert not await work.verify("anything", None)
