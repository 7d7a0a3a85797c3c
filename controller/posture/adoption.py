"""What adopting identities re-arms, read from the store: each selected identity's stored MFA deadline, and the MFA
removals committed but not yet handled (``controller/posture/persistence.py``, ``PENDING_KIND``).

Read at once (:func:`read_adoption`, a single node's start, before anything is served) or a chunk of states per
read transaction with a checkpoint between (:func:`read_adoption_chunked`, a cluster node taking shards while it
serves): reading and decoding every state of a large network at once would keep its other tasks (its lease's
keepalives among them) waiting longer than a node may.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

import trio

from controller.posture.persistence import PENDING_KIND, STATE_KIND
from controller.posture.state import decode_state
from storage.read_txn import ReadTxn
from storage.store import Store

__all__ = ["SCAN_CHUNK", "Adoption", "read_adoption", "read_adoption_chunked"]

SCAN_CHUNK = 2_048
"""States read per read transaction by :func:`read_adoption_chunked`."""


@dataclass(slots=True)
class Adoption:
    """The selected identities' stored deadlines (wall-clock, by identity) and those with an MFA removal pending."""

    deadlines: list[tuple[str, float]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)


def _take(adoption: Adoption, states: list[tuple[str, bytes]], select: Callable[[str], bool]) -> None:
    for identity_id, data in states:
        if select(identity_id):
            deadline = decode_state(identity_id, data).deadline
            if deadline is not None:
                adoption.deadlines.append((identity_id, deadline))


def _pending(txn: ReadTxn, select: Callable[[str], bool]) -> list[str]:
    return [str(row["id"]) for row in txn.scan(PENDING_KIND) if select(str(row["id"]))]


def read_adoption(store: Store, select: Callable[[str], bool]) -> Adoption:
    """The adoption of the identities ``select`` accepts, in one read transaction."""
    adoption = Adoption()
    with store.read() as txn:
        _take(adoption, list(txn.scan_raw(STATE_KIND)), select)
        adoption.pending = _pending(txn, select)
    return adoption


async def read_adoption_chunked(store: Store, select: Callable[[str], bool]) -> Adoption:
    """The adoption of the identities ``select`` accepts, :data:`SCAN_CHUNK` states per read transaction.

    The chunks are not one snapshot: call it only while nobody writes the selected identities' states (a cluster
    node between claiming their shards and hosting them: their old owner is fenced out)."""
    adoption = Adoption()
    start: str | None = None
    while True:
        with store.read() as txn:
            states = list(islice(txn.scan_raw_from(STATE_KIND, start), SCAN_CHUNK + 1))
        start = states[SCAN_CHUNK][0] if len(states) > SCAN_CHUNK else None
        _take(adoption, states[:SCAN_CHUNK], select)
        await trio.lowlevel.checkpoint()
        if start is None:
            break
    with store.read() as txn:
        adoption.pending = _pending(txn, select)
    return adoption
