"""Cluster mode: several controllers serve one network through etcd, each from a local LMDB replica.

Owns: what the nodes of a network share and how. Where each thing lives in etcd (``keys``); replicated writes: a
batch run optimistically on the replica and committed to etcd in txns guarded by the network's head, or by the
node's own lane head for the owner-fenced state of identity actors, within etcd's limits, with lost answers settled
by looking (``commit``, ``head_txns``, ``shipments``); the replica fed by a watch of the data, rebuilt from a
consistent read when empty or compacted (``replica``, ``local_replica``, ``replica_apply``, ``snapshot``), what it
holds (``position``), and written without fsync under a guard naming the boot (``unsynced``); the batched read
barrier (``freshness``); the scheduler turns a busy node gives before a quorum read or a txn (``turns``);
initialising the network once and its shared PKI (``network``); membership by leases (``membership``), and the
lane heads of nodes that left retired (``lane_retirement``); steps run again whenever what they depend on changes
(``reruns``); identity
actors sharded over the live nodes, each shard claimed under its owner's lease and every owner's writes fenced on it
(``shards``, ``ownership``); calls for an identity routed to its owner over the signed internal channel, one
WebSocket to each other node carrying many calls at once (``call_signing``, ``channel``), and a write's re-checks
awaited on every node (``forwarding``); and a node's parts built in order (``node``).

Seams it gives the rest of the controller: the writer's commit step (:class:`ReplicatedCommit`, a
``controller.data.commit_step.CommitStep``), the read barrier (:class:`ReadIndexBarrier`, a
``controller.data.freshness.Freshness``), the feed of every applied write (:meth:`LocalReplica.subscribe`,
:class:`AppliedWrite`), write conditions checked by etcd (``Domain.write(..., conditions=[Compare...])``), the
live nodes (:meth:`Membership.nodes`), the posture engine's ``Ownership`` (:class:`ShardOwnership`; the engine is
its :class:`ShardHost`) and the routed ``PostureService`` (:class:`RoutedPosture`).

May import: wsproto (the channel's calling side), ``controller.etcd`` (the bottom layer), ``controller.data`` (the
writer's seams), the model, storage, ``controller.certificates``, ``controller.errors`` and the posture engine's
public interface (``controller.posture.service``, ``controller.posture.state``). The runtime builds it and nothing
below the runtime imports it: the domain, the write path and the posture engine do not know whether they run on one
node or many.
"""

from controller.cluster.commit import ReplicatedCommit
from controller.cluster.forwarding import RoutedPosture
from controller.cluster.freshness import ReadIndexBarrier
from controller.cluster.keys import NetworkKeys
from controller.cluster.lane_retirement import LaneRetirement
from controller.cluster.local_replica import LocalReplica
from controller.cluster.membership import Membership, NodeRecord, NodeView
from controller.cluster.node import ClusterConfig, ClusterNode, ClusterUnreachable, connect
from controller.cluster.ownership import ShardHost, ShardOwnership
from controller.cluster.replica import ReplicaService
from controller.cluster.replica_apply import AppliedWrite
from controller.cluster.shipments import Limits

__all__ = [
    "AppliedWrite", "ClusterConfig", "ClusterNode", "ClusterUnreachable", "LaneRetirement", "Limits", "LocalReplica",
    "Membership", "NetworkKeys",
    "NodeRecord", "NodeView", "ReadIndexBarrier", "ReplicaService", "ReplicatedCommit", "RoutedPosture", "ShardHost",
    "ShardOwnership", "connect",
]
