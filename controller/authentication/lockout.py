"""Auth-policy lockout: consecutive failed password logins per authenticator, and when they lock the identity.

An auth policy's ``primary.updb.maxAttempts`` (0 or less: unlimited) is how many consecutive wrong passwords an
identity may give; the next one disables the identity for ``lockoutDurationMinutes`` (0 or less: until an admin
enables it), through the same disable as ``POST /identities/{id}/disable`` (its API sessions end at once).

Where this differs from the reference controller (behaviour note §8.1): the reference counts every login attempt,
successful ones included, and never resets, so an identity with ``maxAttempts: 3`` is locked out on its fifth
login however right its passwords were. Here only wrong passwords count, a successful login starts the count
again, and so does a lockout (an identity an admin enables again gets ``maxAttempts`` fresh attempts). The default
admin is never locked out, as it can never be disabled: that would lock every operator out. On a single node the
counts live in memory, as in the reference: a restart starts them again (the lockout itself, a disable, is stored);
the nodes of a cluster share them (``controller/authentication/shared_throttles.py``).

This module is plain data and rules; ``controller/authentication/password_login.py`` applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FailedLogins", "lockout_minutes"]


class FailedLogins:
    """Consecutive wrong passwords per authenticator id (only authenticators that exist are counted, so the table
    is bounded by the authenticators stored)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def failed(self, authenticator_id: str) -> int:
        """Count one more wrong password; returns the consecutive count, this one included."""
        count = self._counts.get(authenticator_id, 0) + 1
        self._counts[authenticator_id] = count
        return count

    def clear(self, authenticator_id: str) -> None:
        """A successful login or a lockout: the next wrong password counts from one again."""
        self._counts.pop(authenticator_id, None)

    def count(self, authenticator_id: str) -> int:
        return self._counts.get(authenticator_id, 0)


def lockout_minutes(policy: Mapping[str, Any] | None, failures: int) -> int | None:
    """How long ``failures`` consecutive wrong passwords under ``policy`` disable the identity: None for not at all
    (within the limit, or no limit), else minutes, 0 meaning until an admin enables it."""
    updb = ((policy or {}).get("primary") or {}).get("updb") or {}
    limit = updb.get("maxAttempts") or 0
    if limit <= 0 or failures <= limit:
        return None
    return max(0, int(updb.get("lockoutDurationMinutes") or 0))
