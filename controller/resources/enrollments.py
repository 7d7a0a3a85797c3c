"""Enrollments: one-time tokens with which an identity or a router obtains its first credential.

An enrollment belongs to one subject (an identity, an edge router or a transit router) and names its method: ``ott``
(a certificate signed by the controller's CA), ``ottca`` (a certificate of a third-party CA), ``updb`` (a password)
for identities, ``erott``/``trott`` for edge and transit routers. A subject has at most one enrollment per method.
The stored row holds what stands for its token (a nonce and the token's digest, never the token: see
``controller/authentication/enrollment_jwt.py``) and its expiry; the token and the JWT a client enrols with are
derived from them when the row is shown (``ReadContext.env``), so refreshing an enrollment (a new token and expiry)
changes its JWT too.

Enrollments are created by identity and router creates, by ``POST /enrollments``, and by re-enrolling an
authenticator or a router; the enrolment itself (``controller/authentication/enrollment.py``) consumes one in the
same write that creates the credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.clock import format_time, parse_time
from controller.data.present import entity_ref
from controller.data.write_path import create_row, put_row
from controller.errors import ApiError, field_cause, nested_cause, not_found
from controller.model.field import CREATE_ONLY, Field, Mode, string_field
from controller.model.spec import EnrollmentSecrets, Hooks, ReadContext, Resource, WriteContext
from storage.zitiql import FieldType

__all__ = [
    "CREATE_SCHEMA",
    "ENROLLMENTS",
    "ENROLLMENT_SECONDS",
    "IDENTITY_METHODS",
    "REFRESH_SCHEMA",
    "ROUTER_KINDS",
    "SUBJECT_FIELDS",
    "add_enrollment",
    "enrollment_claims",
    "identity_enrollments",
    "refresh_enrollment",
    "request_enrollment",
    "start_router_enrollment",
]

ENROLLMENT_SECONDS = 180 * 60
"""Default lifetime of an enrollment made without an explicit expiry (the reference's default)."""

IDENTITY_METHODS = ("ott", "ottca", "updb")
"""The methods an identity enrolls with, in the order an identity create with several picks them."""

SUBJECT_FIELDS = {"identityId": "identities", "edgeRouterId": "edge-routers", "transitRouterId": "routers"}
"""The field naming an enrollment's subject, and the subject's kind."""

ROUTER_KINDS: Mapping[str, tuple[str, str]] = {"edge-routers": ("erott", "edgeRouterId"),
                                              "routers": ("trott", "transitRouterId")}
"""For each router kind: its enrollment method and the enrollment field naming the router."""

CREATE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["method", "identityId", "expiresAt"],
    "properties": {"method": {"type": "string", "enum": list(IDENTITY_METHODS)}, "identityId": {"type": "string"},
                   "expiresAt": {"type": "string", "format": "date-time"},
                   "caId": {"type": ["string", "null"]}, "username": {"type": ["string", "null"]}},
}
"""The body of ``POST /enrollments``."""

REFRESH_SCHEMA: dict[str, Any] = {"type": "object", "required": ["expiresAt"],
                                  "properties": {"expiresAt": {"type": "string", "format": "date-time"}}}
"""The body of ``POST /enrollments/{id}/refresh`` and of the re-enroll operations."""

TOKEN_NONCE = "_tokenNonce"
TOKEN_DIGEST = "_tokenSha256"
"""The internal row keys that stand for an enrollment's token."""

_CLAIM_SUBJECTS = ("identityId", "edgeRouterId", "transitRouterId")


def enrollment_claims(row: Mapping[str, Any], token: str, issuer: str) -> dict[str, Any]:
    """The claims of an enrollment's JWT: method, issuer (the controller's URL), subject (the identity or router
    id), token and expiry, as OpenZiti endpoints read them."""
    subject = next((row[name] for name in _CLAIM_SUBJECTS if row.get(name)), "")
    return {"em": row["method"], "ctrls": None, "iss": issuer, "sub": subject, "jti": token, "aud": [""],
            "exp": int(parse_time(row["expiresAt"]))}


