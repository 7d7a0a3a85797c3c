"""The composition root: every part of a running controller, each built once, here, from what it uses.

:meth:`Controller.open` constructs the parts in the order they depend on each other and hands each the narrow
parts it needs; nothing is wired into a part after it is built but the change listeners each part registers for
the kinds it keeps derived state about. :mod:`controller.runtime.task_tree` starts their services.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from controller.authentication import (
    ApiSessions,
    EnrollmentJwts,
    GuessThrottles,
    JwksCache,
    MfaService,
    PasswordHashing,
    load_token_key,
)
from controller.authentication.parts import LoginFailures, UncountedLoginFailures
from controller.authentication.shared_throttles import KIND as GUESS_COUNTERS
from controller.authentication.shared_throttles import SharedThrottles
from controller.authentication.throttle import Throttles
from controller.certificates import Issuer, Pki, TlsContexts, TokenSigner, ensure_pki
from controller.clock import Clock
from controller.cluster import AppliedWrite, ClusterNode
from controller.data.domain import Domain
from controller.data.freshness import AlwaysFresh, Freshness
from controller.data.group_commit import Writer
from controller.insight import EVENTS_KIND, EventHub, EventLog
from controller.insight import LAYOUTS as EVENT_LAYOUTS
from controller.maintenance.operations import DatabaseOperations
from controller.model.registry import Registry
from controller.model.spec import Change, Environment
from controller.posture.engine import PostureEngine
from controller.posture.service import PostureService
from controller.resources.cas import CAS
from controller.resources.catalog import build_registry
from controller.resources.identities import IDENTITIES
from controller.resources.sessions import API_SESSIONS
from controller.runtime.metrics import Metrics
from controller.runtime.settings import Settings
from storage.store import Store

__all__ = ["VERSION", "Controller"]

VERSION = "0.1.0"


@dataclass(eq=False)
class Controller:
    """The running controller's parts, built by :meth:`open`; :mod:`controller.runtime.task_tree` starts their
    services.

    Every field is set when the controller is built. ``pki`` alone changes while it runs: the server certificate's
    renewal (:func:`controller.runtime.certificate_renewal.renew_server_certificate`) replaces it.

    Attributes:
        engine: this node's posture engine (its actors, their metrics); ``posture`` is how everything else asks it.
        freshness: the barrier every request passes before it reads (a single node never waits).
        metrics: the controller's metrics when ``settings.metrics_address`` asks for them, else None.
        login_failures: where refused logins are counted (the metrics, or nowhere).
        cluster: this node's part of a cluster (``settings.etcd``), else None.
        events_hub: where committed events are handed to the event file and the event streams (in a cluster, the
            events of every node's writes, once this node's replica holds them).
        event_log: the events every write records (None when ``settings.events`` is off).
        instance_id: this process's id, sent to clients in the ``ziti-instance-id`` header (and the ``event_src_id``
            of the events it records).
    """

    settings: Settings
    clock: Clock
    registry: Registry
    store: Store
    writer: Writer
    domain: Domain
    hashing: PasswordHashing
    sessions: ApiSessions
    engine: PostureEngine
    posture: PostureService
    freshness: Freshness
    throttles: Throttles
    mfa: MfaService
    pki: Pki
    issuer: Issuer
    jwts: EnrollmentJwts
    tls: TlsContexts
    jwks: JwksCache
    database: DatabaseOperations
    metrics: Metrics | None
    login_failures: LoginFailures
    events_hub: EventHub
    event_log: EventLog | None
    cluster: ClusterNode | None = None
    instance_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @classmethod
    def open(cls, settings: Settings, clock: Clock | None = None, *, node: ClusterNode | None = None) -> Controller:
        """Open (or create) the data directory and build every part. Call inside ``trio.run``; the task tree starts
        the services. With ``node`` (cluster mode, joined to its network: ``DATA_DIR/pki`` holds the network's PKI),
        the store is the node's replica and writes commit through it to etcd."""
        clock = clock or Clock()
        registry = build_registry(EVENT_LAYOUTS)
        instance_id = str(uuid.uuid4())
        # The data directory holds the store, the PKI and the admin's credentials: private to this user.
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(settings.data_dir, 0o700)
        # The store first: it claims the data directory (storage/ownership.py), so a second controller on it is
        # refused before it touches the PKI of the one running.
        store_path = settings.data_dir / "db"
        if node is None:
            store = Store(store_path, registry.layouts(), durable=settings.durable)
        else:
            store = node.open_replica(store_path, registry.layouts(), durable=settings.durable)
        try:
            # The CA exists whether or not we serve TLS: enrolment and the well-known CA store need it.
            pki = ensure_pki(settings.data_dir / "pki", settings.sans,
                             server_key_type=settings.server_key_type if node is None else node.server_key_type)
            issuer = Issuer.from_pki(pki, client_validity=timedelta(days=settings.client_cert_days))
            token_key = load_token_key(settings.data_dir / "pki" / "enrollment-tokens.key")
            jwts = EnrollmentJwts(TokenSigner.from_pki(pki), settings.address_for(settings.port), token_key)
        except BaseException:
            store.close()
            raise
        metrics = Metrics() if settings.metrics_address is not None else None
        writer = Writer(store, in_thread=settings.worker_threads,
                        observe_batch=metrics.batch_committed if metrics is not None else None,
                        step=node.commit if node is not None else None)
        hashing = PasswordHashing(in_thread=settings.worker_threads, max_concurrent=settings.max_concurrent_hashes)
        events_hub = EventHub()
        event_log = (EventLog(events_hub, keep=settings.events_keep, source_id=instance_id) if settings.events
                     else None)
        domain = Domain(store, writer, registry, clock, env=Environment(network_ca_pem=pki.ca_pem, enrollments=jwts),
                        hash_secret=hashing.hash, journal=event_log)
        sessions = ApiSessions(domain, settings.effective_session_timeout, shared=node is not None)
        ownership = node.ownership if node is not None else None
        engine = PostureEngine(domain, sessions.identities, evaluate_posture=settings.evaluate_posture,
                               ownership=ownership)
        posture: PostureService = engine
        if node is not None and ownership is not None:
            ownership.host = engine
            router = node.route_posture(engine, token_key, pki.ca_pem)
            engine.elsewhere = router.recheck_elsewhere
            posture = router
        throttles: Throttles
        if node is None:
            throttles = GuessThrottles(failed_logins=sessions.failed_logins)
        else:
            shared = throttles = SharedThrottles(domain)
            domain.subscribe(shared.changes_committed, (GUESS_COUNTERS,))
        login_failures: LoginFailures = metrics if metrics is not None else UncountedLoginFailures()
        tls = TlsContexts(pki.ca_pem.decode("ascii"))
        with domain.read() as ctx:
            # Every CA a client certificate may come from; whether it may enrol or log in is decided per request.
            for ca in ctx.txn.scan(CAS.kind, frozenset({"certPem"})):
                tls.add_ca(str(ca["certPem"]))
        # Listeners in this order: a deleted API session's token is refused before its identity's actor hears of it.
        domain.subscribe(_trust_new_cas(tls), (CAS.kind,))
        domain.subscribe(sessions.changes_committed, (API_SESSIONS.kind,))
        domain.subscribe(engine.changes_committed, engine.watched_kinds)
        if node is not None:
            # Other nodes' writes, once applied to the replica, reach the listeners as this node's own do.
            assert node.local is not None
            node.local.subscribe(_publish_remote(domain, event_log))
        if metrics is not None:
            metrics.collect_from(engine, sessions)
            if node is not None and node.commit is not None and node.freshness is not None:
                metrics.collect_cluster(node.commit, node.etcd, node.freshness)
            if node is not None and node.ownership is not None and node.local is not None:
                metrics.collect_cluster_health(node.membership, node.ownership, node.local)
        sessions.restore()
        return cls(settings=settings, clock=clock, registry=registry, store=store, writer=writer, domain=domain,
                   hashing=hashing, sessions=sessions, engine=engine, posture=posture,
                   freshness=node.freshness if node is not None and node.freshness is not None else AlwaysFresh(),
                   throttles=throttles, mfa=MfaService(domain, sessions, posture, throttles, login_failures),
                   pki=pki, issuer=issuer, jwts=jwts, tls=tls, jwks=JwksCache(),
                   database=DatabaseOperations(domain, store_path, in_thread=settings.worker_threads),
                   metrics=metrics, login_failures=login_failures, events_hub=events_hub, event_log=event_log,
                   instance_id=instance_id, cluster=node)

    def is_admin(self, identity_id: str) -> bool:
        with self.domain.read() as ctx:
            row = ctx.txn.get(IDENTITIES.kind, identity_id)
        return bool(row and row.get("isAdmin"))

    def close(self) -> None:
        self.store.close()
        if self.cluster is not None:
            self.cluster.replica_closed()


def _publish_remote(domain: Domain, event_log: EventLog | None) -> Callable[[AppliedWrite], None]:
    """The feed listener that tells the domain's listeners of the changes other nodes made, and the event streams
    of their events (this node's own writes told them already). A rebuilt replica's difference (no write id) holds
    old events too: streams that missed some catch up from the store by id, as after a lag."""
    def listener(write: AppliedWrite) -> None:
        if write.local:
            return
        domain.publish(write.changes)
        if event_log is not None and write.write_id:
            event_log.replicated([(row_id, data) for (kind, row_id), data in write.rows.items()
                                  if kind == EVENTS_KIND and data is not None])

    return listener


def _trust_new_cas(tls: TlsContexts) -> Callable[[list[Change]], None]:
    """The listener that makes every CA created from now on one whose client certificates TLS accepts (whether one
    may enrol or log in is decided per request)."""
    def listener(changes: list[Change]) -> None:
        for change in changes:
            if change.before is None and change.after is not None:
                tls.add_ca(str(change.after["certPem"]))

    return listener
