"""How values are stored in LMDB: msgpack, with rows decoded straight into dicts (``storage/store.py`` and
``storage/indexes.py`` both read rows)."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["decode", "decode_row", "encode"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()
# Rows are maps: decoding straight into a dict spares the copy a later dict() would make (rows are read a lot).
_row_decoder = msgspec.msgpack.Decoder(dict[str, Any])


def encode(value: Any) -> bytes:
    return _encoder.encode(value)


def decode(data: bytes | memoryview) -> Any:
    return _decoder.decode(data)


def decode_row(data: bytes | memoryview) -> dict[str, Any]:
    """A stored row: a new dict the caller may change."""
    return _row_decoder.decode(data)
