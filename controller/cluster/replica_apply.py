"""Applying etcd's changes to a node's LMDB replica, and what each applied revision tells the node, as plain
functions over a write transaction (no I/O, no Trio).

A revision (one etcd txn) is applied whole: every row it touches is first removed (indexes included), then every row it
puts is stored, so that a txn that moves a unique name from one row to another never trips over the old holder. Events
the replica already holds are dropped (a watch resumed on another member may deliver some again, and the node's own
writes come back: :meth:`~controller.cluster.position.ReplicaPosition.skips`). Each applied revision becomes an
:class:`AppliedWrite`: the rows and meta keys it wrote, the id of the write (from the head) and the
:class:`~controller.model.spec.Change` s of the rows of kinds that record them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.position import ReplicaPosition
from controller.etcd import EventType, WatchUpdate
from controller.model.spec import Change
from storage.rows import decode, decode_row
from storage.store import ReadTxn, Store, WriteTxn
from storage.write_set import RowKey, WriteSet

__all__ = ["APPLIED_META", "HEAD_META", "NETWORK_META", "Applied", "AppliedWrite", "apply_rows", "apply_updates",
           "diff_stores", "news", "rebuilt_parts", "replica_position"]

APPLIED_META = "cluster.applied"
"""Local meta: the etcd revision up to which every change of ``d/`` is in this replica."""
HEAD_META = "cluster.head"
"""Local meta: the head's mod revision as this replica holds it (the revision of the latest write it holds)."""
NETWORK_META = "cluster.network"
"""Local meta: the identity of the network the replica holds (``controller.cluster.network.Joined.identity``)."""


@dataclass(frozen=True, slots=True)
class AppliedWrite:
    """One replicated write as a node saw it: its revision, its id and node (empty for a rebuild), what it wrote
    (``rows`` by kind and id, ``meta``, as stored bytes, None for a delete), the changes of the rows of kinds that
    record them (kinds written through :meth:`~storage.store.WriteTxn.put`, not raw ones), and whether this node
    made it (``local``: its own listeners heard of its changes from the write itself)."""

    revision: int
    write_id: str
    node: str
    rows: Mapping[RowKey, bytes | None]
    meta: Mapping[str, bytes | None]
    changes: list[Change] = field(default_factory=list)
    local: bool = False


@dataclass(slots=True)
class Applied:
    """What :func:`apply_updates` did: the revision up to which the replica now holds everything, the head's
    revision, and the writes applied, in order."""

    applied: int
    head: int
    writes: list[AppliedWrite] = field(default_factory=list)


def replica_position(txn: ReadTxn, network: str) -> tuple[int, int]:
    """The applied revision and head revision a replica of ``network`` records (0, 0 when it holds nothing yet, or
    holds another network's data: it is then rebuilt)."""
    if txn.meta(NETWORK_META) != network:
        return 0, 0
    return int(txn.meta(APPLIED_META) or 0), int(txn.meta(HEAD_META) or 0)


def _as_row(data: bytes | None) -> dict[str, Any] | None:
    """The row stored bytes hold, or None (absent, or bytes a kind encodes its own way, such as posture state)."""
    if data is None:
        return None
    try:
        return decode_row(data)
    except msgspec.DecodeError:
        return None


def _change(kind: str, row_id: str, old: bytes | None, new: bytes | None) -> Change | None:
    """The change of a row from ``old`` to ``new`` bytes, if both are rows (or absent)."""
    before, after = _as_row(old), _as_row(new)
    if (old is not None and before is None) or (new is not None and after is None) or old == new:
        return None
    return Change(kind, row_id, before, after)


def _delete_stored(txn: WriteTxn, store: Store, kind: str, row_id: str) -> bytes | None:
    """Delete a row of any kind (indexes kept in step); the bytes it held, or None."""
    data = txn.get_raw(kind, row_id)
    if data is None:
        return None
    if kind in store.raw_kinds:
        txn.delete_raw(kind, row_id)
    else:
        txn.delete(kind, row_id, stored=decode_row(data))
    return data


def _put_stored(txn: WriteTxn, store: Store, kind: str, row_id: str, data: bytes) -> None:
    """Store a row given as stored bytes: a raw kind takes them as they are, another is put (indexes kept)."""
    if kind in store.raw_kinds:
        txn.put_raw(kind, row_id, data)
    else:
        txn.put(kind, decode_row(data))


