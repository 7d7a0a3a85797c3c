"""The composition root's objects: everything a request handler may reach, built once from :class:`Settings`."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from controller.authentication import (
    API_SESSIONS,
    ApiSessions,
    EnrollmentJwts,
    GuessThrottles,
    JwksCache,
    MfaService,
    PasswordHashing,
    load_token_key,
)
from controller.certificates import Issuer, Pki, TlsContexts, TokenSigner, ensure_pki
from controller.clock import Clock
from controller.data.domain import Barrier, Domain
from controller.data.group_commit import Writer
from controller.maintenance.operations import DatabaseOperations
from controller.model.context import Change, Environment
from controller.model.registry import Registry
from controller.posture.engine import PostureEngine
from controller.resources.catalog import build_registry
from controller.runtime.settings import Settings
from storage.store import Store

if TYPE_CHECKING:
    from controller.runtime.metrics import Metrics

__all__ = ["VERSION", "Controller"]

VERSION = "0.1.0"


@dataclass
class Controller:
    """The running controller's parts. ``main.run`` starts their services in its task tree."""

    settings: Settings
    store: Store
    writer: Writer
    registry: Registry
    domain: Domain
    sessions: ApiSessions
    clock: Clock
    engine: PostureEngine
    mfa: MfaService = field(init=False)
    hashing: PasswordHashing = field(init=False)
    throttles: GuessThrottles = field(init=False)
    pki: Pki = field(init=False)
    issuer: Issuer = field(init=False)
    jwts: EnrollmentJwts = field(init=False)
    tls: TlsContexts = field(init=False)
    jwks: JwksCache = field(init=False)
    database: DatabaseOperations = field(init=False)
    instance_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    metrics: Metrics | None = None  # see controller.runtime.metrics.attach_metrics

    @classmethod
    def open(cls, settings: Settings, clock: Clock | None = None) -> Controller:
        """Open (or create) the data directory. Call inside ``trio.run``; services are started by ``main``."""
        clock = clock or Clock()
        registry = build_registry()
        # The data directory holds the store, the PKI and the admin's credentials: private to this user.
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(settings.data_dir, 0o700)
        # The store first: it claims the data directory (storage/ownership.py), so a second controller on it is
        # refused before it touches the PKI of the one running.
        store_path = settings.data_dir / "db"
        store = Store(store_path, registry.layouts(), durable=settings.durable)
        try:
            # The CA exists whether or not we serve TLS: enrolment and the well-known CA store need it.
            pki = ensure_pki(settings.data_dir / "pki", settings.sans, server_key_type=settings.server_key_type)
            issuer = Issuer.from_pki(pki, client_validity=timedelta(days=settings.client_cert_days))
            jwts = EnrollmentJwts(TokenSigner.from_pki(pki), settings.address_for(settings.port),
                                  load_token_key(settings.data_dir / "pki" / "enrollment-tokens.key"))
        except BaseException:
            store.close()
            raise
        writer = Writer(store, in_thread=settings.worker_threads)
        domain = Domain(store, writer, registry, clock)
        sessions = ApiSessions(domain, settings.effective_session_timeout)
        hashing = PasswordHashing(in_thread=settings.worker_threads, max_concurrent=settings.max_concurrent_hashes)
        domain.hash_secret = hashing.hash
        engine = PostureEngine(domain, evaluate_posture=settings.evaluate_posture)
        controller = cls(settings, store, writer, registry, domain, sessions, clock, engine)
        controller.mfa = MfaService(controller)
        controller.hashing = hashing
        controller.throttles = GuessThrottles()
        controller.pki = pki
        controller.issuer = issuer
        controller.jwts = jwts
        controller.jwks = JwksCache()
        controller.database = DatabaseOperations(domain, store_path, in_thread=settings.worker_threads)
        domain.env = Environment(network_ca_pem=pki.ca_pem, enrollments=jwts)
        controller.tls = TlsContexts(pki.ca_pem.decode("ascii"))
        with store.read() as txn:
            # Every CA a client certificate may come from; whether it may enrol or log in is decided per request.
            for ca in txn.scan("cas", frozenset({"certPem"})):
                controller.tls.add_ca(str(ca["certPem"]))
        domain.subscribe(controller._on_changes)
        sessions.restore()
        return controller

    def _on_changes(self, changes: list[Change]) -> Barrier | None:
        """Tell the parts that keep derived state about committed writes.

        Returns a barrier when identities must re-evaluate their sessions: the write that caused it is answered only
        once each of those identities has done so (its re-evaluation is queued before the barrier's read).
        """
        reevaluate: set[str] = set()
        for change in changes:
            if change.kind == "cas" and change.before is None and change.after is not None:
                self.tls.add_ca(str(change.after["certPem"]))
            elif change.kind == API_SESSIONS and change.after is None:
                self.sessions.forget(change.id)
                identity_id = (change.before or {}).get("identityId")
                if identity_id:
                    self.engine.api_session_ended(str(identity_id), change.id)
            elif change.kind == "sessions":
                self.engine.sessions_changed(change)
            elif change.kind == "identities" and change.before is not None and (
                    change.after is None or _access_fields(change.before) != _access_fields(change.after)):
                reevaluate.add(change.id)
            elif change.kind in self.registry.access_kinds:
                # Policies or checks changed: every identity that can hold sessions re-checks them now.
                reevaluate.update(self.sessions.identities())
        return self.engine.reevaluate(sorted(reevaluate)) if reevaluate else None

    def is_admin(self, identity_id: str) -> bool:
        with self.store.read() as txn:
            row = txn.get("identities", identity_id)
        return bool(row and row.get("isAdmin"))

    def close(self) -> None:
        self.store.close()


def _access_fields(row: dict[str, Any]) -> tuple[Any, ...]:
    """The identity fields that decide which policies select it."""
    return tuple(row.get("roleAttributes") or ()), row.get("isAdmin")
