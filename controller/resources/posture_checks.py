"""Posture checks (six types on the ``typeId`` discriminator) and posture check types.

Every check may be ``reportOnly`` (default false): evaluated like any other and its failures reported as events
(``posture`` ``wouldDeny``), but never refusing or revoking a session. Turning it off makes the check enforcing:
like any write to a posture check, that re-evaluates every identity with a session before the write is answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from controller.check_types.bodies import OS_TYPES, apply_aliases, normalize_check
from controller.errors import FieldError
from controller.model.field import ATTRIBUTES, NAME, Field, Mode, Variant, Variants, bool_field, int_field, string_field
from controller.model.spec import Hooks, ReadContext, Resource, WriteContext

__all__ = ["POSTURE_CHECKS", "POSTURE_CHECK_TYPES", "TYPE_NAMES"]

_OS_TYPE = {"type": "string", "enum": list(OS_TYPES)}
_STRINGS = {"type": "array", "items": {"type": "string"}}

TYPE_NAMES = {
    "OS": "Operating System Check",
    "PROCESS": "Process Check",
    "DOMAIN": "Windows Domain Check",
    "MAC": "MAC Address Check",
    "MFA": "MFA Check",
    "PROCESS_MULTI": "Process Multi Check",
}

_OPERATING_SYSTEMS = {
    "type": "array", "minItems": 1,
    "items": {"type": "object", "required": ["type", "versions"],
              "properties": {"type": _OS_TYPE, "versions": _STRINGS}},
}
_PROCESS = {
    "type": "object", "required": ["osType", "path"],
    "properties": {"osType": _OS_TYPE, "path": {"type": "string"}, "hashes": _STRINGS,
                   "signerFingerprint": {"type": "string"}},
}
_PROCESS_MULTI = {
    "type": "array", "minItems": 1,
    "items": {"type": "object", "required": ["osType", "path"],
              "properties": {"osType": _OS_TYPE, "path": {"type": "string"}, "hashes": _STRINGS,
                             "signerFingerprints": _STRINGS}},
}
_REQUIRED_CU = frozenset({Mode.CREATE, Mode.UPDATE})
_TYPE_VERSION = "1"

VARIANTS = Variants("typeId", (
    Variant("OS", (Field("operatingSystems", _OPERATING_SYSTEMS, required=_REQUIRED_CU),)),
    Variant("MAC", (Field("macAddresses", {**_STRINGS, "minItems": 1}, required=_REQUIRED_CU),)),
    Variant("DOMAIN", (Field("domains", {**_STRINGS, "minItems": 1}, required=_REQUIRED_CU),)),
    Variant("PROCESS", (Field("process", _PROCESS, required=_REQUIRED_CU),)),
    Variant("PROCESS_MULTI", (
        Field("semantic", {"type": "string", "enum": ["AllOf", "AnyOf"]}, required=_REQUIRED_CU),
        Field("processes", _PROCESS_MULTI, required=_REQUIRED_CU),
    )),
    Variant("MFA", (
        int_field("timeoutSeconds", default=-1, filterable=False),
        bool_field("promptOnWake", default=False),
        bool_field("promptOnUnlock", default=False),
        bool_field("ignoreLegacyEndpoints", default=False, filterable=False),
    )),
))


def _prepare(body: dict[str, Any], mode: Mode) -> dict[str, Any]:
    """Accept the admin guide's spellings and OS names in any case before schema validation; the reference spelling
    is what gets stored (the rules live in :func:`controller.check_types.bodies.apply_aliases`).

    A null in a PATCH of a posture check is ignored, as the reference's patch mapper does, so that no check field
    (``roleAttributes`` included) can be cleared by null.
    """
    if mode is Mode.PATCH:
        body = {k: v for k, v in body.items() if v is not None}
    type_id = body.get("typeId")
    return apply_aliases(body, type_id) if isinstance(type_id, str) else body


def _normalize(body: dict[str, Any], mode: Mode) -> dict[str, Any]:
    type_id = body.get("typeId")
    if type_id is None:
        return body
    return normalize_check(body, str(type_id), partial=mode is Mode.PATCH)


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    row["version"] = 1
    if old is not None and old.get("typeId") != row.get("typeId"):
        # A check keeps its type (the reference never carries typeId into an update): a PATCH could not supply the
        # new type's required fields, and a check's type is what policies and clients rely on.
        raise FieldError("typeId", f"a posture check's type cannot change from {old.get('typeId')}",
                         row.get("typeId"))


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out.setdefault("version", 1)
    out["isSystem"] = False


def _present_type(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    # A posture check type's version is a string (a check's own is an integer); rows seeded by earlier releases
    # hold the number 1, so whatever is stored is shown as a string.
    out["version"] = str(row.get("version", _TYPE_VERSION))


POSTURE_CHECKS = Resource(
    kind="posture-checks", singular="postureCheck", op_name="PostureCheck", op_plural="PostureChecks",
    tag="Posture Checks", body_name="postureCheck",
    fields=(
        NAME,
        replace(ATTRIBUTES, filter=None),  # the reference does not filter checks by attributes; roleFilter does
        # Tollgate's own: a report-only check is evaluated and its failures reported (events), never enforced.
        # Clients of the reference spec leave it out, and get enforcing checks as before.
        bool_field("reportOnly", default=False),
    ),
    variants=VARIANTS,
    role_attributes_path="posture-check-role-attributes",
    role_filter=True,
    hooks=Hooks(prepare=_prepare, normalize=_normalize, validate=_validate, present=_present),
    shapes_access=True,
)

POSTURE_CHECK_TYPES = Resource(
    kind="posture-check-types", singular="postureCheckType", op_name="PostureCheckType",
    op_plural="PostureCheckTypes", tag="Posture Checks", body_name="postureCheckType",
    fields=(string_field("name"), Field("operatingSystems", {"type": "array"}, writable=frozenset())),
    operations=frozenset({"list", "detail"}),
    admin_only=False,
    seed=tuple({"id": type_id, "name": name, "operatingSystems": [], "version": _TYPE_VERSION}
               for type_id, name in TYPE_NAMES.items()),
    hooks=Hooks(present=_present_type),
)
