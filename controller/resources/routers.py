"""Edge routers and (transit) routers.

No router connects to this controller yet, so every router reports the run-time state of one that has never
connected: offline, sync status ``SYNC_UNKNOWN``, no hostname, protocols or version. A new router is unverified and
gets an enrollment (``erott`` for edge routers, ``trott`` for transit routers) with the default lifetime; its
detail shows that enrollment's token, JWT and dates until the router enrols
(``controller/authentication/router_enrollment.py``), after which it is verified and shows its client certificate
and that certificate's fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.model.field import ATTRIBUTES, COST, NAME, Field, Mode, bool_field, object_field, string_field
from controller.model.spec import AfterCreate, Hooks, Present, ReadContext, Resource, WriteContext
from controller.resources.enrollments import ROUTER_KINDS, start_router_enrollment

__all__ = ["EDGE_ROUTERS", "ROUTERS"]

_NONE: frozenset[Mode] = frozenset()
_ENROLLMENT_FIELDS = ("enrollmentToken", "enrollmentJwt", "enrollmentCreatedAt", "enrollmentExpiresAt")
_VERSION_INFO = {"os": "", "version": "", "arch": "", "buildDate": "", "revision": ""}
# A computed field of the presentation that the OpenAPI document declares (the admin CLI's tables show it).
_PRESENTED: dict[str, Any] = {"isOnline": {"type": "boolean"}}

# Request fields that accept null; null stores the default, as the reference maps a missing value to its zero.
_NULL_DEFAULTS: dict[str, Any] = {"cost": 0, "disabled": False, "noTraversal": False}


def _state_fields() -> tuple[Field, ...]:
    """Fields the controller maintains: verification, and the client certificate of an enrolled router (its
    fingerprint is how ``/enroll/extend/router`` recognises the router)."""
    return (
        bool_field("isVerified", writable=_NONE, default=False),
        string_field("fingerprint", writable=_NONE, unique=True, default=None),
        string_field("certPem", writable=_NONE, default=None, filterable=False),
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


def _enrolling(kind: str) -> AfterCreate:
    """The create hook of a router kind: every new router gets its enrollment."""
    def after_create(ctx: WriteContext, row: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        start_router_enrollment(ctx, kind, row["id"])
    return after_create


def _presenter(kind: str) -> Present:
    """The presentation of a router kind: the state of a router that has never connected, and its pending
    enrollment until it enrols."""
    subject_field = ROUTER_KINDS[kind][1]

    def present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
        out["isOnline"] = False
        out["fingerprint"] = row.get("fingerprint") or ""
        out.setdefault("certPem", None)
        out["unverifiedCertPem"] = None
        out["unverifiedFingerprint"] = None
        for name in _ENROLLMENT_FIELDS:
            out[name] = None
        for enrollment_id in () if row.get("isVerified") else ctx.txn.ids_by_ref("enrollments", subject_field,
                                                                                  row["id"]):
            enrollment = ctx.txn.get("enrollments", enrollment_id)
            if enrollment is not None:
                if ctx.env is not None:
                    out["enrollmentToken"] = ctx.env.enrollments.token(enrollment)
                    out["enrollmentJwt"] = ctx.env.enrollments.enrollment(enrollment)
                out["enrollmentCreatedAt"] = enrollment["createdAt"]
                out["enrollmentExpiresAt"] = enrollment["expiresAt"]
        if kind == "edge-routers":
            out["hostname"] = ""
            out["supportedProtocols"] = {}
            out["syncStatus"] = "SYNC_UNKNOWN"
            # The spec requires the version properties at the top level; the reference controller answers them
            # in versionInfo. Both, so that clients of either decode them.
            out.update(_VERSION_INFO)
            out["versionInfo"] = dict(_VERSION_INFO)
            out["roleAttributes"] = row.get("roleAttributes") or []
            out["appData"] = row.get("appData") or {}
    return present


ROUTERS = Resource(
    kind="routers", singular="router", op_name="Router", op_plural="Routers", tag="Router", body_name="router",
    fields=_ROUTER_FIELDS,
    aliases=("transit-routers",),
    hooks=Hooks(validate=_validate, after_create=_enrolling("routers"), present=_presenter("routers")),
    presented=_PRESENTED,
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
    hooks=Hooks(validate=_validate, after_create=_enrolling("edge-routers"),
                present=_presenter("edge-routers")),
    shapes_access=True,
    presented=_PRESENTED,
)
