"""What a hook or a query sees: a transaction, the registry and the current time.

A :class:`ReadContext` wraps a read snapshot; a :class:`WriteContext` wraps the writer's transaction and collects
the :class:`Change` s that the write produced, which the async shell publishes after the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from storage.store import ReadTxn, WriteTxn

if TYPE_CHECKING:
    from controller.model.registry import Registry

__all__ = ["Change", "EnrollmentSecrets", "Environment", "ReadContext", "WriteContext"]

T = TypeVar("T")


class EnrollmentSecrets(Protocol):
    """An enrollment's token and JWT, which only the running controller's keys can make
    (``controller/authentication/enrollment_jwt.py``)."""

    def new_token(self) -> dict[str, str]:
        """The row fields that stand for a fresh token (the store never holds the token itself)."""

    def token(self, row: Mapping[str, Any]) -> str:
        """The token of a stored enrollment row."""

    def digest(self, token: str) -> str:
        """What a row keeps to find the enrollment of ``token``."""

    def enrollment(self, row: Mapping[str, Any]) -> str:
        """The JWT a client enrols with, for a stored enrollment row."""


@dataclass(frozen=True, slots=True)
class Environment:
    """What hooks may need from the running controller beyond the store.

    Attributes:
        network_ca_pem: the controller's own CA certificate, the issuer of every certificate it signs.
        enrollments: enrollment tokens and JWTs.
    """

    network_ca_pem: bytes
    enrollments: EnrollmentSecrets


@dataclass(frozen=True, slots=True)
class Change:
    """One row written: ``before`` is None for a create, ``after`` is None for a delete."""

    kind: str
    id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(slots=True)
class ReadContext:
    """A consistent snapshot plus the registry and ``now`` (wall-clock epoch seconds).

    ``memo`` holds what :meth:`cached` derived from this snapshot (policy links, decoded policy rows): one request
    or one actor step asks the same questions for many services, and a snapshot never changes under it.
    ``shared`` is the store's memo of answers derived from the access kinds alone (``Resource.shapes_access``),
    kept across snapshots until one of those kinds is written (``storage.store.SharedMemo``); None when this
    snapshot is older than that write. ``env`` is what the running controller lends hooks beyond the store (None
    for a store used without a controller, as some benchmarks do).
    """

    txn: ReadTxn
    registry: Registry
    now: float
    memo: dict[Hashable, Any] = field(default_factory=dict)
    shared: dict[Hashable, Any] | None = None
    env: Environment | None = None

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per snapshot for ``key``. Callers must not mutate the value."""
        try:
            value: T = self.memo[key]
        except KeyError:
            value = self.memo[key] = compute()
        return value

    def shared_cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Like :meth:`cached`, but remembered across snapshots: only for answers that depend on nothing but rows
        of the access kinds and ``key`` itself (a stale answer would outlive the snapshot that computed it)."""
        shared = self.shared
        if shared is None:
            return self.cached(key, compute)
        try:
            value: T = shared[key]
        except KeyError:
            value = shared[key] = compute()
        return value


@dataclass(slots=True)
class WriteContext(ReadContext):
    """A write transaction; every row written through the single write path is recorded in ``changes``."""

    txn: WriteTxn
    changes: list[Change] = field(default_factory=list)

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Always ``compute()``: this transaction's own writes would make a remembered answer stale."""
        return compute()

    def shared_cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Always ``compute()``, as :meth:`cached`."""
        return compute()
