"""Third-party certificate authorities: CAs whose certificates identities may enrol and log in with.

A CA is created unverified with a random ``verificationToken``; its owner proves control of the CA key by sending a
certificate it signed whose common name is that token (``POST /cas/{id}/verify``). Only a verified CA takes part in
enrolment (``ottca``, automatic CA enrolment) and, when ``isAuthEnabled``, in certificate login. The certificate is
given once, on create, and is stored with its SHA-1 fingerprint, unique among CAs. Deleting a CA deletes the
authenticators and enrollments that depend on it (their reference fields cascade).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from controller.authentication.issuing import fingerprint, load_certificates
from controller.errors import FieldError
from controller.resources.context import WriteContext
from controller.resources.fields import NAME, REQUIRED_CU, STRING_LIST, bool_field, object_field, string_field
from controller.resources.spec import CREATE_ONLY, Field, Hooks, Mode, Resource
from controller.roles import check_attributes
from storage.query import FieldType

__all__ = ["CAS", "DEFAULT_NAME_FORMAT", "EXTERNAL_ID_CLAIM"]

DEFAULT_NAME_FORMAT = "[caName]-[commonName]"
"""How an identity enrolled through a CA is named unless the CA says otherwise (placeholders: ``[caName]``,
``[caId]``, ``[commonName]``, ``[requestedName]``, ``[identityId]``)."""

_NONE: frozenset[Mode] = frozenset()

EXTERNAL_ID_CLAIM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "location": {"type": ["string", "null"], "enum": ["COMMON_NAME", "SAN_URI", "SAN_EMAIL", None]},
        "matcher": {"type": ["string", "null"], "enum": ["ALL", "PREFIX", "SUFFIX", "SCHEME", None]},
        "matcherCriteria": {"type": ["string", "null"]},
        "parser": {"type": ["string", "null"], "enum": ["NONE", "SPLIT", None]},
        "parserCriteria": {"type": ["string", "null"]},
        "index": {"type": ["integer", "null"], "minimum": 0},
    },
}
"""Where in a client certificate a CA's identities carry their ``externalId`` (``controller/authentication/
external_id.py`` reads it)."""


def _ca_certificate(pem: Any) -> x509.Certificate:
    certificates = load_certificates(str(pem or ""), "certPem")
    if len(certificates) != 1:
        raise FieldError("certPem", "certPem must hold exactly one certificate", f"{len(certificates)} certificates")
    certificate = certificates[0]
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise FieldError("certPem", "certPem must be a CA certificate (basic constraints CA:TRUE)", "<certificate>")
    return certificate


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    row["identityRoles"] = check_attributes("identityRoles", row.get("identityRoles"))
    if not (row.get("identityNameFormat") or "").strip():
        row["identityNameFormat"] = DEFAULT_NAME_FORMAT
    if old is not None:
        return
    certificate = _ca_certificate(row.get("certPem"))
    row["fingerprint"] = fingerprint(certificate)
    if ctx.txn.by_unique("cas", "fingerprint", row["fingerprint"]) is not None:
        raise FieldError("certPem", "a CA with this certificate exists", row["fingerprint"])
    row["verificationToken"] = secrets.token_hex(8)
    row["isVerified"] = False


CAS = Resource(
    kind="cas", singular="ca", op_name="Ca", op_plural="Cas", tag="Certificate Authority", body_name="ca",
    fields=(
        NAME,
        string_field("certPem", required=CREATE_ONLY, writable=CREATE_ONLY, filterable=False),
        Field("identityRoles", STRING_LIST, required=REQUIRED_CU, default=list, filter=FieldType.SET),
        bool_field("isAuthEnabled", required=REQUIRED_CU, default=False),
        bool_field("isAutoCaEnrollmentEnabled", required=REQUIRED_CU, default=False),
        bool_field("isOttCaEnrollmentEnabled", required=REQUIRED_CU, default=False),
        string_field("identityNameFormat", required=frozenset({Mode.UPDATE}), nullable=True,
                     default=DEFAULT_NAME_FORMAT),
        object_field("externalIdClaim", EXTERNAL_ID_CLAIM, nullable=True, default=None),
        string_field("fingerprint", writable=_NONE, unique=True, default=None),
        string_field("verificationToken", writable=_NONE, default=None),
        bool_field("isVerified", writable=_NONE, default=False),
    ),
    hooks=Hooks(validate=_validate),
)
