"""A replica built afresh from etcd: every key of ``d/`` read at one pinned revision, page by page, into a new
LMDB environment beside the live one, which the commit step then swaps in (``controller/cluster/commit.py``).

The pages are parsed and written in worker threads, each in a transaction of its own, so the event loop keeps serving
from the old replica meanwhile. The snapshot is consistent (every page is read at the revision of the first), so rows
go in any order without tripping a unique index; it ends by recording that revision and the head's.
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

__all__ = ["FIRST_PAGE", "MAX_PAGE", "PAGE_BYTES", "Snapshot", "load_snapshot", "next_page"]

# Why pages are large: etcd 3.4 answers a range with a limit by first collecting every key from the page's start to
# the range's end (it reports their count), so each page costs time in proportion to what is left to read, and many
# small pages cost the square of the keyspace. Pages are sized by bytes instead, within bounds.
FIRST_PAGE = 512
"""Keys asked for in the first range request (nothing is known yet about the values' sizes)."""
MAX_PAGE = 16_384
"""Keys asked for in one range request, at most."""
PAGE_BYTES = 4 * 1024 * 1024
"""Keys and values wanted in one answer: the next page's size follows the mean size of the keys read so far."""


def next_page(keys_read: int, bytes_read: int) -> int:
    """How many keys to ask for next, after reading ``keys_read`` keys holding ``bytes_read`` bytes of keys and
    values: about :data:`PAGE_BYTES` at their mean size, between :data:`FIRST_PAGE` and :data:`MAX_PAGE`."""
    if keys_read <= 0:
        return FIRST_PAGE
    mean = max(1, bytes_read // keys_read)
    return max(FIRST_PAGE, min(MAX_PAGE, PAGE_BYTES // mean))


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


def _write(store: Store, keys: NetworkKeys, kvs: Iterable[KeyValue]) -> None:
    page = _page(keys, kvs)

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
        revision = head = keys_read = bytes_read = 0
        start, end = keys.data, prefix_end(keys.data)
        while True:
            result = await etcd.range(start, end, revision=revision, limit=next_page(keys_read, bytes_read))
            revision = revision or result.header.revision
            keys_read += len(result.kvs)
            bytes_read += sum(len(kv.key) + len(kv.value) for kv in result.kvs)
            head = next((kv.mod_revision for kv in result.kvs if kv.key == keys.head), head)
            await trio.to_thread.run_sync(_write, store, keys, result.kvs)  # parsed there too: pages are large
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
