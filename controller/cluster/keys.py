"""Where a network keeps what its nodes share in etcd: every key under one prefix per network.

::

    PREFIX d/head                 the head: {w: write id, n: node}; every write to d/ other than a lane's puts it,
                                  guarded by a compare on its mod revision, so those writes form one serial chain
    PREFIX d/lane/NODE            a node's lane head, valued as the head: every write of NODE's lane (owner-fenced
                                  rows only its actors write, ``controller/cluster/commit.py``) puts it, guarded the
                                  same way; every write to d/ moves exactly one of the heads
    PREFIX d/lane/                the lanes' retirement mark, a head that orders no writes: put in the txn that
                                  deletes the lane head of a node that left (``controller/cluster/lane_retirement.py``),
                                  so that a read barrier still waits for the retired lane's writes
    PREFIX d/r/KIND/ID            a row: the bytes the LMDB store holds for it (msgpack)
    PREFIX d/m/KEY                a meta key of the store (the default admin's id, the seeded config types, ...)
    PREFIX init                   who initialises the network, held with that node's lease; {state: done} once done
    PREFIX pki                    the network's CA key and certificate, the shared server key, the enrolment-token key
    PREFIX members/live/NAME      a node while its lease lives: name, addresses, start time, certificate
    PREFIX members/known/NAME     every node that ever joined (no lease): name and when it first joined
    PREFIX owners/NNN             the node hosting the identity actors of virtual shard NNN, held with its lease

Only ``d/`` is replicated into every node's LMDB replica; indexes and memos are rebuilt there from the rows. The
rest is read by the nodes directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

__all__ = ["DataKey", "HeadValue", "NetworkKeys"]


@dataclass(frozen=True, slots=True)
class DataKey:
    """What a key under ``d/`` names: a row (``kind`` and ``id``), a meta key (``meta``), a node's lane head
    (``lane``, the node's name), or the head (none of them)."""

    kind: str | None = None
    id: str | None = None
    meta: str | None = None
    lane: str | None = None

    @property
    def is_head(self) -> bool:
        return self.kind is None and self.meta is None and self.lane is None

    @property
    def is_marker(self) -> bool:
        """The head or a lane head: a key that orders writes, not data the replica holds."""
        return self.kind is None and self.meta is None


_HEAD = DataKey()


class HeadValue(msgspec.Struct, frozen=True, array_like=True):
    """The head's value: the id of the write that put it last, and the node that made it."""

    write_id: str
    node: str

    def encode(self) -> bytes:
        return msgspec.msgpack.encode(self)

    @classmethod
    def decode(cls, data: bytes) -> HeadValue | None:
        """The value, or None for bytes that are not one."""
        try:
            return msgspec.msgpack.decode(data, type=cls)
        except msgspec.DecodeError:
            return None


class NetworkKeys:
    """The keys of one network under ``prefix`` (which must end with ``/``)."""

    def __init__(self, prefix: str) -> None:
        if not prefix.startswith("/") or not prefix.endswith("/") or "//" in prefix:
            raise ValueError(f"an etcd prefix starts and ends with '/' and has no empty part: {prefix!r}")
        raw = prefix.encode()
        self.prefix = raw
        self.data = raw + b"d/"
        self.head = self.data + b"head"
        self.lanes = self.data + b"lane/"
        self.retired = self.lanes  # the retirement mark (no node's lane: a node's name is never empty)
        self.heads_end = self.data + b"lane0"  # every key from the head up to here is the head, a lane head or the mark
        self._rows = self.data + b"r/"
        self._meta = self.data + b"m/"
        self.init = raw + b"init"
        self.pki = raw + b"pki"
        self.members = raw + b"members/"
        self.live = self.members + b"live/"
        self.known = self.members + b"known/"
        self.owners = raw + b"owners/"

    def row(self, kind: str, row_id: str) -> bytes:
        return self._rows + f"{kind}/{row_id}".encode()

    def meta(self, key: str) -> bytes:
        return self._meta + key.encode()

    def lane(self, node: str) -> bytes:
        """The lane head of the node named ``node``."""
        return self.lanes + node.encode()

    def parse(self, key: bytes) -> DataKey | None:
        """What a key under ``d/`` names; None for anything else (a key this version does not know)."""
        if key == self.head:
            return _HEAD
        if key.startswith(self._rows):
            kind, slash, row_id = key[len(self._rows):].decode(errors="replace").partition("/")
            return DataKey(kind=kind, id=row_id) if slash and kind and row_id else None
        if key.startswith(self._meta) and len(key) > len(self._meta):
            return DataKey(meta=key[len(self._meta):].decode(errors="replace"))
        if key.startswith(self.lanes) and len(key) > len(self.lanes):
            return DataKey(lane=key[len(self.lanes):].decode(errors="replace"))
        return None

    def live_member(self, name: str) -> bytes:
        return self.live + name.encode()

    def known_member(self, name: str) -> bytes:
        return self.known + name.encode()

    def owner(self, shard: int) -> bytes:
        return self.owners + f"{shard:03d}".encode()

    def shard_of_owner_key(self, key: bytes) -> int | None:
        """The shard an ``owners/`` key names (None for any other key)."""
        if not key.startswith(self.owners):
            return None
        tail = key[len(self.owners):]
        return int(tail) if tail.isdigit() else None