def _secrets(ctx: ReadContext) -> EnrollmentSecrets:
    if ctx.env is None:
        raise RuntimeError("enrollments need the controller's keys (ReadContext.env)")
    return ctx.env.enrollments


def _invalid(field_name: str, value: Any, reason: str) -> ApiError:
    """An enrollment request naming something that does not exist or cannot be, as the reference words it."""
    return ApiError("REFERENCED_ENTITY_NOT_FOUND",
                    nested_cause(f"the value '{value}' for '{field_name}' is invalid: {reason}"))


def _future(ctx: WriteContext, expires_at: Any) -> float:
    try:
        moment = parse_time(str(expires_at))
    except ValueError:
        raise _invalid("expiresAt", expires_at, "expiresAt must be a date-time") from None
    if moment <= ctx.now:
        raise _invalid("expiresAt", expires_at, "expiresAt must be in the future")
    return moment


def add_enrollment(ctx: WriteContext, method: str, subject_field: str, subject_id: str, expires_at: float, *,
                   ca_id: str | None = None, username: str | None = None) -> dict[str, Any]:
    """Store a new enrollment with a fresh token; returns the stored row.

    Raises:
        ApiError: 409 ENROLLMENT_EXISTS when the subject already has an enrollment of ``method``.
    """
    for other_id in ctx.txn.ids_by_ref("enrollments", subject_field, subject_id):
        other = ctx.txn.get("enrollments", other_id)
        if other is not None and other.get("method") == method:
            raise ApiError("ENROLLMENT_EXISTS", field_cause("method", "an enrollment of this method exists", method))
    body = {"method": method, subject_field: subject_id, "expiresAt": format_time(expires_at), "caId": ca_id,
            "username": username, **_secrets(ctx).new_token()}
    return create_row(ctx, ctx.registry["enrollments"], body, None)


def start_router_enrollment(ctx: WriteContext, kind: str, router_id: str) -> dict[str, Any]:
    """A new enrollment for a router of ``kind`` (``edge-routers`` or ``routers``), valid for the default
    lifetime; returns it."""
    method, subject_field = ROUTER_KINDS[kind]
    return add_enrollment(ctx, method, subject_field, router_id, ctx.now + ENROLLMENT_SECONDS)


def request_enrollment(ctx: WriteContext, identity_id: str, method: str, expires_at: Any, ca_id: Any,
                       username: Any) -> dict[str, Any]:
    """An identity enrollment asked for by an admin (``POST /enrollments`` or an identity create), checked as the
    reference checks it: 400 REFERENCED_ENTITY_NOT_FOUND for an unknown identity or CA, an expiry not in the
    future, an ``ottca`` without a CA or an ``updb`` without a username; 409 ENROLLMENT_EXISTS for a second
    enrollment of one method."""
    if not ctx.txn.exists("identities", identity_id):
        raise _invalid("identityId", identity_id, "identity not found")
    moment = _future(ctx, expires_at) if expires_at is not None else ctx.now + ENROLLMENT_SECONDS
    if method == "ottca":
        ca = ctx.txn.get("cas", str(ca_id)) if ca_id else None
        if ca is None:
            raise _invalid("caId", ca_id, "ca not found")
        if not ca.get("isOttCaEnrollmentEnabled"):
            raise _invalid("caId", ca_id, "ca does not allow ottca enrollment")
    else:
        ca_id = None
    if method == "updb":
        if not isinstance(username, str) or not username.strip():
            raise _invalid("username", username, "username not provided")
        if ctx.txn.by_unique("authenticators", "username", username) is not None:
            raise ApiError("COULD_NOT_VALIDATE", field_cause("username", "username is must be unique", username))
    else:
        username = None
    return add_enrollment(ctx, method, "identityId", identity_id, moment, ca_id=ca_id, username=username)


