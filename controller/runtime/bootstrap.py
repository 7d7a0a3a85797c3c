"""First start: seed system rows, the ``default`` auth policy, the config types endpoints read and the default
admin; on every start, bring rows an earlier version stored up to date (API-session tokens kept as digests) and
record the start (``controller/runtime/controllers.py``; a node of a cluster has a membership record instead).

Idempotent: every later start finds what the first one wrote and changes nothing but the record of its start. The
admin's password is taken from the settings; when none is given a random one is generated, printed once and written
to ``<data-dir>/admin-credentials`` with mode 0600.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.authentication.api_sessions import KIND as API_SESSIONS
from controller.authentication.api_sessions import TOKEN_DIGEST, token_digest
from controller.certificates.pki import write_private_file
from controller.data.write_path import create_row
from controller.model.spec import WriteContext
from controller.resources.seeded_config_types import seed_config_types
from controller.resources.sessions import DEFAULT_AUTH_POLICY
from controller.runtime.composition import Controller
from controller.runtime.controllers import record_controller_start

__all__ = ["BootstrapResult", "bootstrap"]


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """What the first start created (``generated_password`` only when it made one up)."""

    created_admin: bool
    username: str
    generated_password: str | None


def _write_credentials(path: Path, username: str, password: str) -> None:
    """Write the generated credentials durably (mode 0600, replacing any file there atomically)."""
    write_private_file(path, f"username={username}\npassword={password}\n".encode())


def _digest_stored_tokens(ctx: WriteContext) -> None:
    """Sessions stored by a version that kept tokens as sent now keep only their digests, as new ones do."""
    for row in list(ctx.txn.scan(API_SESSIONS)):
        if "token" in row:
            kept = {k: v for k, v in row.items() if k != "token"}
            ctx.txn.put(API_SESSIONS, {**kept, TOKEN_DIGEST: token_digest(str(row["token"]))})


async def bootstrap(controller: Controller) -> BootstrapResult:
    """Create what a new database needs; a no-op on a database that has it."""
    settings = controller.settings
    with controller.domain.read() as ctx:
        needs_admin = ctx.txn.meta("defaultAdminId") is None
    generated = None
    password_hash = None
    if needs_admin:
        password = settings.admin_password
        if password is None:
            generated = password = secrets.token_urlsafe(18)
        # Hashing costs tens of milliseconds: only on the start that creates the admin, off the Trio thread.
        password_hash = await controller.hashing.hash(password)
    registry = controller.registry
    clustered = controller.cluster is not None

    def seed(ctx: WriteContext) -> bool:
        _digest_stored_tokens(ctx)
        for resource in registry.resources.values():
            for row in resource.seed:
                if not ctx.txn.exists(resource.kind, row["id"]):
                    ctx.txn.put(resource.kind, {"createdAt": "1970-01-01T00:00:00.000Z",
                                                "updatedAt": "1970-01-01T00:00:00.000Z", "tags": {},
                                                "isSystem": True, **row})
        if not ctx.txn.exists("auth-policies", "default"):
            policy = create_row(ctx, registry["auth-policies"], DEFAULT_AUTH_POLICY, None, row_id="default")
            ctx.txn.put("auth-policies", {**policy, "isSystem": True})
        # The config types endpoints read (intercept.v1, host.v1, ...), each unless one of its id or name exists.
        seed_config_types(ctx)
        if not clustered:  # a cluster's nodes are listed from their membership records instead
            record_controller_start(ctx)
        if ctx.txn.meta("defaultAdminId") is not None or password_hash is None:
            return False
        admin = create_row(ctx, registry["identities"],
                           {"name": "Default Admin", "type": "Default", "isAdmin": True}, None)
        ctx.txn.put("identities", {**admin, "isDefaultAdmin": True})
        body: dict[str, Any] = {"identityId": admin["id"], "method": "updb", "username": settings.admin_username,
                                "_passwordHash": password_hash}
        create_row(ctx, registry["authenticators"], body, None)
        ctx.txn.set_meta("defaultAdminId", admin["id"])
        return True

    if generated is not None:
        # On disk before the admin is: a crash between the two leaves a file naming a password that never took
        # (the next start makes the admin and the file again), never an admin whose password nobody has.
        _write_credentials(settings.data_dir / "admin-credentials", settings.admin_username, generated)
    created = await controller.domain.write(seed)
    return BootstrapResult(created, settings.admin_username, generated if created else None)
