"""Password hashing and verification off the event loop, bounded.

Each scrypt call holds 16 MiB and a core for tens of milliseconds, so at most ``max_concurrent`` run at once (in
worker threads where the controller runs them, so the event loop keeps serving), and at most ``max_waiting`` wait
for a turn: past that, a request is refused at once with 429 RATE_LIMITED and ``Retry-After`` instead of queueing
behind a flood of logins. Every password the controller hashes or verifies goes through here: logins, a password
change, an admin setting a password, updb enrolment.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from controller.authentication import password_hashing as passwords
from controller.errors import ApiError

__all__ = ["HashingStatistics", "PasswordHashing"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HashingStatistics:
    """A snapshot of :class:`PasswordHashing` counters.

    Attributes:
        running: hashes or verifications in progress now.
        waiting: calls queued for a turn.
        peak: the most ever in progress at once (never above ``max_concurrent``).
        refused: calls refused because the queue was full.
        max_concurrent: the bound on calls in progress.
    """

    running: int
    waiting: int
    peak: int
    refused: int
    max_concurrent: int


class PasswordHashing:
    """Bounded password work for one controller.

    Args:
        in_thread: run each call in a worker thread (off on a virtual clock, where a thread hop lets virtual time
            jump).
        max_concurrent: calls in progress at once.
        max_waiting: calls allowed to wait for a turn; one more is refused (429).
    """

    def __init__(self, *, in_thread: bool = True, max_concurrent: int = 2, max_waiting: int = 64) -> None:
        self._in_thread = in_thread
        self._limiter = trio.CapacityLimiter(max_concurrent)
        self._max_waiting = max_waiting
        self._running = 0
        self._peak = 0
        self._refused = 0

    def statistics(self) -> HashingStatistics:
        return HashingStatistics(running=self._running, waiting=self._limiter.statistics().tasks_waiting,
                                 peak=self._peak, refused=self._refused,
                                 max_concurrent=int(self._limiter.total_tokens))

    async def verify(self, password: str, stored: str | None) -> bool:
        """Whether ``password`` matches the stored hash; constant time, and the same work for a missing hash (an
        unknown user), so timing reveals nothing.

        Raises:
            ApiError: 429 RATE_LIMITED when too many calls are waiting already.
        """
        if stored is None:
            return await self._run(functools.partial(passwords.dummy_verify, password))
        return await self._run(functools.partial(passwords.verify_password, password, stored))

    async def hash(self, password: str) -> str:
        """A new salted hash of ``password`` (:func:`password_hashing.hash_password`).

        Raises:
            ApiError: 429 RATE_LIMITED when too many calls are waiting already.
        """
        return await self._run(functools.partial(passwords.hash_password, password))

    async def _run(self, work: Callable[[], T]) -> T:
        if self._limiter.statistics().tasks_waiting >= self._max_waiting:
            self._refused += 1
            raise ApiError("RATE_LIMITED", headers={"Retry-After": "1"})
        async with self._limiter:
            self._running += 1
            self._peak = max(self._peak, self._running)
            try:
                if self._in_thread:
                    return await trio.to_thread.run_sync(work)
                return work()
            finally:
                self._running -= 1
