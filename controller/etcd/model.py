"""The values the etcd client takes and gives: requests a txn is made of, and the answers of every call.

Answers are frozen msgspec structs decoded straight from etcd's JSON gateway: keys and values arrive as base64 and
come out as ``bytes``, int64s arrive as strings and come out as ``int``, and every field etcd leaves out because it
holds its default value (a missing key's ``count``, a txn's ``succeeded`` when it failed, a PUT event's ``type``)
comes out as that default. Requests are frozen dataclasses; keys and values may be given as ``str`` (UTF-8) or
``bytes``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

import msgspec

__all__ = [
    "Bytes", "Compare", "CompareOp", "CompareTarget", "Delete", "DeleteResult", "Event", "EventType", "Header",
    "KeyValue", "Lease", "LeaseInfo", "Member", "MemberStatus", "Op", "OpResult", "Put", "PutResult", "Range",
    "RangeResult", "TxnResult", "WatchUpdate",
]

Bytes: TypeAlias = bytes | str
"""A key or value: bytes as they are, text as UTF-8."""


# -- answers ------------------------------------------------------------------------------------------------------

class Header(msgspec.Struct, frozen=True):
    """The store's revision when the request was applied, and who answered."""

    revision: int = 0
    member_id: int = 0
    cluster_id: int = 0
    raft_term: int = 0


class KeyValue(msgspec.Struct, frozen=True):
    """A key and its value with their history: ``create_revision`` (0 for a key that does not exist),
    ``mod_revision`` (the revision of its last change), ``version`` (changes since created) and ``lease``."""

    key: bytes = b""
    value: bytes = b""
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    lease: int = 0


class RangeResult(msgspec.Struct, frozen=True):
    """The keys a range found (none with ``count_only``), how many matched, and whether ``limit`` cut the list."""

    header: Header = msgspec.field(default_factory=Header)
    kvs: tuple[KeyValue, ...] = ()
    more: bool = False
    count: int = 0

    @property
    def first(self) -> KeyValue | None:
        """The first key found (the only one, for a range of one key), or None."""
        return self.kvs[0] if self.kvs else None


class PutResult(msgspec.Struct, frozen=True):
    """A put's revision, and the key's value before it when ``prev_kv`` was asked (None if it did not exist)."""

    header: Header = msgspec.field(default_factory=Header)
    prev_kv: KeyValue | None = None


class DeleteResult(msgspec.Struct, frozen=True):
    """How many keys a delete removed, and their values before it when ``prev_kv`` was asked."""

    header: Header = msgspec.field(default_factory=Header)
    deleted: int = 0
    prev_kvs: tuple[KeyValue, ...] = ()


