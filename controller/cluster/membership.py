"""Membership: which nodes serve the network now, from their leases.

Each node holds one lease (``--lease-ttl`` seconds, kept alive three times per TTL) and, once it serves, a key
``members/live/NAME`` on it describing itself (:class:`NodeRecord`): when the node dies its lease expires and etcd
deletes the key. ``members/known/NAME`` (no lease) remembers every node that ever joined, so that one that went away
is still listed, as offline. A watch keeps :meth:`Membership.nodes` current on every node.

A lease lost while etcd was unreachable is granted anew once etcd answers, and the node's key put again: the node
is offline meanwhile, as the others see it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgspec
import trio

from controller.cluster.keys import NetworkKeys
from controller.etcd import (
    Compacted,
    Compare,
    EtcdClient,
    EtcdError,
    EventType,
    LeaseExpired,
    LeaseKeeper,
    LeaseNotFound,
    Put,
    Unavailable,
)

__all__ = ["Membership", "NodeRecord", "NodeView"]

log = logging.getLogger("tollgate.cluster")

_RETRY_PAUSE = 0.5
_REVOKE_WITHIN = 1.0


class NodeRecord(msgspec.Struct, frozen=True):
    """What a node says of itself: its name, the URL clients reach it at, the address other nodes reach it at (its
    API's until it has another), when it started and joined first, its server certificate and that certificate's
    SHA-1 fingerprint."""

    name: str
    address: str
    internal_address: str
    started_at: float
    joined_at: float
    cert_pem: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as this one sees it: its record, and whether its lease lives."""

    record: NodeRecord
    online: bool


class Membership:
    """This node's lease and everyone's records. :meth:`run` is its service; :meth:`join` announces this node."""

    def __init__(self, etcd: EtcdClient, keys: NetworkKeys, ttl: int) -> None:
        self._etcd = etcd
        self._keys = keys
        self._ttl = ttl
        self.keeper: LeaseKeeper | None = None
        self._record: NodeRecord | None = None
        self._live: dict[str, NodeRecord] = {}
        self._known: dict[str, NodeRecord] = {}
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (quick, never blocking) whenever the live nodes or this node's lease change."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    def live(self) -> dict[str, NodeRecord]:
        """The nodes whose lease lives now, by name."""
        return dict(self._live)

    @property
    def lease_id(self) -> int:
        """The lease this node holds now (call after :meth:`run` has started)."""
        assert self.keeper is not None, "membership has not started"
        return self.keeper.lease_id

    def nodes(self) -> Iterator[NodeView]:
        """Every node that ever joined, by name, with whether it is live now."""
        names = sorted(self._known.keys() | self._live.keys())
        for name in names:
            record = self._live.get(name) or self._known[name]
            yield NodeView(record, name in self._live)

    async def join(self, record: NodeRecord) -> None:
        """Announce this node (once it serves): its live key on its lease, and its known key if new. Should etcd
        not take it now, it is put again with the next lease."""
        self._record = record
        try:
            await self._announce()
        except Unavailable as error:
            log.warning("this node could not announce itself yet", extra={"error": str(error)})

    async def _announce(self) -> None:
        if self._record is None or self.keeper is None:
            return
        data = msgspec.json.encode(self._record)
        await self._etcd.put(self._keys.live_member(self._record.name), data, lease=self.keeper.lease_id)
        known = self._keys.known_member(self._record.name)
        await self._etcd.txn([Compare.absent(known)], [Put(known, data)])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold a lease (granted anew whenever it is lost) and keep the view of every node current. Cancelled, it
        ends the lease, so that the others see this node offline at once."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._hold_lease)
                nursery.start_soon(self._follow)
                task_status.started()
        finally:
            if self.keeper is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(_REVOKE_WITHIN):
                    try:
                        await self._etcd.lease_revoke(self.keeper.lease_id)
                    except EtcdError as error:
                        log.debug("this node's lease was not revoked; it expires", extra={"error": str(error)})

    async def _hold_lease(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            try:
                self.keeper = await LeaseKeeper.grant(self._etcd, self._ttl)
                self._changed()
                await self._announce()
                status, started = (trio.TASK_STATUS_IGNORED if started else task_status), True
                await self.keeper.run(task_status=status)  # returns only by raising
            except (LeaseExpired, LeaseNotFound) as error:
                log.warning("this node's lease was lost: it is offline until etcd grants another",
                            extra={"error": str(error)})
            except Unavailable as error:
                log.debug("no lease granted yet", extra={"error": str(error)})
                await trio.sleep(_RETRY_PAUSE)

    async def _follow(self) -> None:
        """Keep ``_live`` and ``_known`` as etcd holds them: read both, then watch from that read."""
        while True:
            try:
                found = await self._etcd.range(self._keys.members, prefix=True)
                live: dict[str, NodeRecord] = {}
                known: dict[str, NodeRecord] = {}
                for kv in found.kvs:
                    self._note(kv.key, kv.value, live, known)
                self._live, self._known = live, known
                self._changed()
                async with self._etcd.watch(self._keys.members, prefix=True,
                                            start_revision=found.header.revision + 1,
                                            unavailable_timeout=math.inf) as watch:
                    async for update in watch:
                        for event in update.events:
                            if event.type is EventType.DELETE:
                                self._forget(event.kv.key)
                            else:
                                self._note(event.kv.key, event.kv.value, self._live, self._known)
                        self._changed()
            except Compacted:
                continue
            except EtcdError as error:
                log.debug("the membership view lost etcd; reading again", extra={"error": str(error)})
                await trio.sleep(_RETRY_PAUSE)

    def _note(self, key: bytes, value: bytes, live: dict[str, NodeRecord], known: dict[str, NodeRecord]) -> None:
        try:
            record = msgspec.json.decode(value, type=NodeRecord)
        except msgspec.DecodeError:
            return
        if key.startswith(self._keys.live):
            live[record.name] = record
        elif key.startswith(self._keys.known):
            known[record.name] = record

    def _forget(self, key: bytes) -> None:
        if key.startswith(self._keys.live):
            self._live.pop(key[len(self._keys.live):].decode(errors="replace"), None)
        elif key.startswith(self._keys.known):
            self._known.pop(key[len(self._keys.known):].decode(errors="replace"), None)


