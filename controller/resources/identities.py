"""Identities and identity types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.clock import format_time
from controller.data.present import entity_ref
from controller.errors import ApiError, FieldError
from controller.model.field import (
    ATTRIBUTES,
    NAME,
    REQUIRED_CU,
    Field,
    Mode,
    bool_field,
    int_field,
    object_field,
    string_field,
)
from controller.model.spec import Hooks, ReadContext, Resource, WriteContext
from controller.resources.authenticators import identity_authenticators
from controller.resources.enrollments import IDENTITY_METHODS, identity_enrollments, request_enrollment
from controller.resources.identity_trace import TRACE_FIELD
from controller.resources.service_configs import CHANGED_AT_FIELD
from storage.zitiql import FieldType

__all__ = ["IDENTITIES", "IDENTITY_TYPES", "identity_disabled"]

TYPES = ("User", "Device", "Service", "Router", "Default")
PRECEDENCES = ["default", "required", "failed"]
_ENTITY_REF: dict[str, Any] = {"type": "object", "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "entity": {"type": "string"}, "_links": {"type": "object"}}}
_FLAG: dict[str, Any] = {"type": "boolean"}
_OBJECT: dict[str, Any] = {"type": "object"}


def identity_disabled(row: Mapping[str, Any], now: float) -> bool:
    """Disabled while ``disabledAt`` is set and ``disabledUntil`` is null (indefinite) or still ahead of ``now``
    (epoch seconds)."""
    if not row.get("disabledAt"):
        return False
    until = row.get("disabledUntil")
    return until is None or until > format_time(now)


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    if not row.get("authPolicyId"):
        row["authPolicyId"] = "default"
        if not ctx.txn.exists("auth-policies", "default"):
            raise FieldError("authPolicyId", "auth policy not found", "default")
    if row.get("externalId") == "":
        row["externalId"] = None
    if old is not None and old.get("isDefaultAdmin"):
        # The default admin stays an admin: losing it would lock every operator out.
        row["isDefaultAdmin"] = True
        row["isAdmin"] = True


def _before_delete(ctx: WriteContext, row: Mapping[str, Any]) -> None:
    if row.get("isDefaultAdmin"):
        raise ApiError("ENTITY_CAN_NOT_BE_DELETED")


def _after_write(ctx: WriteContext, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
    if new is None and old is not None:
        ctx.txn.delete("mfa", old["id"])  # the MFA enrolment (keyed by identity id) goes with its identity


def _after_create(ctx: WriteContext, row: Mapping[str, Any], body: Mapping[str, Any]) -> None:
    """``enrollment: {ott | ottca | updb}`` on create makes one enrollment, the first of ott, ottca, updb asked
    for (as the reference: several in one body make only one)."""
    requested = body.get("enrollment") or {}
    for method in IDENTITY_METHODS:
        value = requested.get(method)
        if value is None or value is False or (method != "ott" and not value):
            continue
        request_enrollment(ctx, row["id"], method, None, value if method == "ottca" else None,
                           value if method == "updb" else None)
        return


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["typeId"] = row.get("type", "Default")
    out["type"] = entity_ref(ctx, "identity-types", out["typeId"])
    out["disabled"] = identity_disabled(row, ctx.now)
    out.setdefault("disabledAt", None)
    out.setdefault("disabledUntil", None)
    out["authenticators"] = identity_authenticators(ctx, row["id"])
    out["enrollment"] = identity_enrollments(ctx, row["id"])
    out["hasApiSession"] = bool(ctx.txn.ids_by_ref("api-sessions", "identityId", row["id"]))
    out["isMfaEnabled"] = bool((ctx.txn.get("mfa", row["id"]) or {}).get("isVerified"))
    out.setdefault("envInfo", {})
    out.setdefault("sdkInfo", {})
    out["hasEdgeRouterConnection"] = False
    out["hasRouterConnection"] = False


IDENTITIES = Resource(
    kind="identities", singular="identity", op_name="Identity", op_plural="Identities", tag="Identity",
    body_name="identity",
    fields=(
        NAME,
        Field("type", {"type": "string", "enum": list(TYPES)}, required=REQUIRED_CU, default="Default",
              filter=FieldType.STRING),
        bool_field("isAdmin", required=REQUIRED_CU, default=False),
        ATTRIBUTES,
        bool_field("isDefaultAdmin", writable=frozenset(), default=False),
        string_field("authPolicyId", nullable=True, default="default", ref="auth-policies", ref_name="authPolicy"),
        string_field("externalId", nullable=True, unique=True, default=None),
        int_field("defaultHostingCost", minimum=0, maximum=65535, default=0),
        Field("defaultHostingPrecedence", {"type": "string", "enum": PRECEDENCES}, default="default"),
        object_field("serviceHostingCosts", {"type": "object", "additionalProperties":
                                             {"type": "integer", "minimum": 0, "maximum": 65535}}, default=dict,
                     ids_of="services"),
        object_field("serviceHostingPrecedences", {"type": "object", "additionalProperties":
                                                   {"type": "string", "enum": PRECEDENCES}}, default=dict,
                     ids_of="services"),
        object_field("appData", nullable=True, default=dict),
        object_field("enrollment", {"type": "object", "properties": {
            "ott": {"type": "boolean"}, "ottca": {"type": "string"}, "updb": {"type": "string"}}},
            writable=frozenset({Mode.CREATE}), stored=False),
        string_field("disabledAt", writable=frozenset(), default=None, filterable=False),
        string_field("disabledUntil", writable=frozenset(), default=None, filterable=False),
        TRACE_FIELD,  # PUT /identities/{id}/trace (controller/resources/identity_trace.py)
        CHANGED_AT_FIELD,  # its service config overrides changed (controller/resources/service_configs.py)
    ),
    role_attributes_path="identity-role-attributes",
    role_filter=True,
    hooks=Hooks(validate=_validate, before_delete=_before_delete, after_write=_after_write,
                after_create=_after_create, present=_present),
    errors={"delete": (400,)},  # the default admin
    # What _present adds, and ``type``, which answers show as a reference to the identity type (its id in typeId).
    presented={"type": _ENTITY_REF, "typeId": {"type": "string", "enum": list(TYPES)}, "disabled": _FLAG,
               "authenticators": _OBJECT, "enrollment": _OBJECT, "hasApiSession": _FLAG, "isMfaEnabled": _FLAG,
               "envInfo": _OBJECT, "sdkInfo": _OBJECT, "hasEdgeRouterConnection": _FLAG, "hasRouterConnection": _FLAG},
)

IDENTITY_TYPES = Resource(
    kind="identity-types", singular="identityType", op_name="IdentityType", op_plural="IdentityTypes",
    tag="Identity", body_name="identityType",
    fields=(string_field("name"),),
    operations=frozenset({"list", "detail"}),
    admin_only=False,
    seed=tuple({"id": t, "name": t} for t in TYPES),
)
