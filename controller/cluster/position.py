"""What a cluster node's replica holds, as plain data (no I/O, no Trio): kept by the commit step, asked by the read
barrier and by forwarding.

Every write to ``d/`` moves exactly one head (``controller/cluster/keys.py``): the network's head for the serial
writes, or the lane head of the node that made an owner-fenced write. Each head's writes form a chain in revision
order. So a replica holds every write up to revision R once, for every head as it stood at R, it holds that head's
latest write with the chain below it. A head's chain is held up to:

- ``applied``, for every head: the watch brings etcd's changes in revision order, and the replica has applied them
  all up to there;
- ``head``, for the network's head: its writes are serial, and a node commits one only on top of the one before;
- ``lane``, for this node's own lane, from ``lane_base`` up: its own lane writes go to the replica as they are made;
  the chain at and below ``lane_base`` (its writes before this process, or not committed to the replica) counts
  only once ``applied`` is there. ``lane_base`` is None while no write of this process started the chain anew.

The lanes' retirement mark (``controller/cluster/lane_retirement.py``) is a head whose chain is every write below it:
held once ``applied`` is there, as any head this node writes no chain of.

Own lane writes committed above ``applied`` are listed in ``own``, so that the watch, bringing them back, leaves
them alone (a later own write of the same row is already there). A write of the network's chain at or below
``head`` is left alone for the same reason. And every key an own write above ``applied`` wrote is in ``own_keys``
with that write's revision: a write of another chain to the same key, older than the own one, is not applied over
it when the watch brings it later (an owner's state row deleted by a repair made elsewhere, say).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

__all__ = ["ReplicaPosition"]


@dataclass(slots=True)
class ReplicaPosition:
    """The position of a replica of the network whose head is the key ``main``, on the node whose lane head is the
    key ``lane_key``."""

    main: bytes
    lane_key: bytes
    applied: int = 0
    head: int = 0
    lane: int = 0
    lane_base: int | None = None
    lane_expected: int = 0
    """The mod revision this node's next lane write compares its lane head with (0: the key is absent, or unknown
    yet: a wrong guess only costs one refused txn that names the right one)."""
    own: set[int] = field(default_factory=set)
    own_keys: dict[bytes, int] = field(default_factory=dict)

    def copy(self) -> ReplicaPosition:
        """An independent copy (to compute a position before the transaction recording it commits)."""
        return replace(self, own=set(self.own), own_keys=dict(self.own_keys))

    def holds_head(self, key: bytes, mod: int) -> bool:
        """Whether the replica holds the chain of head ``key`` up to its write at ``mod``."""
        if mod <= self.applied:
            return True
        if key == self.main:
            return mod <= self.head
        if key == self.lane_key:
            return self.lane_base is not None and self.lane_base <= self.applied and mod <= self.lane
        return False

    def holds(self, heads: Mapping[bytes, int]) -> bool:
        """Whether the replica holds every write up to the revision at which the heads stood at ``heads``."""
        return all(self.holds_head(key, mod) for key, mod in heads.items())

    @property
    def forwarded(self) -> int:
        """A revision up to which another replica must have applied every write to hold all this one holds but this
        node's own lane: the state of identities this node hosts, which no other node reads while it hosts them (a
        node taking one over first reads every lane's head)."""
        return max(self.applied, self.head)

    def skips(self, revision: int, moves_main: bool) -> bool:
        """Whether the watch's write at ``revision`` (``moves_main``: a write of the network's chain) is already in
        the replica, put there by this node's commit."""
        return revision <= self.applied or revision in self.own or (moves_main and revision <= self.head)

    def shadows(self, key: bytes, revision: int) -> bool:
        """Whether an own write of ``key`` newer than ``revision`` is in the replica (the older one is not taken)."""
        return self.own_keys.get(key, 0) >= revision

    def lane_shipped(self, revision: int) -> None:
        """A txn of this node's lane committed in etcd at ``revision``."""
        self.lane_expected = revision

    def lane_moved(self, mod: int) -> None:
        """This node's lane head was found at ``mod``, not where expected (written before this process, or by a
        write whose answer was lost): its chain up to there counts once applied."""
        self.lane_expected = mod
        self.lane_base = None

    def lane_skipped(self) -> None:
        """A txn of this node's lane committed in etcd and not to the replica (its batch broke off, or its answer was
        lost): the replica gets it from the watch, and the own chain counts only once applied past it."""
        self.lane_base = None

    def committed(self, *, lane: bool, compared: int, revisions: Sequence[int], heads: Mapping[bytes, int],
                  written: Sequence[Sequence[bytes]]) -> None:
        """An own batch is in the replica: its txns committed at ``revisions`` (in order, at least one), having
        written the keys ``written`` (the same order), the first compared its head with ``compared``, and the last
        left the heads at ``heads``."""
        last = revisions[-1]
        if lane:
            if self.lane_base is None:
                self.lane_base = compared
            self.lane = max(self.lane, last)
            self.lane_expected = last
        else:
            self.head = max(self.head, last)
        if self.holds(heads):
            self.advanced(last)
            return
        if lane:
            self.own.update(revisions)
        for revision, keys in zip(revisions, written, strict=True):
            self.own_keys.update(dict.fromkeys(keys, revision))

    def advanced(self, applied: int, head: int | None = None) -> None:
        """The replica holds every write up to ``applied`` (and the network's chain up to ``head``)."""
        self.applied = max(self.applied, applied)
        if head is not None:
            self.head = max(self.head, head)
        if self.own:
            self.own = {revision for revision in self.own if revision > self.applied}
        if self.own_keys:
            self.own_keys = {key: revision for key, revision in self.own_keys.items() if revision > self.applied}

    def rebuilt(self, revision: int, head: int) -> None:
        """The replica was replaced by one read at ``revision`` (the network's head at ``head``): own writes above
        it are in it only once the watch brings them."""
        self.applied, self.head = revision, head
        self.own.clear()
        self.own_keys.clear()
        self.lane_base = None