def apply_rows(txn: WriteTxn, store: Store, rows: Mapping[RowKey, bytes | None],
               meta: Mapping[str, bytes | None]) -> list[Change]:
    """Make ``txn`` hold ``rows`` and ``meta`` (bytes, or None for absent), as one step: every touched row is
    removed first, then the new ones stored. Rows of kinds this store does not hold are skipped. Returns the
    changes of the rows stored as rows (not of those a kind encodes its own way)."""
    known = {kind for kind, _ in rows if store.has_kind(kind)}
    before: dict[RowKey, bytes | None] = {}
    for key in rows:
        kind, row_id = key
        if kind in known:
            before[key] = _delete_stored(txn, store, kind, row_id)
    changes: list[Change] = []
    for key, old in before.items():
        kind, row_id = key
        new = rows[key]
        if new is not None:
            _put_stored(txn, store, kind, row_id, new)
        change = _change(kind, row_id, old, new)
        if change is not None:
            changes.append(change)
    for name, data in meta.items():
        if data is None:
            txn.delete_meta(name)
        else:
            txn.set_meta(name, decode(data))
    return changes


def _revisions(update: WatchUpdate) -> Iterator[tuple[int, list[Any]]]:
    """The update's events grouped by revision (one etcd txn each), in order."""
    group: list[Any] = []
    revision = 0
    for event in update.events:
        if event.kv.mod_revision != revision and group:
            yield revision, group
            group = []
        revision = event.kv.mod_revision
        group.append(event)
    if group:
        yield revision, group


def _moves_main(keys: NetworkKeys, events: Iterable[Any]) -> bool:
    return any(event.kv.key == keys.head for event in events)


def news(keys: NetworkKeys, updates: Iterable[WatchUpdate], position: ReplicaPosition) -> bool:
    """Whether ``updates`` hold a write the replica at ``position`` does not hold yet."""
    return any(not position.skips(revision, _moves_main(keys, events))
               for update in updates for revision, events in _revisions(update))


def apply_updates(txn: WriteTxn, store: Store, keys: NetworkKeys, updates: Iterable[WatchUpdate],
                  position: ReplicaPosition) -> Applied:
    """Apply a watch's updates of ``d/`` to ``txn`` in revision order, dropping what the replica at ``position``
    holds already, and record the new position in the replica's local meta (``position`` itself is left as it
    is)."""
    result = Applied(position.applied, position.head)
    for update in updates:
        for revision, events in _revisions(update):
            moves_main = _moves_main(keys, events)
            if revision <= result.applied or position.skips(revision, moves_main):
                result.applied = max(result.applied, revision)
                continue
            written = WriteSet()
            head_value: HeadValue | None = None
            for event in events:
                if position.shadows(event.kv.key, revision):
                    continue
                parsed = keys.parse(event.kv.key)
                data = None if event.type is EventType.DELETE else event.kv.value
                if parsed is None:
                    continue
                if parsed.is_marker:
                    head_value = HeadValue.decode(data) if data is not None else None
                    if parsed.is_head:
                        result.head = max(result.head, revision)
                elif parsed.meta is not None:
                    written.meta[parsed.meta] = data
                elif parsed.kind is not None and parsed.id is not None:
                    written.rows[(parsed.kind, parsed.id)] = data
            changes = apply_rows(txn, store, written.rows, written.meta)
            result.writes.append(AppliedWrite(revision, head_value.write_id if head_value else "",
                                              head_value.node if head_value else "", written.rows, written.meta,
                                              changes))
            result.applied = revision
        result.applied = max(result.applied, update.revision)
    txn.set_meta(APPLIED_META, result.applied, local=True)  # the position may be ahead of the recorded one
    if result.head != position.head:
        txn.set_meta(HEAD_META, result.head, local=True)
    return result


def diff_stores(old: Store, new: Store) -> tuple[dict[RowKey, bytes | None], list[Change]]:
    """What differs between two stores of the same kinds, row by row: the rows ``new`` holds differently (None:
    it has none), and their changes. Reads both in their own snapshots (safe in a worker thread)."""
    rows: dict[RowKey, bytes | None] = {}
    changes: list[Change] = []
    with old.read() as before, new.read() as after:
        for kind in new.kinds():
            left = dict(before.scan_raw(kind))
            for row_id, data in after.scan_raw(kind):
                previous = left.pop(row_id, None)
                if previous != data:
                    rows[(kind, row_id)] = data
                    change = _change(kind, row_id, previous, data)
                    if change is not None:
                        changes.append(change)
            for row_id, data in left.items():
                rows[(kind, row_id)] = None
                change = _change(kind, row_id, data, None)
                if change is not None:
                    changes.append(change)
    return rows, changes


def rebuilt_parts(revision: int, rows: Mapping[RowKey, bytes | None], changes: list[Change],
                  size: int) -> list[AppliedWrite]:
    """A rebuilt replica's difference (:func:`diff_stores`) as writes of at most ``size`` rows and ``size`` changes
    each, all at ``revision`` with no write id: told to the listeners one at a time, with other tasks running in
    between. At least one, even for no difference."""
    if size <= 0:
        raise ValueError("size must be positive")
    items = list(rows.items())
    count = max(1, -(-len(items) // size), -(-len(changes) // size))
    return [AppliedWrite(revision, "", "", dict(items[i * size:(i + 1) * size]), {},
                         changes[i * size:(i + 1) * size]) for i in range(count)]
