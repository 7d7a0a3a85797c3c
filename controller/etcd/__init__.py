"""A Trio client of etcd 3.4 over its JSON gateway: the store a cluster of controllers shares.

Owns: talking to etcd. Key-value reads and writes, txns with compares, leases and their keepalive, compaction,
membership and status, and watches that survive the loss of the member they are on; the mapping of etcd's answers
and failures to typed values and exceptions (``Unavailable``, ``OutcomeUnknown``, ``Compacted``, ...); etcd's
request limits. It knows nothing of Tollgate's resources, store or actors: cluster mode builds on it.

Layout: ``model`` (the values), ``errors`` (the exceptions), ``bodies`` and ``answers`` (the JSON gateway both
ways, plain functions), ``transport`` (members, deadlines, retries), ``routing`` (which member leads: where writes
and linearizable reads go), ``connection`` (keep-alive HTTP/1.1 connections for unary calls, and their pool),
``stream`` (a watch's HTTP stream, line by line), ``client``, ``watch`` and ``lease`` (the async shell).

May import: the standard library, trio, h11 and msgspec. Nothing else of the project (an import-linter
contract holds it to that).
"""

from controller.etcd.bodies import MAX_REQUEST_BYTES, MAX_TXN_OPS, prefix_end
from controller.etcd.client import EtcdClient
from controller.etcd.connection import CallBroken, ConnectFailed, ConnectionPool, connect, split_url
from controller.etcd.errors import (
    Compacted,
    EtcdError,
    FutureRevision,
    InvalidArgument,
    LeaseExpired,
    LeaseNotFound,
    NoSpace,
    OutcomeUnknown,
    PermissionDenied,
    ProtocolError,
    RequestTooLarge,
    TooManyOperations,
    Unauthenticated,
    Unavailable,
    WatchCanceled,
)
from controller.etcd.lease import LeaseKeeper
from controller.etcd.model import (
    Bytes,
    Compare,
    CompareOp,
    CompareTarget,
    Delete,
    DeleteResult,
    Event,
    EventType,
    Header,
    KeyValue,
    Lease,
    LeaseInfo,
    Member,
    MemberStatus,
    Op,
    OpResult,
    Put,
    PutResult,
    Range,
    RangeResult,
    TxnResult,
    WatchUpdate,
)
from controller.etcd.transport import TlsFiles
from controller.etcd.watch import Watch

__all__ = [
    "MAX_REQUEST_BYTES", "MAX_TXN_OPS", "Bytes", "CallBroken", "Compacted", "Compare", "CompareOp", "CompareTarget",
    "ConnectFailed", "ConnectionPool", "Delete", "DeleteResult", "EtcdClient", "EtcdError", "Event", "EventType",
    "FutureRevision", "Header", "InvalidArgument", "KeyValue", "Lease", "LeaseExpired", "LeaseInfo", "LeaseKeeper",
    "LeaseNotFound", "Member", "MemberStatus", "NoSpace", "Op", "OpResult", "OutcomeUnknown", "PermissionDenied",
    "ProtocolError", "Put", "PutResult", "Range", "RangeResult", "RequestTooLarge", "TlsFiles", "TooManyOperations",
    "TxnResult", "Unauthenticated", "Unavailable", "Watch", "WatchCanceled", "WatchUpdate", "connect", "prefix_end",
    "split_url",
]
