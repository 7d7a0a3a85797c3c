"""How fresh a read is: the seam between a request and the writes acknowledged before it, wherever they were made.

Every request waits on :meth:`Freshness.wait_fresh` before it is served. A single node is always fresh: its store is
the truth, and a write is acknowledged only once committed to it (:class:`AlwaysFresh`). A node of a cluster reads
a local replica of the shared store, which must first have applied every write acknowledged anywhere before the
request arrived (``controller/cluster/freshness.py``).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["AlwaysFresh", "Freshness"]


class Freshness(Protocol):
    """The read barrier of a node."""

    async def wait_fresh(self) -> None:
        """Return once this node's reads reflect every write acknowledged, by any node, before the call (or, when
        that cannot be learned in time, once they reflect at least this node's own acknowledged writes)."""


class AlwaysFresh:
    """A single node's barrier: its store is the truth, so it never waits."""

    async def wait_fresh(self) -> None:
        return None
