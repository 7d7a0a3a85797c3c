"""A node of a cluster: its connection to etcd, its membership, its replica, its commit step and its read barrier,
built in the order they need each other.

:func:`connect` reaches etcd (or gives up with :class:`ClusterUnreachable` within :data:`CONNECT_WITHIN` seconds,
before anything is written anywhere); :class:`ClusterNode` then joins (or initialises) the network and opens the
replica. The runtime's task tree starts the services (:meth:`ClusterNode.membership`'s first, since joining needs
the lease, then the replica's and the read barrier's once the writer runs, and the retirement of departed nodes'
lanes).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from controller.certificates import Pki
from controller.certificates.pki import SERVER_KEY_TYPES
from controller.cluster.call_signing import forwarding_key
from controller.cluster.commit import ReplicatedCommit
from controller.cluster.forwarding import HostedEngine, RoutedPosture
from controller.cluster.freshness import ReadIndexBarrier
from controller.cluster.keys import NetworkKeys
from controller.cluster.lane_retirement import LaneRetirement
from controller.cluster.local_replica import LocalReplica
from controller.cluster.membership import Membership, NodeRecord
from controller.cluster.network import InitClaim, Joined, install_pki, join_network
from controller.cluster.ownership import ShardOwnership
from controller.cluster.replica import ReplicaService
from controller.cluster.shipments import Limits
from controller.cluster.unsynced import UnsyncedGuard, arm, current_boot
from controller.etcd import EtcdClient, EtcdError, TlsFiles, Unavailable
from controller.posture.state import STATE_KIND
from storage.layout import KindLayout
from storage.store import Store

__all__ = ["CONNECT_WITHIN", "ClusterConfig", "ClusterNode", "ClusterUnreachable", "connect"]

log = logging.getLogger("tollgate.cluster")

CONNECT_WITHIN = 15.0
"""Seconds a start waits for etcd to answer before it gives up."""
REQUEST_TIMEOUT = 2.0
"""Seconds one etcd request may take (a write's own deadline is longer: it tries again within it)."""
_RETRY_PAUSE = 0.5


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """How a node reaches the network: etcd's client URLs and TLS files, the network's key prefix, this node's name
    (None: ``HOST:PORT`` once it listens), its lease's TTL in seconds, and etcd's limits as its members are
    configured."""

    endpoints: tuple[str, ...]
    prefix: str = "/tollgate/"
    tls: TlsFiles | None = None
    node_name: str | None = None
    lease_ttl: int = 3
    limits: Limits = field(default_factory=Limits)


class ClusterUnreachable(RuntimeError):
    """etcd did not answer at start: nothing was initialised."""


@asynccontextmanager
async def connect(config: ClusterConfig) -> AsyncIterator[EtcdClient]:
    """A client of the network's etcd, once a quorum read has succeeded; closed on exit.

    Raises:
        ClusterUnreachable: no quorum answered within :data:`CONNECT_WITHIN` seconds, or etcd refused this client.
    """
    keys = NetworkKeys(config.prefix)
    async with EtcdClient(config.endpoints, request_timeout=REQUEST_TIMEOUT, tls=config.tls,
                          max_txn_ops=config.limits.max_txn_ops,
                          max_request_bytes=config.limits.max_request_bytes) as etcd:
        last: EtcdError | None = None
        answered = False
        with trio.move_on_after(CONNECT_WITHIN):
            while not answered:
                try:
                    await etcd.range(keys.init, count_only=True)
                    answered = True
                except Unavailable as error:
                    last = error
                    await trio.sleep(_RETRY_PAUSE)
                except EtcdError as error:
                    raise ClusterUnreachable(f"etcd at {', '.join(config.endpoints)} refused this node: {error}") \
                        from error
        if not answered:
            raise ClusterUnreachable(f"etcd at {', '.join(config.endpoints)} did not answer within {CONNECT_WITHIN} s:"
                                     f" {last}")
        yield etcd


class ClusterNode:
    """This node's parts of the cluster. ``membership`` runs first (its lease); :meth:`join` then joins the network
    and :meth:`open_replica` opens the replica the controller is built on."""

    def __init__(self, config: ClusterConfig, etcd: EtcdClient) -> None:
        self.config = config
        self.etcd = etcd
        self.keys = NetworkKeys(config.prefix)
        self.instance = f"{os.uname().nodename}-{os.getpid()}-{os.urandom(4).hex()}"
        self.membership = Membership(etcd, self.keys, config.lease_ttl)
        self.retirement = LaneRetirement(etcd, self.keys, self.membership)
        self.started_at = time.time()
        self._claim: InitClaim | None = None
        self.server_key_type = "rsa"
        self.network = ""  # the network's identity, once joined
        self.name = config.node_name or ""
        self.local: LocalReplica | None = None
        self.commit: ReplicatedCommit | None = None
        self.replica: ReplicaService | None = None
        self.freshness: ReadIndexBarrier | None = None
        self.ownership: ShardOwnership | None = None
        self.router: RoutedPosture | None = None
        self._guard: UnsyncedGuard | None = None

    async def join(self, pki_dir: Path, sans: Sequence[str], server_key_type: str) -> Pki:
        """Join the network, initialising it if nobody has, and install its PKI in ``pki_dir`` with this node's
        own server certificate (a new network gets a server key of ``server_key_type``; an existing one keeps
        its own, whatever this node was told)."""
        if server_key_type not in SERVER_KEY_TYPES:
            raise ValueError(f"unknown server key type {server_key_type!r}")
        joined: Joined = await join_network(self.etcd, self.keys, lambda: self.membership.lease_id, self.instance,
                                            server_key_type=server_key_type)
        self._claim = joined.claim
        self.network = joined.identity
        self.server_key_type = joined.pki.server_key_type
        if self.server_key_type != server_key_type:
            log.warning("the network's server key is not of the type this node was told; it keeps the network's",
                        extra={"network": self.server_key_type, "asked": server_key_type})
        return await trio.to_thread.run_sync(install_pki, joined.pki, pki_dir, sans)

    @property
    def initialising(self) -> bool:
        """This node initialises the network (it runs the first bootstrap)."""
        return self._claim is not None

    def open_replica(self, path: Path, layouts: list[KindLayout], *, durable: bool = True) -> Store:
        """Open this node's LMDB replica at ``path`` (left-overs of an interrupted rebuild removed) and build the
        commit step, the replica service and the read barrier over it."""
        for leftover in (path.with_name(path.name + ".rebuild"), path.with_name(path.name + ".old")):
            shutil.rmtree(leftover, ignore_errors=True)
        # Unsynced under a guard where the system names its boots (controller/cluster/unsynced.py); else the meta
        # page unsynced: an OS crash may undo the replica's last commits, never its integrity, and it resumes from
        # the revision it then holds (etcd holds every acknowledged write).
        self._guard = arm(path, current_boot()) if durable else None
        synced = durable and self._guard is None
        store = Store(path, layouts, durable=synced, sync_meta=False)
        name = self.name or self.instance
        self.local = LocalReplica(store, self.keys, network=self.network, lane_key=self.keys.lane(name))
        # The identity actors' state goes in this node's lane: only the owner of an identity's shard writes it,
        # under its fences, from what its actor holds.
        self.freshness = ReadIndexBarrier(self.etcd, self.keys, self.local)
        self.commit = ReplicatedCommit(self.local, self.etcd, self.keys, node=name, limits=self.config.limits,
                                       barrier=self.freshness, owned_kinds=frozenset({STATE_KIND}))
        self.replica = ReplicaService(self.etcd, self.keys, self.local, layouts, durable=synced)
        self.ownership = ShardOwnership(self.etcd, self.keys, self.membership, self.freshness)
        return store

    def replica_closed(self) -> None:
        """The replica's store was closed cleanly: flush an unsynced one and remove its guard, so that a restart of
        the machine finds it whole and resumes from it."""
        if self._guard is not None:
            self._guard.disarm()
            self._guard = None

    def route_posture(self, engine: HostedEngine, token_key: bytes, ca_pem: bytes) -> RoutedPosture:
        """The posture service of this node: ``engine`` for the identities it owns, the owners for the others."""
        assert self.ownership is not None, "open the replica first"
        assert self.freshness is not None
        self.router = RoutedPosture(engine, self.ownership, self.membership, self.freshness, forwarding_key(token_key),
                                    within=2 * self.config.lease_ttl + 5.0, ca_pem=ca_pem)
        return self.router

    async def initialised(self) -> None:
        """The first bootstrap is durable: mark the network initialised (a no-op on a node that joined)."""
        if self._claim is not None:
            await self._claim.finish(self.etcd, self.keys, self.instance)
            self._claim = None

    async def announce(self, host: str, port: int, address: str, internal: str, pki: Pki) -> None:
        """This node serves at ``address`` (its API bound to ``host``:``port``, which the other nodes reach at
        ``internal``): name it (``HOST:PORT`` unless told its name), put its membership record, and let it claim
        shards."""
        if not self.name:
            self.name = f"{host}:{port}"
        if self.commit is not None:
            self.commit.node = self.name
        if self.ownership is not None:
            self.ownership.name = self.name
        self.retirement.name = self.name
        await self.membership.join(NodeRecord(name=self.name, address=address, internal_address=internal,
                                              started_at=self.started_at, joined_at=time.time(),
                                              cert_pem=pki.server_cert_pem.decode("ascii"),
                                              fingerprint=pki.server_cert_sha1))
