"""A replica built afresh from etcd: every key of ``d/`` read at one pinned revision, page by page, into a new
LMDB environment beside the live one, which the commit step then swaps in (``controller/cluster/commit.py``).

The pages are written in worker threads, each in a transaction of its own, so the event loop keeps serving from the
old replica meanwhile. The snapshot is consistent (every page is read at the revision of the first), so rows go in
any order without tripping a unique index; it ends by recording that revision and the head's.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from controller.cluster.keys import NetworkKeys
from controller.cluster.replica_apply import APPLIED_META, HEAD_META, NETWORK_META, apply_rows
from controller.etcd import EtcdClient, KeyValue, prefix_end
from storage.batch import run_batch
from storage.layout import KindLayout
from storage.store import Store, WriteTxn
from storage.write_set import WriteSet

__all__ = ["PAGE", "Snapshot", "load_snapshot"]

PAGE = 512
"""Keys read per range request."""


@dataclass(eq=False)
class Snapshot:
    """A rebuilt replica, not yet serving: its store, the revision it was read at and the head's revision there.
    ``done`` is set once it serves."""

    store: Store
    revision: int
    head: int
    done: trio.Event = field(default_factory=trio.Event)


def _page(keys: NetworkKeys, kvs: Iterable[KeyValue]) -> WriteSet:
    page = WriteSet()
    for kv in kvs:
        parsed = keys.parse(kv.key)
        if parsed is None or parsed.is_marker:
            continue
        if parsed.meta is not None:
            page.meta[parsed.meta] = kv.value
        elif parsed.kind is not None and parsed.id is not None:
            page.rows[(parsed.kind, parsed.id)] = kv.value
    return page


def _write(store: Store, page: WriteSet) -> None:
    def fill(txn: WriteTxn) -> None:
        apply_rows(txn, store, page.rows, page.meta)

    [outcome] = run_batch(store, [fill])
    outcome.unwrap()


def _position(store: Store, network: str, revision: int, head: int) -> None:
    def record(txn: WriteTxn) -> None:
        txn.set_meta(NETWORK_META, network, local=True)
        txn.set_meta(APPLIED_META, revision, local=True)
        txn.set_meta(HEAD_META, head, local=True)

    [outcome] = run_batch(store, [record])
    outcome.unwrap()


async def load_snapshot(etcd: EtcdClient, keys: NetworkKeys, network: str, path: Path, layouts: Iterable[KindLayout],
                        *, durable: bool = True) -> Snapshot:
    """Read everything of ``d/`` at one revision into a new store at ``path`` (what was there is removed), recording
    that it holds ``network`` as of that revision.

    Raises what etcd raised (``Compacted`` if the revision is compacted while the pages are read: start again);
    the half-built store is removed then."""
    await trio.to_thread.run_sync(functools.partial(shutil.rmtree, path, ignore_errors=True))
    store = Store(path, layouts, durable=durable, sync_meta=False)  # as the live replica (ClusterNode.open_replica)
    try:
        revision = head = 0
        start, end = keys.data, prefix_end(keys.data)
        while True:
            result = await etcd.range(start, end, revision=revision, limit=PAGE)
            revision = revision or result.header.revision
            head = next((kv.mod_revision for kv in result.kvs if kv.key == keys.head), head)
            await trio.to_thread.run_sync(_write, store, _page(keys, result.kvs))
            if not result.more or not result.kvs:
                break
            start = result.kvs[-1].key + b"\0"
        await trio.to_thread.run_sync(_position, store, network, revision, head)
    except BaseException:
        store.close()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, path, ignore_errors=True))
        raise
    return Snapshot(store, revision, head)
