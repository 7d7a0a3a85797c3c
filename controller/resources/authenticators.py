"""Authenticators: the credentials an identity logs in with, at most one per method.

``updb`` holds a username and a scrypt hash of the password (the clear text never reaches storage). ``cert`` holds a
client certificate and its SHA-1 fingerprint, the key of certificate login: one the controller's CA issued at
enrolment, or one of a verified third-party CA. A certificate being replaced through extension waits, hidden, in
``_unverifiedCertPem``/``_unverifiedFingerprint`` until the client proves it holds it; the old one works until then.

Deleting an authenticator ends the API sessions it authenticated. Only ``updb`` authenticators can be updated (a
username and a password); a certificate is replaced by extension or re-enrolment, never edited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.certificates.client_certificates import issuing_ca, network_issued, verified_ca
from controller.certificates.issuing import fingerprint, load_certificates
from controller.data.write_path import delete_row
from controller.errors import ApiError, FieldError, field_cause
from controller.model.field import CREATE_ONLY, Field, Mode, string_field
from controller.model.spec import Hooks, ReadContext, Resource, WriteContext
from storage.zitiql import FieldType

__all__ = ["AUTHENTICATORS", "METHODS", "PASSWORD", "USERNAME", "identity_authenticators"]

METHODS = ("updb", "cert")
USERNAME: dict[str, Any] = {"type": "string", "minLength": 4, "maxLength": 100}
PASSWORD: dict[str, Any] = {"type": "string", "minLength": 5, "maxLength": 100}
_NONE: frozenset[Mode] = frozenset()
_CERT_ONLY = ("certPem", "fingerprint")


def _one_per_method(ctx: WriteContext, row: Mapping[str, Any]) -> None:
    for other_id in ctx.txn.ids_by_ref("authenticators", "identityId", row["identityId"]):
        other = ctx.txn.get("authenticators", other_id)
        if other_id != row["id"] and other is not None and other.get("method") == row["method"]:
            raise ApiError("MAX_AUTHENTICATOR_METHODS_REACHED",
                           field_cause("method", f"the identity already has a {row['method']} authenticator",
                                       row["method"]))


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    method = row.get("method")
    if old is not None and method != "updb":
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR",
                       field_cause("method", "only updb authenticators can be updated", method))
    if old is None:
        identity = ctx.txn.get("identities", row["identityId"]) or {}
        if identity.get("type") == "Router":
            raise FieldError("identityId", "may not create authenticators for router identities", row["identityId"])
        _one_per_method(ctx, row)
    if method == "cert":
        _store_certificate(ctx, row)
        return
    if row.get("certPem"):
        raise FieldError("certPem", "certPem is only for method cert", "<certificate>")
    if not row.get("username"):
        raise FieldError("username", "username is required", None)
    if not row.get("_passwordHash"):
        raise FieldError("password", "password is required", None)


def _store_certificate(ctx: WriteContext, row: dict[str, Any]) -> None:
    """A cert authenticator made by an admin: its one certificate must be one that the controller's CA or a
    verified third-party CA issued (whatever its validity dates)."""
    if row.get("username") or row.get("_passwordHash"):
        raise FieldError("username", "username and password are only for method updb", row.get("username"))
    if not row.get("certPem"):
        raise FieldError("certPem", "certPem is required", None)
    certificates = load_certificates(str(row["certPem"]), "certPem")
    if len(certificates) != 1:
        raise ApiError("COULD_NOT_PARSE_PEM_BLOCK",
                       field_cause("certPem", "client pem must be exactly one certificate", len(certificates)))
    certificate = certificates[0]
    if ctx.env is None:
        raise RuntimeError("certificate authenticators need the controller's PKI (WriteContext.env)")
    if not network_issued(certificate, ctx.env.network_ca_pem) and issuing_ca(
            ctx.txn, certificate, verified_ca) is None:
        raise FieldError("certPem", "the certificate was not issued by the controller's CA or a verified CA",
                         "<certificate>")
    row["fingerprint"] = fingerprint(certificate)


def _after_write(ctx: WriteContext, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
    """An authenticator deleted takes the API sessions it authenticated with it."""
    if new is not None or old is None:
        return
    sessions = ctx.registry["api-sessions"]
    for session_id in ctx.txn.ids_by_fields("api-sessions", ("authenticatorId",), (old["id"],)):
        if ctx.txn.exists("api-sessions", session_id):
            delete_row(ctx, sessions, session_id)


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["_links"]["identities"] = {"href": f"./identities/{row['identityId']}"}
    if row.get("method") == "cert":
        out.pop("username", None)
    else:
        for name in _CERT_ONLY:
            out.pop(name, None)


def identity_authenticators(ctx: ReadContext, identity_id: str) -> dict[str, Any]:
    """What an identity's detail shows under ``authenticators``: ``updb`` with its username, ``cert`` with its
    fingerprint."""
    out: dict[str, Any] = {}
    for auth_id in ctx.txn.ids_by_ref("authenticators", "identityId", identity_id):
        auth = ctx.txn.get("authenticators", auth_id)
        if auth is None:
            continue
        if auth.get("method") == "updb":
            out["updb"] = {"id": auth_id, "username": auth.get("username")}
        elif auth.get("method") == "cert":
            out["cert"] = {"id": auth_id, "fingerprint": auth.get("fingerprint")}
    return out


AUTHENTICATORS = Resource(
    kind="authenticators", singular="authenticator", op_name="Authenticator", op_plural="Authenticators",
    tag="Authenticator", body_name="authenticator",
    fields=(
        string_field("identityId", required=CREATE_ONLY, writable=CREATE_ONLY, ref="identities",
                     ref_name="identity", on_delete="cascade"),
        Field("method", {"type": "string", "enum": list(METHODS)}, required=CREATE_ONLY, writable=CREATE_ONLY,
              filter=FieldType.STRING),
        Field("username", USERNAME, required=frozenset({Mode.UPDATE}), unique=True, filter=FieldType.STRING),
        # The clear password never reaches storage: the domain hashes it into _passwordHash.
        Field("password", PASSWORD, required=frozenset({Mode.UPDATE}), stored=False, hashed_into="_passwordHash"),
        Field("_passwordHash", {"type": "string"}),
        string_field("certPem", writable=CREATE_ONLY, filterable=False),
        string_field("fingerprint", writable=_NONE, unique=True, default=None),
        Field("_unverifiedCertPem", {"type": "string"}, default=None),
        Field("_unverifiedFingerprint", {"type": "string"}, default=None),
    ),
    hooks=Hooks(validate=_validate, after_write=_after_write, present=_present),
    # 409: a second authenticator of one method, a certificate another holds, a change to a certificate one.
    errors={"create": (409,), "update": (409,), "patch": (409,)},
)
