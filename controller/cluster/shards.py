"""Which node hosts which identity's actor, as plain functions: identities fall into virtual shards by a hash of
their id, and each shard's owner among the live nodes is the one with the highest rendezvous score for it.

Rendezvous hashing moves only the shards of a node that leaves (to the survivors, spread evenly) or that a node
joining wins; every node computes the same answer from the same set of live names. Who actually hosts a shard is
what its ownership key in etcd says (``controller/cluster/ownership.py``): this is only who should.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["SHARDS", "desired_owner", "shard_of"]

SHARDS = 64
"""Virtual shards: enough to spread identities evenly over a few nodes, few enough to claim in a moment."""


def _score(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def shard_of(identity_id: str) -> int:
    """The virtual shard of an identity (stable across nodes and restarts)."""
    return _score(identity_id.encode()) % SHARDS


def desired_owner(shard: int, live: Iterable[str]) -> str | None:
    """The live node that should host ``shard`` (None when no node is live)."""
    best: tuple[int, str] | None = None
    for name in live:
        candidate = (_score(f"{shard}/{name}".encode()), name)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else best[1]
