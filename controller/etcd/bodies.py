"""Request bodies for etcd's JSON gateway from the client's values, as plain functions (no I/O).

Requests are checked against etcd's limits before they are sent (``TooManyOperations`` over 128 operations in a
txn, ``RequestTooLarge`` over 1.5 MiB of keys and values), so that a caller learns of an oversized batch at once and
for certain, not from a member halfway through a retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from controller.etcd.errors import InvalidArgument, RequestTooLarge, TooManyOperations
from controller.etcd.model import Bytes, Compare, CompareTarget, Delete, Op, Put, Range

__all__ = [
    "MAX_REQUEST_BYTES", "MAX_TXN_OPS", "as_bytes", "compare_body", "delete_body", "encode", "prefix_end", "put_body",
    "range_body", "txn_body", "watch_create_body",
]

MAX_TXN_OPS = 128
"""etcd's default ``--max-txn-ops``."""
MAX_REQUEST_BYTES = 1536 * 1024
"""etcd's default ``--max-request-bytes``: the size of the request as etcd stores it in its log."""
_OVERHEAD_PER_PART = 24  # protobuf tags, lengths and integers of one operation or compare, generously
_OVERHEAD_PER_REQUEST = 64

_COMPARE_FIELDS = {CompareTarget.MOD: "mod_revision", CompareTarget.CREATE: "create_revision",
                   CompareTarget.VERSION: "version", CompareTarget.LEASE: "lease", CompareTarget.VALUE: "value"}


def as_bytes(value: Bytes) -> bytes:
    """A key or value as bytes (text is UTF-8)."""
    return value.encode() if isinstance(value, str) else value


def prefix_end(prefix: bytes) -> bytes:
    """The end (exclusive) of the range of every key that starts with ``prefix``: the prefix with its last byte
    below 0xff incremented and what follows dropped; ``b"\\0"`` (to the end of the keyspace) if there is none."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _key_range(key: Bytes, range_end: Bytes | None, prefix: bool) -> dict[str, Any]:
    raw = as_bytes(key)
    if not raw:
        raise InvalidArgument("a key must not be empty")
    if prefix and range_end is not None:
        raise InvalidArgument("give range_end or prefix, not both")
    body: dict[str, Any] = {"key": raw}
    if prefix:
        body["range_end"] = prefix_end(raw)
    elif range_end is not None:
        body["range_end"] = as_bytes(range_end)
    return body


def range_body(request: Range) -> dict[str, Any]:
    """The body of ``/v3/kv/range`` (and of a txn's ``request_range``)."""
    body = _key_range(request.key, request.range_end, request.prefix)
    for name in ("revision", "limit", "serializable", "keys_only", "count_only"):
        value = getattr(request, name)
        if value:
            body[name] = value
    if request.revision < 0 or request.limit < 0:
        raise InvalidArgument("revision and limit must not be negative")
    return body


def put_body(request: Put) -> dict[str, Any]:
    """The body of ``/v3/kv/put`` (and of a txn's ``request_put``)."""
    body: dict[str, Any] = {"key": as_bytes(request.key), "value": as_bytes(request.value)}
    if not body["key"]:
        raise InvalidArgument("a key must not be empty")
    if request.lease:
        body["lease"] = request.lease
    if request.prev_kv:
        body["prev_kv"] = True
    return body


def delete_body(request: Delete) -> dict[str, Any]:
    """The body of ``/v3/kv/deleterange`` (and of a txn's ``request_delete_range``)."""
    body = _key_range(request.key, request.range_end, request.prefix)
    if request.prev_kv:
        body["prev_kv"] = True
    return body


def compare_body(compare: Compare) -> dict[str, Any]:
    """One compare of a txn: the target's field carries the operand (bytes for VALUE, an int otherwise)."""
    body: dict[str, Any] = {"key": as_bytes(compare.key), "target": compare.target.value,
                            "result": compare.op.value}
    if not body["key"]:
        raise InvalidArgument("a key must not be empty")
    if compare.target is CompareTarget.VALUE:
        if isinstance(compare.operand, int):
            raise InvalidArgument("a VALUE compare takes bytes or text")
        body["value"] = as_bytes(compare.operand)
    else:
        if not isinstance(compare.operand, int) or isinstance(compare.operand, bool):
            raise InvalidArgument(f"a {compare.target.value} compare takes an int")
        body[_COMPARE_FIELDS[compare.target]] = compare.operand
    if compare.range_end is not None:
        body["range_end"] = as_bytes(compare.range_end)
    return body


def _op_body(op: Op) -> dict[str, Any]:
    match op:
        case Put():
            return {"request_put": put_body(op)}
        case Range():
            return {"request_range": range_body(op)}
        case Delete():
            return {"request_delete_range": delete_body(op)}
    raise InvalidArgument(f"not a txn operation: {op!r}")


def txn_body(compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op], *,
             max_ops: int = MAX_TXN_OPS) -> dict[str, Any]:
    """The body of ``/v3/kv/txn``; TooManyOperations when either branch has more than ``max_ops`` operations."""
    for name, ops in (("success", success), ("failure", failure)):
        if len(ops) > max_ops:
            raise TooManyOperations(f"a txn takes at most {max_ops} operations; its {name} branch has {len(ops)}")
    body: dict[str, Any] = {}
    if compare:
        body["compare"] = [compare_body(c) for c in compare]
    if success:
        body["success"] = [_op_body(op) for op in success]
    if failure:
        body["failure"] = [_op_body(op) for op in failure]
    return body


def watch_create_body(request: Range, *, start_revision: int, prev_kv: bool, progress_notify: bool) -> dict[str, Any]:
    """The body of ``/v3/watch``: watch ``request``'s key or range from ``start_revision`` (0: from now on)."""
    create = _key_range(request.key, request.range_end, request.prefix)
    if start_revision:
        create["start_revision"] = start_revision
    if prev_kv:
        create["prev_kv"] = True
    if progress_notify:
        create["progress_notify"] = True
    return {"create_request": create}


def _payload_size(value: Any) -> int:
    """The bytes of keys and values in a body, plus a generous allowance for protobuf's framing."""
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, dict):
        return _OVERHEAD_PER_PART + sum(_payload_size(v) for v in value.values())
    if isinstance(value, list):
        return sum(_payload_size(v) for v in value)
    return 0


def encode(body: dict[str, Any], *, max_bytes: int = MAX_REQUEST_BYTES) -> bytes:
    """The JSON of a request body (bytes as base64); RequestTooLarge when etcd would refuse its size."""
    size = _OVERHEAD_PER_REQUEST + _payload_size(body)
    if size > max_bytes:
        raise RequestTooLarge(f"the request holds about {size} bytes; etcd takes at most {max_bytes} in one")
    return msgspec.json.encode(body)
