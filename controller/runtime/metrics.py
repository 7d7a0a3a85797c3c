"""Prometheus metrics of one controller: its own registry, the few instruments events update, and the collectors that
read everything else when scraped.

What happens per event costs a counter increment or a histogram observation, nothing more: an HTTP request (by route
template, never the raw path, so label values stay bounded), a refused login (by method and error code), a group
commit (its duration and its number of writes). Everything that is a count of something held (live and parked
identity actors, pending deadlines, API sessions) or already counted by its owner (deadlines fired, sessions revoked
by cause, the deadlines' lateness, which :class:`~actors.lateness.LatenessRecorder` keeps in a constant-memory
histogram) is read by :class:`_ControllerCollector` at scrape time, and on a cluster node what its parts count and
hold (write conflicts, etcd requests, the read barrier's rounds; the nodes online, the shards hosted, the replica's
revision) by ``_ClusterCollector`` and ``_ClusterHealthCollector``: no gauge is updated on every change and no task
polls.

Each controller gets its own :class:`prometheus_client.CollectorRegistry` (never the process-wide default one: a test
process runs many controllers). The composition root builds :class:`Metrics` when ``--metrics-address`` asks for them
and hands it to what reports to it: the writer (each group commit), the logins (each refusal) and the request layer
(each answer); a controller without metrics builds none and pays nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from actors.lateness import LatenessHistogram
from controller.authentication.api_sessions import ApiSessions
from controller.cluster import NodeView
from controller.posture.engine import PostureEngine
from controller.posture.machine import REVOKE_CAUSES

__all__ = ["LOGIN_METHODS", "METRICS_PATH", "UNMATCHED_ROUTE", "Metrics"]

METRICS_PATH = "/metrics"
"""Where the metrics listener serves the exposition."""
UNMATCHED_ROUTE = "unmatched"
"""The route label of a request no route matched (a 404 or 405 of the router)."""
LOGIN_METHODS = frozenset({"password", "cert", "ext-jwt", "mfa"})
"""The ``method`` label values of login failures; any other method a client names is counted as ``other``."""

_HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# From a fraction of a millisecond (a read served from memory) to the request timeouts.
_REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# A commit's page writes and fsync: tenths of a millisecond on a fast disk, seconds on a struggling one.
_COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# Writes per group commit, up to the writer's largest batch (controller.data.group_commit.THREAD_BATCH).
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """The metrics of one controller: the instruments events update, and (once :meth:`collect_from` names them)
    the parts read at scrape time.

    Attributes:
        registry: every metric of this controller; what ``GET /metrics`` exposes.
        url: the metrics listener's URL (``http://host:port/metrics``) once it is bound, for whoever started the
            controller; None before.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.url: str | None = None
        self._requests = Counter("tollgate_http_requests", "HTTP requests answered, by route template, method and "
                                 "status.", ["route", "method", "status"], registry=self.registry)
        self._request_seconds = Histogram("tollgate_http_request_duration_seconds", "Time from a request's arrival "
                                          "at the application to its response, by route template and method.",
                                          ["route", "method"], buckets=_REQUEST_BUCKETS, registry=self.registry)
        self._login_failures = Counter("tollgate_login_failures", "Logins refused, by authentication method "
                                       "(mfa: the second factor's code) and error code.", ["method", "code"],
                                       registry=self.registry)
        self._commit_seconds = Histogram("tollgate_writer_commit_duration_seconds", "Duration of each group "
                                         "commit: the page writes and fsync (the whole batch when the writer runs "
                                         "inline).", buckets=_COMMIT_BUCKETS, registry=self.registry)
        self._batch_writes = Histogram("tollgate_writer_batch_writes", "Writes per group commit.",
                                       buckets=_BATCH_BUCKETS, registry=self.registry)
        # The children of each label set, made once: labels() takes a lock and checks its arguments every time.
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def collect_from(self, engine: PostureEngine, sessions: ApiSessions) -> None:
        """Read, at each scrape, what ``engine`` (its actors, deadline scheduler, lateness and revocations) and
        ``sessions`` hold. Call once."""
        self.registry.register(_ControllerCollector(engine, sessions))

    def collect_cluster(self, commit: WriteConflicts, etcd: EtcdRequests, barrier: BarrierRounds) -> None:
        """Read, at each scrape, how often a cluster node's writes met another node's, what it asked of etcd, and
        what answered its read barrier's rounds. Call once."""
        self.registry.register(_ClusterCollector(commit, etcd, barrier))

    def collect_cluster_health(self, membership: NodeListing, shards: HostedShards, replica: ReplicaProgress) -> None:
        """Read, at each scrape, how many of a cluster's nodes are online, how many shards this node hosts, and how
        far its replica has applied etcd's history. Call once."""
        self.registry.register(_ClusterHealthCollector(membership, shards, replica))

    def request_done(self, route: str | None, method: str, status: int, seconds: float) -> None:
        """Count one answered request. ``route`` is the matched rule (``/edge/management/v1/identities/<id>``), None
        when no rule matched; a method outside the standard ones is counted as ``other``."""
        key = (route or UNMATCHED_ROUTE, method if method in _HTTP_METHODS else "other", status)
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (self._requests.labels(key[0], key[1], str(status)),
                                                      self._request_seconds.labels(key[0], key[1]))
        children[0].inc()
        children[1].observe(seconds)

    def login_failed(self, method: str, code: str) -> None:
        """Count one refused login by ``method`` (see :data:`LOGIN_METHODS`) and the error code it was refused
        with."""
        self._login_failures.labels(method if method in LOGIN_METHODS else "other", code).inc()

    def batch_committed(self, writes: int, seconds: float) -> None:
        """Observe one group commit of ``writes`` writes that took ``seconds`` (the writer's batch observer)."""
        self._commit_seconds.observe(seconds)
        self._batch_writes.observe(writes)


