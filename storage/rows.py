"""How values are stored in LMDB: msgpack, with rows decoded straight into dicts (``storage/store.py`` and
``storage/indexes.py`` both read rows)."""

from __future__ import annotations

import functools
import keyword
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["MAX_INT", "MIN_INT", "UnencodableValue", "decode", "decode_row", "encode", "projection"]

#: The integers msgpack can hold: a signed 64-bit value's low end, an unsigned one's high end.
MIN_INT = -(2**63)
MAX_INT = 2**64 - 1

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()
# Rows are maps: decoding straight into a dict spares the copy a later dict() would make (rows are read a lot).
_row_decoder = msgspec.msgpack.Decoder(dict[str, Any])


class UnencodableValue(ValueError):
    """A value holds an integer outside :data:`MIN_INT` .. :data:`MAX_INT`, which msgpack cannot store.

    Attributes:
        path: where the integer is in the value: map keys joined by dots, list positions in brackets
            (``appData.x.y``, ``tags.deep[1].n``; ``[2]`` in a list, empty for the value itself).
        value: the integer.
    """

    def __init__(self, path: str, value: int) -> None:
        super().__init__(f"integer {value} at {path or 'the top'} is outside {MIN_INT}..{MAX_INT}")
        self.path = path
        self.value = value


def encode(value: Any) -> bytes:
    """The msgpack bytes of ``value`` (maps, lists, strings, numbers, booleans, None).

    Raises:
        UnencodableValue: ``value`` holds an integer msgpack cannot hold, at any depth.
    """
    try:
        return _encoder.encode(value)
    except OverflowError:
        found = _out_of_range(value)
        if found is None:  # not in a map or list this walks (a struct's field): the encoder's own error
            raise
        raise UnencodableValue(*found) from None


def _out_of_range(value: Any) -> tuple[str, int] | None:
    """The path and value of the first integer (depth first, in order) in the maps and lists of ``value`` that
    msgpack cannot hold, or None. A loop over an explicit stack, not recursion: the value can be as deep as a
    client's JSON."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, int) and not isinstance(item, bool) and not MIN_INT <= item <= MAX_INT:
            return path, item
        if isinstance(item, dict):
            pending.extend((f"{path}.{key}" if path else str(key), child) for key, child in reversed(item.items()))
        elif isinstance(item, list | tuple):
            pending.extend((f"{path}[{index}]", child) for index, child in reversed(list(enumerate(item))))
    return None


def decode(data: bytes | memoryview) -> Any:
    return _decoder.decode(data)


def decode_row(data: bytes | memoryview) -> dict[str, Any]:
    """A stored row: a new dict the caller may change."""
    return _row_decoder.decode(data)


@functools.lru_cache(maxsize=256)
def projection(fields: frozenset[str] | None) -> Callable[[bytes | memoryview], dict[str, Any]]:
    """A decoder of stored rows that keeps only ``fields``: a new dict holding each of them, ``None`` where the row
    has no such field (``row.get`` reads the same either way). ``None`` means every field: :func:`decode_row`.

    msgspec skips the other fields without building them: for a list filter that reads two or three fields of an
    identity this is 4-5 times cheaper per row than :func:`decode_row`. A field name that cannot be a struct
    attribute (never the case for wire names) gets :func:`decode_row` itself.
    """
    if fields is None or not all(name.isidentifier() and not keyword.iskeyword(name) and name[0] != "_"
                                 for name in fields):
        return decode_row
    struct = msgspec.defstruct("Projection", [(name, Any, None) for name in sorted(fields)], gc=False)
    decoder = msgspec.msgpack.Decoder(struct)
    as_dict = msgspec.structs.asdict

    def decode_projection(data: bytes | memoryview) -> dict[str, Any]:
        return as_dict(decoder.decode(data))

    return decode_projection
