"""Edge routers and (transit) routers.

No router connects to this controller yet, so every router reports the run-time state of one that has never
connected: offline, sync status ``SYNC_UNKNOWN``, no hostname, protocols or version. A new router is unverified and
waits for enrollment: it gets an enrollment token that expires after :data:`ENROLLMENT_SECONDS`. The enrollment JWT
stays null until enrollment (which needs the controller's signing key) exists.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from controller.clock import format_time
from controller.resources.context import ReadContext, WriteContext
from controller.resources.fields import ATTRIBUTES, COST, NAME, bool_field, object_field, string_field
from controller.resources.spec import Field, Hooks, Mode, Resource

__all__ = ["EDGE_ROUTERS", "ENROLLMENT_SECONDS", "ROUTERS"]

ENROLLMENT_SECONDS = 180 * 60
"""Lifetime of a router's enrollment token (the reference's default router enrollment duration)."""

_NONE: frozenset[Mode] = frozenset()
_ENROLLMENT_FIELDS = ("enrollmentToken", "enrollmentCreatedAt", "enrollmentExpiresAt")
_VERSION_INFO = {"os": "", "version": "", "arch": "", "buildDate": "", "revision": ""}

# Request fields that accept null; null stores the default, as the reference maps a missing value to its zero.
_NULL_DEFAULTS: dict[str, Any] = {"cost": 0, "disabled": False, "noTraversal": False}


def _state_fields() -> tuple[Field, ...]:
    """Fields the controller maintains: verification, certificate fingerprint and the pending enrollment."""
    return (
        bool_field("isVerified", writable=_NONE, default=False),
        string_field("fingerprint", writable=_NONE, default=None),
        *(string_field(name, writable=_NONE, default=None, filterable=False) for name in _ENROLLMENT_FIELDS),
    )


_ROUTER_FIELDS: tuple[Field, ...] = (
    NAME,
    COST,
    bool_field("disabled", nullable=True, default=False),
    bool_field("noTraversal", nullable=True, default=False),
    *_state_fields(),
)


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    for name, default in _NULL_DEFAULTS.items():
        if row.get(name) is None:
            row[name] = default
    if "appData" in row and row["appData"] is None:
        row["appData"] = {}
    if old is None:
        row["enrollmentToken"] = str(uuid.uuid4())
        row["enrollmentCreatedAt"] = format_time(ctx.now)
        row["enrollmentExpiresAt"] = format_time(ctx.now + ENROLLMENT_SECONDS)


def _present_router(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["isOnline"] = False
    out["fingerprint"] = row.get("fingerprint") or ""
    out["unverifiedCertPem"] = None
    out["unverifiedFingerprint"] = None
    out["enrollmentJwt"] = None
    if row.get("isVerified"):
        # A verified router has completed its enrollment; nothing is pending any more.
        for name in _ENROLLMENT_FIELDS:
            out[name] = None


def _present_edge_router(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    _present_router(ctx, row, out)
    out["hostname"] = ""
    out["supportedProtocols"] = {}
    out["syncStatus"] = "SYNC_UNKNOWN"
    out["versionInfo"] = dict(_VERSION_INFO)
    out["certPem"] = None
    out["roleAttributes"] = row.get("roleAttributes") or []
    out["appData"] = row.get("appData") or {}


ROUTERS = Resource(
    kind="routers", singular="router", op_name="Router", op_plural="Routers", tag="Router", body_name="router",
    fields=_ROUTER_FIELDS,
    aliases=("transit-routers",),
    hooks=Hooks(validate=_validate, present=_present_router),
)

EDGE_ROUTERS = Resource(
    kind="edge-routers", singular="edgeRouter", op_name="EdgeRouter", op_plural="EdgeRouters", tag="Edge Router",
    body_name="edgeRouter",
    fields=(
        *_ROUTER_FIELDS,
        bool_field("isTunnelerEnabled", default=False),
        ATTRIBUTES,
        object_field("appData", nullable=True, default=dict),
    ),
    role_attributes_path="edge-router-role-attributes",
    role_filter=True,
    hooks=Hooks(validate=_validate, present=_present_edge_router),
    shapes_access=True,
)
