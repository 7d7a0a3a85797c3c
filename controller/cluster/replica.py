"""The replica service: one watch of ``d/`` feeds every change etcd commits to this node's LMDB replica.

The watch starts at the revision after the one the replica records, so a node restarted on its data directory
resumes where it stopped. A replica that holds nothing yet, or whose history etcd has compacted away (``Compacted``),
is rebuilt from a consistent read (``controller/cluster/snapshot.py``) while the node keeps serving reads from the old
one, swapped in by the commit step, and watched from the revision of that read. The node's writes wait meanwhile
(each within its bound): one committed during the read would land past the revision it is read at, and be served
as absent after the swap until the watch brought it back. The updates themselves are applied on the
writer's task (``controller/cluster/local_replica.py``), in revision order, with the revision recorded in the same
transaction.

A watch that no member carries (quorum lost) is tried again until one does; a watch that looks stuck (the writer or
the read barrier waited in vain for a revision etcd had named) is restarted on the next member (:meth:`kick`).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import trio

from controller.cluster.keys import NetworkKeys
from controller.cluster.local_replica import LocalReplica
from controller.cluster.snapshot import load_snapshot
from controller.etcd import Compacted, EtcdClient, EtcdError, Unavailable
from storage.layout import KindLayout

__all__ = ["IDLE_TIMEOUT", "ReplicaService"]

log = logging.getLogger("tollgate.cluster")

IDLE_TIMEOUT = 30.0
"""Seconds a watch stream may bring nothing (not even a progress notification) before it moves to another member."""
_RETRY_PAUSE = 0.5


class ReplicaService:
    """Keeps the replica ``local`` in step with etcd. ``rebuilds`` counts the replicas built afresh."""

    def __init__(self, etcd: EtcdClient, keys: NetworkKeys, local: LocalReplica, layouts: list[KindLayout],
                 *, durable: bool = True) -> None:
        self._etcd = etcd
        self._keys = keys
        self._local = local
        self._layouts = layouts
        self._durable = durable
        self._watching: trio.CancelScope | None = None
        self.rebuilds = 0
        local.kick = self.kick

    def kick(self) -> None:
        """Restart the watch (on the next member), from where it got."""
        if self._watching is not None:
            self._watching.cancel()

    async def rebuild(self) -> None:
        """Build the replica afresh from etcd and swap it in (the live one keeps serving meanwhile)."""
        path = self._rebuild_path()
        async with self._local.rebuilding() as hand_over:
            snapshot = await load_snapshot(self._etcd, self._keys, self._local.network, path, self._layouts,
                                           durable=self._durable)
            hand_over(snapshot)
        await snapshot.done.wait()
        self.rebuilds += 1

    def _rebuild_path(self) -> Path:
        live = self._local.store_path
        return live.with_name(live.name + ".rebuild")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the replica in step until cancelled; started once the replica holds etcd's data as of some
        revision at least as recent as the start, and a watch carries on from there."""
        started = False
        stale = self._local.applied == 0  # nothing held yet: read everything rather than the whole history
        while True:
            try:
                if stale:
                    await self.rebuild()
                    stale = False
                with trio.CancelScope() as self._watching:
                    async with self._etcd.watch(self._keys.data, prefix=True, start_revision=self._local.applied + 1,
                                                idle_timeout=IDLE_TIMEOUT, unavailable_timeout=math.inf) as watch:
                        if not started:
                            started = True
                            task_status.started()
                        async for update in watch:
                            self._local.enqueue(update)
            except Compacted as error:
                log.warning("the replica's history was compacted in etcd: rebuilding it", extra={"error": str(error)})
                stale = True
            except (Unavailable, EtcdError) as error:
                log.warning("the replica's watch failed; trying again", extra={"error": str(error)})
                await trio.sleep(_RETRY_PAUSE)
            finally:
                self._watching = None
