"""The composition root's objects: everything a request handler may reach, built once from :class:`Settings`."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from controller.auth import KIND as API_SESSIONS
from controller.auth import ApiSessions
from controller.clock import Clock
from controller.domain import Domain
from controller.registry import Registry
from controller.resources.catalog import build_registry
from controller.resources.context import Change
from controller.settings import Settings
from controller.writer import Writer
from storage.store import Store

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
    instance_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    extras: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, settings: Settings, clock: Clock | None = None) -> Controller:
        """Open (or create) the data directory. Call inside ``trio.run``; services are started by ``main``."""
        clock = clock or Clock()
        registry = build_registry()
        store = Store(settings.data_dir / "db", registry.layouts(), durable=settings.durable)
        writer = Writer(store, in_thread=settings.worker_threads)
        domain = Domain(store, writer, registry, clock)
        sessions = ApiSessions(domain, settings.effective_session_timeout, hash_in_thread=settings.worker_threads,
                               max_concurrent_hashes=settings.max_concurrent_hashes)
        controller = cls(settings, store, writer, registry, domain, sessions, clock)
        domain.subscribe(controller._on_changes)
        sessions.restore()
        return controller

    def _on_changes(self, changes: list[Change]) -> None:
        for change in changes:
            if change.kind == API_SESSIONS and change.after is None:
                self.sessions.forget(change.id)

    def is_admin(self, identity_id: str) -> bool:
        with self.store.read() as txn:
            row = txn.get("identities", identity_id)
        return bool(row and row.get("isAdmin"))

    def close(self) -> None:
        self.store.close()


def random_password() -> str:
    return secrets.token_urlsafe(18)