OpResult: TypeAlias = RangeResult | PutResult | DeleteResult


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Whether every compare held, and the answers of the branch that ran, one per operation and in order."""

    header: Header
    succeeded: bool
    responses: tuple[OpResult, ...]


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


class Event(msgspec.Struct, frozen=True):
    """One change seen by a watch. A DELETE event's ``kv`` holds the key and the revision of the deletion;
    ``prev_kv`` is set when the watch asked for it and the previous value was not compacted away."""

    type: EventType = EventType.PUT
    kv: KeyValue = msgspec.field(default_factory=KeyValue)
    prev_kv: KeyValue | None = None


@dataclass(frozen=True, slots=True)
class WatchUpdate:
    """What a watch delivers: new events in revision order (none for a progress notification), and ``revision``,
    below or at which every event of the watched range has now been delivered."""

    revision: int
    events: tuple[Event, ...]

    @property
    def is_progress(self) -> bool:
        return not self.events


class Lease(msgspec.Struct, frozen=True):
    """A granted lease: its id and the TTL etcd chose (it may raise a TTL under its minimum)."""

    id: int = msgspec.field(default=0, name="ID")
    ttl: int = msgspec.field(default=0, name="TTL")


class LeaseInfo(msgspec.Struct, frozen=True):
    """A live lease: the seconds it has left, the TTL it was granted, and its keys when asked."""

    id: int = msgspec.field(default=0, name="ID")
    ttl: int = msgspec.field(default=0, name="TTL")
    granted_ttl: int = msgspec.field(default=0, name="grantedTTL")
    keys: tuple[bytes, ...] = ()


class Member(msgspec.Struct, frozen=True):
    """A member of the etcd cluster (``name`` and ``client_urls`` are empty until it has started once)."""

    id: int = msgspec.field(default=0, name="ID")
    name: str = ""
    peer_urls: tuple[str, ...] = msgspec.field(default=(), name="peerURLs")
    client_urls: tuple[str, ...] = msgspec.field(default=(), name="clientURLs")
    is_learner: bool = msgspec.field(default=False, name="isLearner")


class MemberStatus(msgspec.Struct, frozen=True):
    """One member's own view: who it thinks leads (0: nobody), its raft progress and its database size."""

    header: Header = msgspec.field(default_factory=Header)
    version: str = ""
    leader: int = 0
    raft_index: int = msgspec.field(default=0, name="raftIndex")
    raft_term: int = msgspec.field(default=0, name="raftTerm")
    raft_applied_index: int = msgspec.field(default=0, name="raftAppliedIndex")
    db_size: int = msgspec.field(default=0, name="dbSize")
    db_size_in_use: int = msgspec.field(default=0, name="dbSizeInUse")
    errors: tuple[str, ...] = ()
    is_learner: bool = msgspec.field(default=False, name="isLearner")


# -- requests ------------------------------------------------------------------------------------------------------

class CompareTarget(enum.Enum):
    """What of a key a txn compare looks at: a revision or version (an int), its value (bytes), or its lease id."""

    MOD = "MOD"
    CREATE = "CREATE"
    VERSION = "VERSION"
    VALUE = "VALUE"
    LEASE = "LEASE"


class CompareOp(enum.Enum):
    EQUAL = "EQUAL"
    NOT_EQUAL = "NOT_EQUAL"
    GREATER = "GREATER"
    LESS = "LESS"


@dataclass(frozen=True, slots=True)
class Compare:
    """One condition of a txn: ``target`` of ``key`` (of every key up to ``range_end``, if given) ``op`` ``operand``.

    A key that does not exist has create, mod revision and version 0: ``Compare(k, CREATE, EQUAL, 0)`` is
    "k is absent", the guard of a create-if-absent."""

    key: Bytes
    target: CompareTarget
    op: CompareOp
    operand: int | Bytes
    range_end: Bytes | None = None

    @classmethod
    def absent(cls, key: Bytes) -> Compare:
        """The key does not exist."""
        return cls(key, CompareTarget.CREATE, CompareOp.EQUAL, 0)

    @classmethod
    def unchanged(cls, key: Bytes, mod_revision: int) -> Compare:
        """The key was last changed at ``mod_revision`` (0: it does not exist)."""
        return cls(key, CompareTarget.MOD, CompareOp.EQUAL, mod_revision)


@dataclass(frozen=True, slots=True)
class Put:
    """Set ``key`` to ``value``, attached to ``lease`` (0: none)."""

    key: Bytes
    value: Bytes
    lease: int = 0
    prev_kv: bool = False


@dataclass(frozen=True, slots=True)
class Range:
    """Read ``key``, or the keys from ``key`` up to ``range_end`` (exclusive), or every key under the prefix ``key``."""

    key: Bytes
    range_end: Bytes | None = None
    prefix: bool = False
    revision: int = 0
    limit: int = 0
    serializable: bool = False
    keys_only: bool = False
    count_only: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete ``key``, or the keys up to ``range_end``, or every key under the prefix ``key``."""

    key: Bytes
    range_end: Bytes | None = None
    prefix: bool = False
    prev_kv: bool = False


Op: TypeAlias = Put | Range | Delete
