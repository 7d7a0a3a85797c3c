"""What a store is told about each kind it keeps: its layout (which fields are indexed, and how).

The layouts are data the controller derives from its resource specs; the store, its index DBs
(``storage/indexes.py``) and its key checks (``storage/keys.py``) read them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KindLayout"]


@dataclass(frozen=True, slots=True)
class KindLayout:
    """Storage layout of one kind: which fields are indexed and how.

    ``composites``: field combinations looked up together (:meth:`ReadTxn.ids_by_fields`).
    ``watched``: answers derived from this kind may be shared across snapshots (:class:`SharedMemo`); any write
    to it starts a new memo.
    """

    kind: str
    unique: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    composites: tuple[tuple[str, ...], ...] = ()
    watched: bool = False
