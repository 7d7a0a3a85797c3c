"""What can go wrong talking to etcd, as exception types, and how etcd's error answers map onto them.

Every error is an ``EtcdError`` carrying etcd's gRPC status code (0 when the client found the problem itself) and the
endpoint that answered, if one did. ``Unavailable`` means etcd could not serve the request and nothing was changed;
its subclass ``OutcomeUnknown`` means a write was sent and may or may not have been applied, so it may be retried
only when a compare in a txn guards it (a create-if-absent, a compare on a revision). ``Compacted`` is the one a
watcher must act on: re-read, then watch again from the revision of that read.
"""

from __future__ import annotations

__all__ = [
    "Compacted", "EtcdError", "FutureRevision", "InvalidArgument", "LeaseExpired", "LeaseNotFound", "NoSpace",
    "OutcomeUnknown", "PermissionDenied", "ProtocolError", "RequestTooLarge", "TooManyOperations", "Unauthenticated",
    "Unavailable", "WatchCanceled", "error_from_status",
]

# gRPC status codes etcd answers with (the gateway sends them as "code", or "grpc_code" inside a stream).
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
OUT_OF_RANGE = 11
UNAVAILABLE = 14
UNAUTHENTICATED = 16

# Answers given before a request was handed to raft: a write refused with one of these was not applied.
_REFUSED_BEFORE_PROPOSAL = ("etcdserver: no leader", "etcdserver: too many requests", "etcdserver: not capable")


class EtcdError(Exception):
    """An etcd request failed. ``code`` is etcd's gRPC status code (0: found by this client)."""

    def __init__(self, message: str, *, code: int = 0, endpoint: str | None = None) -> None:
        super().__init__(message if endpoint is None else f"{message} (from {endpoint})")
        self.message = message
        self.code = code
        self.endpoint = endpoint


class Unavailable(EtcdError):
    """etcd could not serve the request now (no leader, no quorum, timed out, no endpoint reachable); a write that
    raises exactly this was not applied. Safe to retry later."""


class OutcomeUnknown(Unavailable):
    """A write was sent but no answer came (timed out, connection lost, the member stopped): it may have been
    applied or not. Retry only a txn whose compares make a second application impossible."""


class InvalidArgument(EtcdError):
    """etcd (or this client, before sending) refused the request as malformed: nothing was changed."""


class RequestTooLarge(InvalidArgument):
    """The request is over etcd's size limit (``--max-request-bytes``, 1.5 MiB by default)."""


class TooManyOperations(InvalidArgument):
    """A txn has more operations than etcd allows in one (``--max-txn-ops``, 128 by default)."""


class Compacted(EtcdError):
    """The revision asked for is older than the compacted history. ``compact_revision`` is the oldest revision
    still kept, when etcd says so (a watch does; a range does not, and it is None there)."""

    def __init__(self, message: str, *, compact_revision: int | None = None, code: int = OUT_OF_RANGE,
                 endpoint: str | None = None) -> None:
        super().__init__(message, code=code, endpoint=endpoint)
        self.compact_revision = compact_revision


class FutureRevision(EtcdError):
    """The revision asked for is newer than the store's current revision."""


class LeaseNotFound(EtcdError):
    """The lease does not exist: it expired, was revoked, or never was."""


class LeaseExpired(EtcdError):
    """This process can no longer be sure its lease is alive: no keepalive succeeded for a whole TTL."""


class PermissionDenied(EtcdError):
    """The authenticated user may not do this."""


class Unauthenticated(EtcdError):
    """The request carried no valid credentials."""


class NoSpace(EtcdError):
    """etcd's backend is over its quota: it refuses writes until compacted and defragmented."""


class WatchCanceled(EtcdError):
    """etcd canceled a watch for a reason other than compaction."""


class ProtocolError(EtcdError):
    """etcd answered something this client cannot read."""


def error_from_status(code: int, message: str, *, write: bool = False, endpoint: str | None = None) -> EtcdError:
    """The exception for an error answer with gRPC status ``code`` and ``message``.

    ``write`` says whether the request could have changed the store: an unavailability after a write reached raft
    is ``OutcomeUnknown``; one refused before (no leader, too many requests) is plain ``Unavailable``."""
    if "required revision has been compacted" in message:
        return Compacted(message, code=code, endpoint=endpoint)
    if "required revision is a future revision" in message:
        return FutureRevision(message, code=code, endpoint=endpoint)
    if "request is too large" in message or "received message larger than max" in message:
        return RequestTooLarge(message, code=code, endpoint=endpoint)
    if "too many operations in txn request" in message:
        return TooManyOperations(message, code=code, endpoint=endpoint)
    if "database space exceeded" in message:
        return NoSpace(message, code=code, endpoint=endpoint)
    if code == NOT_FOUND and "lease not found" in message:
        return LeaseNotFound(message, code=code, endpoint=endpoint)
    if code in (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, RESOURCE_EXHAUSTED, UNKNOWN):
        if write and message not in _REFUSED_BEFORE_PROPOSAL:
            return OutcomeUnknown(message, code=code, endpoint=endpoint)
        return Unavailable(message, code=code, endpoint=endpoint)
    if code in (INVALID_ARGUMENT, FAILED_PRECONDITION):
        return InvalidArgument(message, code=code, endpoint=endpoint)
    if code == PERMISSION_DENIED:
        return PermissionDenied(message, code=code, endpoint=endpoint)
    if code == UNAUTHENTICATED:
        return Unauthenticated(message, code=code, endpoint=endpoint)
    return EtcdError(message, code=code, endpoint=endpoint)