class WriteConflicts(Protocol):
    """What the metrics read of a cluster node's commit step."""

    conflicts: int


class EtcdRequests(Protocol):
    """What the metrics read of a cluster node's etcd client."""

    requests: dict[str, int]


class BarrierRounds(Protocol):
    """What the metrics read of a cluster node's read barrier."""

    rounds: int
    ridden: int


class NodeListing(Protocol):
    """What the metrics read of a cluster node's membership."""

    def nodes(self) -> Iterable[NodeView]:
        """Every node that ever joined, with whether its lease lives."""


class HostedShards(Protocol):
    """What the metrics read of a cluster node's shard ownership."""

    def owned(self) -> list[int]:
        """The shards whose identity actors this node hosts."""


class ReplicaProgress(Protocol):
    """What the metrics read of a cluster node's replica."""

    @property
    def applied(self) -> int:
        """The etcd revision up to which the replica holds every write."""


class _ClusterCollector:
    def __init__(self, commit: WriteConflicts, etcd: EtcdRequests, barrier: BarrierRounds) -> None:
        self._commit = commit
        self._etcd = etcd
        self._barrier = barrier

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily("tollgate_cluster_write_conflicts", "Batches of writes that found the network's "
                                  "head moved by another node's write since this node's replica ran them, and ran "
                                  "again.", value=self._commit.conflicts)
        requests = CounterMetricFamily("tollgate_etcd_requests", "Requests this node sent to etcd, by call "
                                       "(kv/txn: a txn that writes; kv/range: a quorum read, such as the read "
                                       "barrier's).", labels=["call"])
        for call, count in sorted(self._etcd.requests.items()):
            requests.add_metric([call], count)
        yield requests
        rounds = CounterMetricFamily("tollgate_cluster_read_barrier_rounds", "Rounds of the read barrier (each "
                                     "answers the requests that arrived before it), by what answered them: a quorum "
                                     "read of the barrier's own, or a write txn this node sent.", labels=["answer"])
        rounds.add_metric(["quorum read"], self._barrier.rounds)
        rounds.add_metric(["write txn"], self._barrier.ridden)
        yield rounds


