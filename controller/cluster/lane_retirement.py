"""Retiring the lane heads of nodes that left, so that the heads every write and every read barrier reads stay as
many as the live nodes, however many nodes have come and gone.

A node's lane head (``d/lane/NODE``, ``controller/cluster/keys.py``) orders that node's owner-fenced state writes.
Once the node's lease is gone its actors' rows are its successors' to write, in their own lanes, and the head orders
nothing more; but every committed txn and every read barrier reads all the heads, and a replica holds a head's chain
only once it has applied it. So the head is not simply deleted: the txn that deletes it also puts the retirement mark
(``d/lane/``), a head of its own whose mod revision is at least that of the retired lane's last write. A replica
holds the mark's chain once it has applied every write up to it
(:meth:`~controller.cluster.position.ReplicaPosition.holds_head`), so a read barrier anywhere still waits for the
retired lane's writes, as it waited for the lane head itself.

One node does it: the first live node by name (:func:`lanes_to_retire`), whenever the live nodes change. Each
deletion compares the node's live key (absent: its lease is gone) and the lane head's mod revision as read, so a node
that came back meanwhile is left alone, a lane written since is read again and retired as it is now, and two nodes
retiring the same lane at once retire it once. A node that comes back starts its lane anew: a new process begins
with an absent head, and a running one whose lease lapsed meets the absent head once (one refused txn names it).
Such a node cannot write data in the lane it finds absent while its lease is gone, since every lane write carries
its owner's fences, which went with the lease; but settling a lane txn whose answer was lost puts the head without
fences (``controller/cluster/head_txns.py``, :func:`fence`), so a node away may leave its head behind once more.
That head is retired at the next change of the live nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Protocol

import trio

from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.reruns import Rerun
from controller.etcd import Compare, Delete, EtcdClient, Put, Range, RangeResult

__all__ = ["LaneRetirement", "LiveNodes", "lanes_to_retire", "retiring"]

log = logging.getLogger("tollgate.cluster")


def retiring(live: Collection[str], me: str) -> bool:
    """Whether the node named ``me`` retires lanes while the nodes ``live`` are live: it is the first of them by
    name."""
    return bool(me) and me in live and min(live) == me


def lanes_to_retire(lanes: Iterable[str], live: Collection[str], me: str) -> list[str]:
    """The lanes (by node name) that the node ``me`` retires, of ``lanes`` found in etcd while the nodes ``live``
    were live: every lane of a node not live if :func:`retiring`, else none."""
    if not retiring(live, me):
        return []
    return sorted(name for name in lanes if name not in live)


class LiveNodes(Protocol):
    """What the retirement reads of the membership (``controller/cluster/membership.py``)."""

    def live(self) -> Mapping[str, object]:
        """The nodes whose lease lives now, by name."""

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (quick, never blocking) whenever the live nodes change."""


class LaneRetirement:
    """Retires the lane heads of nodes that left, whenever the live nodes change (:meth:`run`)."""

    def __init__(self, etcd: EtcdClient, keys: NetworkKeys, membership: LiveNodes) -> None:
        self._etcd = etcd
        self._keys = keys
        self._membership = membership
        self.name = ""  # this node's name, once it serves (it retires nothing before)
        self._rerun = Rerun(failed="lanes of nodes that left were not retired yet")
        membership.on_change(self._rerun.mark)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Retire what is to retire now and after every change of the live nodes, until cancelled."""
        task_status.started()
        await self._rerun.run(self._retire_gone)

    async def _retire_gone(self) -> None:
        """If this node retires lanes (:func:`retiring`), retire the lane of every node not live now."""
        live = self._membership.live().keys()
        if not retiring(live, self.name):
            return
        found = await self._etcd.range(self._keys.lanes, self._keys.heads_end, keys_only=True)
        heads: dict[str, int] = {}
        for kv in found.kvs:
            parsed = self._keys.parse(kv.key)
            if parsed is not None and parsed.lane is not None:
                heads[parsed.lane] = kv.mod_revision
        for name in lanes_to_retire(heads, live, self.name):
            await self._retire(name, heads[name])

    async def _retire(self, name: str, mod: int) -> None:
        """Delete the lane head of the node ``name``, found at ``mod``, while that node is not live."""
        lane, member = self._keys.lane(name), self._keys.live_member(name)
        while True:
            result = await self._etcd.txn(
                [Compare.absent(member), Compare.unchanged(lane, mod)],
                [Delete(lane), Put(self._keys.retired, HeadValue(f"retired {name}", self.name).encode())],
                [Range(member, keys_only=True), Range(lane, keys_only=True)])
            if result.succeeded:
                log.info("retired the lane of a node that left", extra={"node": name,
                                                                         "revision": result.header.revision})
                return
            member_now, lane_now = result.responses
            assert isinstance(member_now, RangeResult) and isinstance(lane_now, RangeResult)
            if member_now.first is not None or lane_now.first is None:  # the node came back, or its lane is gone
                return
            mod = lane_now.first.mod_revision  # written since it was read (a lost txn settled): retire it as it is
