"""What a hook or a query sees: a transaction, the registry and the current time.

A :class:`ReadContext` wraps a read snapshot; a :class:`WriteContext` wraps the writer's transaction and collects
the :class:`Change` s that the write produced, which the async shell publishes after the commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from storage.store import ReadTxn, WriteTxn

if TYPE_CHECKING:
    from controller.registry import Registry

__all__ = ["Change", "ReadContext", "WriteContext"]


@dataclass(frozen=True, slots=True)
class Change:
    """One row written: ``before`` is None for a create, ``after`` is None for a delete."""

    kind: str
    id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(slots=True)
class ReadContext:
    """A consistent snapshot plus the registry and ``now`` (wall-clock epoch seconds)."""

    txn: ReadTxn
    registry: Registry
    now: float


@dataclass(slots=True)
class WriteContext(ReadContext):
    """A write transaction; every row written through the single write path is recorded in ``changes``."""

    txn: WriteTxn
    changes: list[Change] = field(default_factory=list)
