"""The client's values from etcd's JSON gateway answers, as plain functions (no I/O): the answer decoded with every
field etcd left out at its default filled in, or the exception the answer stands for.

The gateway leaves out every field at its default value (a missing key has no ``kvs`` and no ``count``, a failed
txn no ``succeeded``, a PUT event no ``type``, a keepalive on a dead lease no ``TTL``), sends int64s as strings and
bytes as base64; errors come as ``{error, message, code}`` or, inside a stream, as ``{"error": {grpc_code,
message}}``.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from controller.etcd.errors import (
    UNAVAILABLE,
    Compacted,
    EtcdError,
    LeaseNotFound,
    ProtocolError,
    WatchCanceled,
    error_from_status,
)
from controller.etcd.model import (
    DeleteResult,
    Event,
    Header,
    Lease,
    LeaseInfo,
    Member,
    MemberStatus,
    OpResult,
    PutResult,
    RangeResult,
    TxnResult,
)

__all__ = [
    "WatchMessage", "decode", "decode_error", "decode_header", "decode_keepalive", "decode_lease_grant",
    "decode_members", "decode_status", "decode_time_to_live", "decode_txn", "decode_watch_line",
]

T = TypeVar("T")


def decode(data: bytes, kind: type[T]) -> T:
    """An answer as ``kind``; ProtocolError if it is not one."""
    try:
        return msgspec.json.decode(data, type=kind, strict=False)
    except msgspec.DecodeError as error:
        raise ProtocolError(f"unreadable answer from etcd: {error}: {data[:200]!r}") from None


class _HeaderOnly(msgspec.Struct, frozen=True):
    header: Header = msgspec.field(default_factory=Header)


def decode_header(data: bytes) -> Header:
    """The header of an answer that holds nothing else (a compaction's)."""
    return decode(data, _HeaderOnly).header


class _ResponseOp(msgspec.Struct, frozen=True):
    response_range: RangeResult | None = None
    response_put: PutResult | None = None
    response_delete_range: DeleteResult | None = None


class _Txn(msgspec.Struct, frozen=True):
    header: Header = msgspec.field(default_factory=Header)
    succeeded: bool = False
    responses: tuple[_ResponseOp, ...] = ()


def decode_txn(data: bytes) -> TxnResult:
    """A txn's answer: a failed txn has no ``succeeded``, and each response holds one of three kinds."""
    wire = decode(data, _Txn)
    responses: list[OpResult] = []
    for op in wire.responses:
        result = op.response_range or op.response_put or op.response_delete_range
        if result is None:
            raise ProtocolError(f"a txn response without a result: {data[:200]!r}")
        responses.append(result)
    return TxnResult(header=wire.header, succeeded=wire.succeeded, responses=tuple(responses))


class _LeaseGrant(msgspec.Struct, frozen=True):
    ID: int = 0
    TTL: int = 0
    error: str = ""


def decode_lease_grant(data: bytes) -> Lease:
    wire = decode(data, _LeaseGrant)
    if wire.error:
        raise EtcdError(wire.error)
    return Lease(id=wire.ID, ttl=wire.TTL)


class _StreamError(msgspec.Struct, frozen=True):
    grpc_code: int = 0
    http_code: int = 0
    message: str = ""


class _KeepAlive(msgspec.Struct, frozen=True):
    ID: int = 0
    TTL: int = 0


class _KeepAliveLine(msgspec.Struct, frozen=True):
    result: _KeepAlive | None = None
    error: _StreamError | None = None


def decode_keepalive(data: bytes, lease_id: int) -> int:
    """The TTL a keepalive renewed the lease to; LeaseNotFound when etcd answers without one (the lease is gone)."""
    line = decode(data.split(b"\n", 1)[0], _KeepAliveLine)
    if line.error is not None:
        raise error_from_status(line.error.grpc_code, line.error.message)
    if line.result is None or line.result.TTL <= 0:
        raise LeaseNotFound(f"lease {lease_id:x} not found (expired or revoked)")
    return line.result.TTL


def decode_time_to_live(data: bytes, lease_id: int) -> LeaseInfo:
    """A lease's remaining time; LeaseNotFound when etcd answers -1 (expired or never granted)."""
    info = decode(data, LeaseInfo)
    if info.ttl < 0:
        raise LeaseNotFound(f"lease {lease_id:x} not found (expired or revoked)")
    return info


class _Members(msgspec.Struct, frozen=True):
    members: tuple[Member, ...] = ()


def decode_members(data: bytes) -> tuple[Member, ...]:
    return decode(data, _Members).members


def decode_status(data: bytes) -> MemberStatus:
    return decode(data, MemberStatus)


class _ErrorAnswer(msgspec.Struct, frozen=True):
    code: int = 0
    message: str = ""
    error: str | _StreamError = ""


def decode_error(http_status: int, data: bytes, *, write: bool, endpoint: str | None = None) -> EtcdError:
    """The exception for a non-200 answer: the gateway's ``{error, message, code}``, or a stream's
    ``{"error": {grpc_code, message}}``, or (from something else on the port) just an HTTP status."""
    try:
        answer = msgspec.json.decode(data, type=_ErrorAnswer, strict=False)
    except msgspec.DecodeError:
        answer = None
    if answer is not None and isinstance(answer.error, _StreamError):
        return error_from_status(answer.error.grpc_code, answer.error.message, write=write, endpoint=endpoint)
    if answer is not None and answer.code:
        return error_from_status(answer.code, answer.message or str(answer.error), write=write, endpoint=endpoint)
    message = f"HTTP {http_status}: {data[:200].decode(errors='replace')}"
    if http_status in (502, 503, 504):
        return error_from_status(UNAVAILABLE, message, write=write, endpoint=endpoint)
    return EtcdError(message, endpoint=endpoint)


# -- watch stream --------------------------------------------------------------------------------------------------

class WatchMessage(msgspec.Struct, frozen=True):
    """One message of a watch stream, with its defaults filled in."""

    header: Header = msgspec.field(default_factory=Header)
    watch_id: int = 0
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    cancel_reason: str = ""
    fragment: bool = False
    events: tuple[Event, ...] = ()


class _WatchLine(msgspec.Struct, frozen=True):
    result: WatchMessage | None = None
    error: _StreamError | None = None


def decode_watch_line(line: bytes, *, endpoint: str | None = None) -> WatchMessage:
    """One line of a watch stream. Raises what a line says went wrong: Compacted (with the compact revision) for a
    watch canceled because its start revision was compacted, WatchCanceled for another cancel, and the error of an
    ``{"error": ...}`` line (Unavailable when the member lost its leader)."""
    wire = decode(line, _WatchLine)
    if wire.error is not None:
        raise error_from_status(wire.error.grpc_code, wire.error.message, endpoint=endpoint)
    if wire.result is None:
        raise ProtocolError(f"a watch line without a result: {line[:200]!r}", endpoint=endpoint)
    message = wire.result
    if message.canceled:
        if message.compact_revision:
            raise Compacted(f"watch start revision compacted; the oldest kept is {message.compact_revision}",
                            compact_revision=message.compact_revision, endpoint=endpoint)
        raise WatchCanceled(f"etcd canceled the watch: {message.cancel_reason or 'no reason given'}",
                            endpoint=endpoint)
    return message

