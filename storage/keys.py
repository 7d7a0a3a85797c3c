"""What LMDB can store as a key: the encoding of row ids and indexed values, and the check that refuses a row whose
id or indexed values it could not hold (``storage/store.py`` calls it before any write)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from storage.layout import KindLayout

__all__ = ["MAX_KEY_BYTES", "UnstorableValue", "check_row_keys", "composite_key", "is_storable", "to_key"]

# LMDB refuses empty keys and keys (or dupsort values) longer than its compiled-in limit with MDB_BAD_VALSIZE.
MAX_KEY_BYTES = 511


class UnstorableValue(ValueError):
    """A put would index a value LMDB cannot hold as a key: empty, or over :data:`MAX_KEY_BYTES` encoded."""

    def __init__(self, kind: str, field: str, value: Any) -> None:
        super().__init__(f"value {value!r} of {kind}.{field} cannot be indexed")
        self.kind = kind
        self.field = field
        self.value = value
        self.empty = str(value) == ""


def to_key(value: Any) -> bytes:
    """The bytes a value is stored under: its text, UTF-8 encoded."""
    return str(value).encode()


def composite_key(values: Sequence[Any]) -> bytes:
    """The key of several values together (a composite index): each value's key behind its length (two bytes), so
    no two different tuples share a key, whatever bytes the values hold."""
    parts = [to_key(value) for value in values]
    return b"".join(len(part).to_bytes(2, "big") + part for part in parts)


def is_storable(key: bytes) -> bool:
    """Whether LMDB can hold ``key`` as a key (or dupsort value): not empty, at most :data:`MAX_KEY_BYTES`."""
    return 0 < len(key) <= MAX_KEY_BYTES


def check_row_keys(layout: KindLayout, row: Mapping[str, Any]) -> None:
    """Refuse a row whose id or indexed values LMDB cannot store, before anything is written."""
    if not is_storable(to_key(row["id"])):
        raise UnstorableValue(layout.kind, "id", row["id"])
    for field in (*layout.unique, *layout.refs):
        value = row.get(field)
        if value is not None and not is_storable(to_key(value)):
            raise UnstorableValue(layout.kind, field, value)
    for field in layout.sets:
        for element in row.get(field) or ():
            if not is_storable(to_key(element)):
                raise UnstorableValue(layout.kind, field, element)
    for fields in layout.composites:
        values = tuple(row.get(field) for field in fields)
        if None not in values and not is_storable(composite_key(values)):
            raise UnstorableValue(layout.kind, "+".join(fields), values)
