"""Throttles on guessing: wrong passwords per username and per client address, wrong MFA codes per identity, and the
MFA lockout.

Each key has a token bucket: ``burst`` failures may come at once, then one more every ``every`` seconds. A request
whose bucket is empty is refused before any work (429 RATE_LIMITED with ``Retry-After``, the seconds until the next
try would be admitted); only failures take from the bucket, so a client that gets its secret right is never slowed.
Guessing thus costs an attacker time per username and per address, whatever the auth policy's lockout says, and
the default admin (which no lockout may disable) is covered too. Beyond that, :data:`MFA_LOCKOUT_FAILURES`
consecutive wrong MFA codes of one identity lock it out (``controller/authentication/mfa.py``): someone who holds
a password but not the second factor gets a handful of guesses, not a day of them.

On a single node buckets live in memory, least recently touched first out beyond ``max_keys``, so a flood of made-up
names cannot grow them without bound; a restart starts them afresh. Time is Trio's (a virtual clock in tests). The
nodes of a cluster keep them in rows every node sees instead (``controller/authentication/shared_throttles.py``), so
that guesses spread over the nodes are throttled as on one: both are :class:`Throttles`.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

import trio

from controller.authentication.lockout import FailedLogins
from controller.errors import ApiError, nested_cause

__all__ = ["ADDRESS_BUCKET", "MFA_BUCKET", "MFA_LOCKOUT_FAILURES", "MFA_LOCKOUT_MINUTES", "USERNAME_BUCKET",
           "Bucket", "GuessThrottles", "Throttle", "Throttles", "refuse"]

MFA_LOCKOUT_FAILURES = 10
MFA_LOCKOUT_MINUTES = 15


@dataclass(frozen=True, slots=True)
class Bucket:
    """A throttle's shape: ``burst`` failures admitted at once, then one more every ``every`` seconds."""

    name: str
    burst: int
    every: float


USERNAME_BUCKET = Bucket("username", 5, 12.0)
ADDRESS_BUCKET = Bucket("address", 30, 1.0)
MFA_BUCKET = Bucket("mfa", 5, 30.0)


class Throttles(Protocol):
    """The throttles and failure counts logins and MFA consult: checks read, failures and successes are recorded
    (durably, where nodes share them) before the caller answers."""

    def check_password(self, username: str, address: str) -> None:
        """Refuse a password login whose username or address has guessed too much (429 with Retry-After)."""

    async def password_failed(self, username: str, address: str) -> None:
        """Count a wrong password for the username and the address."""

    def check_mfa(self, identity_id: str) -> None:
        """Refuse an MFA code from an identity that has given too many wrong ones (429 with Retry-After)."""

    async def mfa_failed(self, identity_id: str) -> int:
        """Count a wrong MFA code; the identity's consecutive wrong codes, this one included (one that reaches
        :data:`MFA_LOCKOUT_FAILURES` starts the count again: the caller locks the identity out)."""

    async def mfa_passed(self, identity_id: str) -> None:
        """A right MFA code: the consecutive count starts again."""

    async def login_failed(self, authenticator_id: str) -> int:
        """Count a wrong password for an existing authenticator; its consecutive count, this one included (for
        the auth policy's lockout, ``controller/authentication/lockout.py``)."""

    async def login_counted_out(self, authenticator_id: str) -> None:
        """A successful login or a lockout: the authenticator's next wrong password counts from one again."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class Throttle:
    """Token buckets of failures, by key.

    Args:
        burst: failures admitted at once.
        every: seconds after which one more failure is admitted.
        now: the clock (Trio's by default).
        max_keys: buckets kept at most.
    """

    def __init__(self, burst: int, every: float, *, now: Callable[[], float] = trio.current_time,
                 max_keys: int = 100_000) -> None:
        self.burst = burst
        self.every = every
        self._now = now
        self._max_keys = max_keys
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    def _refilled(self, key: Hashable) -> _Bucket | None:
        bucket = self._buckets.get(key)
        if bucket is None:
            return None
        now = self._now()
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) / self.every)
        bucket.updated = now
        self._buckets.move_to_end(key)
        if bucket.tokens >= self.burst:
            del self._buckets[key]  # full again: nothing to remember
            return None
        return bucket

    def retry_after(self, key: Hashable) -> float:
        """Seconds until ``key`` may try again (0 when it may now)."""
        bucket = self._refilled(key)
        if bucket is None or bucket.tokens >= 1:
            return 0.0
        return (1 - bucket.tokens) * self.every

    def failed(self, key: Hashable) -> None:
        """Count one failure for ``key``."""
        bucket = self._refilled(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), self._now())
            if len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
        bucket.tokens -= 1


class GuessThrottles:
    """The throttles of one controller, in its memory: passwords per username and per client address, MFA codes
    per identity, and (``failed_logins``) consecutive wrong passwords per authenticator."""

    def __init__(self, *, now: Callable[[], float] = trio.current_time,
                 failed_logins: FailedLogins | None = None) -> None:
        self.usernames = Throttle(burst=USERNAME_BUCKET.burst, every=USERNAME_BUCKET.every, now=now)
        self.addresses = Throttle(burst=ADDRESS_BUCKET.burst, every=ADDRESS_BUCKET.every, now=now)
        self.mfa = Throttle(burst=MFA_BUCKET.burst, every=MFA_BUCKET.every, now=now)
        self.failed_logins = failed_logins if failed_logins is not None else FailedLogins()
        self._mfa_failures: dict[str, int] = {}

    def check_password(self, username: str, address: str) -> None:
        """Refuse a password login whose username or address has guessed too much (429 with Retry-After)."""
        refuse(max(self.usernames.retry_after(username), self.addresses.retry_after(address)))

    async def password_failed(self, username: str, address: str) -> None:
        self.usernames.failed(username)
        self.addresses.failed(address)

    def check_mfa(self, identity_id: str) -> None:
        """Refuse an MFA code from an identity that has given too many wrong ones (429 with Retry-After)."""
        refuse(self.mfa.retry_after(identity_id))

    async def login_failed(self, authenticator_id: str) -> int:
        return self.failed_logins.failed(authenticator_id)

    async def login_counted_out(self, authenticator_id: str) -> None:
        self.failed_logins.clear(authenticator_id)

    async def mfa_failed(self, identity_id: str) -> int:
        """Count a wrong MFA code; returns the identity's consecutive wrong codes, this one included (a count that
        reaches :data:`MFA_LOCKOUT_FAILURES` starts again from zero: the caller locks the identity out)."""
        self.mfa.failed(identity_id)
        count = self._mfa_failures.get(identity_id, 0) + 1
        if count >= MFA_LOCKOUT_FAILURES:
            self._mfa_failures.pop(identity_id, None)
        else:
            self._mfa_failures[identity_id] = count
        return count

    async def mfa_passed(self, identity_id: str) -> None:
        """A right MFA code: the consecutive count starts again."""
        self._mfa_failures.pop(identity_id, None)


def refuse(seconds: float) -> None:
    """Refuse with 429 RATE_LIMITED and ``Retry-After`` when ``seconds`` (until the next try is admitted) is
    positive."""
    if seconds > 0:
        wait = max(1, math.ceil(seconds))
        raise ApiError("RATE_LIMITED", nested_cause(f"too many failed attempts; try again in {wait} s"),
                       headers={"Retry-After": str(wait)})