class _ClusterHealthCollector:
    def __init__(self, membership: NodeListing, shards: HostedShards, replica: ReplicaProgress) -> None:
        self._membership = membership
        self._shards = shards
        self._replica = replica

    def collect(self) -> Iterator[Metric]:
        nodes = GaugeMetricFamily("tollgate_cluster_nodes", "Nodes that ever joined the network, by whether their "
                                  "lease lives (online) as this node sees it.", labels=["online"])
        online = [view.online for view in self._membership.nodes()]
        nodes.add_metric(["true"], online.count(True))
        nodes.add_metric(["false"], online.count(False))
        yield nodes
        yield GaugeMetricFamily("tollgate_cluster_shards_hosted", "Virtual shards whose identity actors this node "
                                "hosts now.", value=len(self._shards.owned()))
        yield GaugeMetricFamily("tollgate_cluster_replica_revision", "The etcd revision up to which this node's "
                                "replica holds every write: a node whose figure stays below the others' is behind.",
                                value=self._replica.applied)


class _ControllerCollector:
    """Reads, at each scrape, what the controller's parts hold and count: the identity actors, the deadline
    scheduler, the deadlines' lateness, the revocations and the API sessions."""

    def __init__(self, engine: PostureEngine, sessions: ApiSessions) -> None:
        self._engine = engine
        self._sessions = sessions

    def collect(self) -> Iterator[Metric]:
        engine = self._engine
        actors = engine.actors.statistics()
        yield GaugeMetricFamily("tollgate_identity_actors_live", "Identity actors with a running task (handling "
                                "messages or parked).", value=actors["live"])
        yield GaugeMetricFamily("tollgate_identity_actors_parked", "Live identity actors parked until their next "
                                "message or deadline.", value=actors["parked"])
        yield CounterMetricFamily("tollgate_identity_actor_crashes", "Identity actor steps that raised (the actor "
                                  "went on from its state before the step).", value=actors["crashed"])
        yield GaugeMetricFamily("tollgate_scheduler_pending_deadlines", "Identity deadlines armed and not yet "
                                "reached.", value=actors["scheduler_pending"])
        yield GaugeMetricFamily("tollgate_scheduler_heap_entries", "Entries in the deadline heap, stale ones "
                                "(re-armed or disarmed) included.", value=actors["scheduler_heap"])
        yield CounterMetricFamily("tollgate_scheduler_fired_deadlines", "Identity deadlines reached and delivered "
                                  "to their actors.", value=actors["scheduler_fired"])
        lateness = engine.lateness
        yield _histogram("tollgate_deadline_decision_lateness_seconds", "From an identity deadline to the decision "
                         "taken on it.", lateness.decision)
        yield _histogram("tollgate_deadline_durable_lateness_seconds", "From an identity deadline to the durable "
                         "commit of its decision's revocations.", lateness.durable)
        revocations = CounterMetricFamily("tollgate_session_revocations", "Dial/Bind sessions the posture engine "
                                          "revoked, by cause: policy (no policy grants the service any more), "
                                          "posture (a posture check fails), mfa_timeout (an MFA check timed out).",
                                          labels=["cause"])
        for cause in REVOKE_CAUSES:
            revocations.add_metric([cause], engine.revocations[cause])
        yield revocations
        yield CounterMetricFamily("tollgate_session_decisions", "Dial/Bind session requests the posture engine "
                                  "decided, granted or refused.", value=engine.decisions)
        yield GaugeMetricFamily("tollgate_api_sessions", "Live API sessions.",
                                value=self._sessions.statistics().live_sessions)


def _histogram(name: str, documentation: str, histogram: LatenessHistogram) -> HistogramMetricFamily:
    """A :class:`LatenessHistogram` as a Prometheus histogram: its power-of-two buckets made cumulative (a negative
    lateness counts in the first bucket, and in the sum as it was)."""
    buckets: list[tuple[str, float]] = []
    seen = 0
    for index, count in enumerate(histogram.counts):
        seen += count
        bound = histogram.upper_bound(index)
        buckets.append(("+Inf" if math.isinf(bound) else repr(bound), seen))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=histogram.total)