def refresh_enrollment(ctx: WriteContext, enrollment_id: str, expires_at: float) -> dict[str, Any]:
    """A new token and expiry (epoch seconds) for a stored enrollment, outstanding or expired: the old JWT stops
    working. Returns the stored row."""
    old = ctx.txn.get("enrollments", enrollment_id)
    if old is None:
        raise not_found("enrollment", enrollment_id)
    row = {**old, **_secrets(ctx).new_token(), "expiresAt": format_time(expires_at),
           "updatedAt": format_time(ctx.now)}
    return put_row(ctx, ctx.registry["enrollments"], row, old, Mode.PATCH)


def identity_enrollments(ctx: ReadContext, identity_id: str) -> dict[str, Any]:
    """What an identity's detail shows under ``enrollment``: its outstanding enrollments by method."""
    out: dict[str, Any] = {}
    for enrollment_id in ctx.txn.ids_by_ref("enrollments", "identityId", identity_id):
        row = ctx.txn.get("enrollments", enrollment_id)
        if row is None or row.get("method") not in IDENTITY_METHODS:
            continue
        secrets = _secrets(ctx)
        entry: dict[str, Any] = {"id": row["id"], "jwt": secrets.enrollment(row), "token": secrets.token(row),
                                 "expiresAt": row["expiresAt"]}
        if row["method"] == "ottca":
            entry["caId"] = row.get("caId")
            entry["ca"] = entity_ref(ctx, "cas", row.get("caId"))
        out[row["method"]] = entry
    return out


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    secrets = _secrets(ctx)
    out["token"] = secrets.token(row)
    out["jwt"] = secrets.enrollment(row)
    for name in (*SUBJECT_FIELDS, "caId", "username"):
        out.setdefault(name, None)


ENROLLMENTS = Resource(
    kind="enrollments", singular="enrollment", op_name="Enrollment", op_plural="Enrollments", tag="Enrollment",
    body_name="enrollment",
    fields=(
        # Identities' methods and routers' (CREATE_SCHEMA limits what a client may ask for).
        Field("method", {"type": "string", "enum": [*IDENTITY_METHODS, *(m for m, _ in ROUTER_KINDS.values())]},
              required=CREATE_ONLY, writable=CREATE_ONLY, filter=FieldType.STRING),
        string_field("identityId", required=CREATE_ONLY, writable=CREATE_ONLY, ref="identities",
                     ref_name="identity", on_delete="cascade", default=None),
        string_field("edgeRouterId", writable=CREATE_ONLY, ref="edge-routers", ref_name="edgeRouter",
                     on_delete="cascade", default=None),
        string_field("transitRouterId", writable=CREATE_ONLY, ref="routers", ref_name="transitRouter",
                     on_delete="cascade", default=None),
        string_field("caId", writable=CREATE_ONLY, nullable=True, ref="cas", ref_name="ca", on_delete="cascade",
                     default=None),
        string_field("username", writable=CREATE_ONLY, nullable=True, default=None),
        Field("expiresAt", {"type": "string", "format": "date-time"}, required=CREATE_ONLY, writable=CREATE_ONLY,
              filter=FieldType.DATETIME),
        # The token is derived (EnrollmentSecrets.token): what stands for it is stored, never it.
        string_field("token", writable=frozenset(), stored=False, filterable=False),
        Field(TOKEN_NONCE, {"type": "string"}, writable=CREATE_ONLY),
        Field(TOKEN_DIGEST, {"type": "string"}, writable=CREATE_ONLY, unique=True),
    ),
    # Creates and refreshes are enrollment rules of their own (CREATE_SCHEMA, request_enrollment); the fields
    # writable on create above are what those rules and the enrolling subjects' creates set.
    operations=frozenset({"list", "detail", "delete"}),
    create_schema=CREATE_SCHEMA,  # POST /enrollments (controller/authentication/enrollment_admin.py)
    hooks=Hooks(present=_present),
)
