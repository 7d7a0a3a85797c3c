"""External JWT signers: issuers whose JWTs identities may authenticate with.

A signer verifies tokens either with one PEM certificate (``certPem``) or with keys from a JWKS endpoint
(``jwksEndpoint``): exactly one of the two. The certificate's common name, SHA-1 fingerprint and validity window are
computed when it is written and stored beside it, so they can be filtered on; without a certificate the common name
is empty, the fingerprint null and both instants the zero time, as the reference reports them. A signer that an
auth policy names cannot be deleted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from controller.clock import format_time
from controller.errors import ApiError, FieldError, field_cause
from controller.model.field import NAME, REQUIRED_CU, Field, Mode, bool_field, string_field
from controller.model.spec import Hooks, ReadContext, Resource, WriteContext
from storage.zitiql import FieldType

__all__ = ["EXTERNAL_JWT_SIGNERS"]

_NONE: frozenset[Mode] = frozenset()
_ZERO_TIME = "0001-01-01T00:00:00.000Z"
_DEFAULT_CLAIMS_PROPERTY = "sub"


def _blank_to_none(row: dict[str, Any], *names: str) -> None:
    for name in names:
        value = row.get(name)
        if isinstance(value, str) and not value.strip():
            row[name] = None


def _check_url(row: Mapping[str, Any], name: str) -> None:
    value = row.get(name)
    if value is None:
        return
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FieldError(name, f"{name} must be an absolute http or https URL", value)


def _certificate_facts(pem: str) -> dict[str, Any]:
    """Common name, fingerprint and validity of a PEM holding exactly one certificate."""
    try:
        certs = x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        certs = []
    if len(certs) != 1:
        raise ApiError("INVALID_CERT_PEM", field_cause("certPem", "certPem must hold exactly one PEM certificate",
                                                       f"{len(certs)} certificates"))
    cert = certs[0]
    names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return {
        "commonName": str(names[0].value) if names else "",
        "fingerprint": hashlib.sha1(cert.public_bytes(Encoding.DER)).hexdigest(),
        "notBefore": _instant(cert.not_valid_before_utc),
        "notAfter": _instant(cert.not_valid_after_utc),
    }


def _instant(moment: datetime) -> str:
    return format_time(moment.timestamp())


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    _blank_to_none(row, "certPem", "jwksEndpoint", "externalAuthUrl", "audience", "kid")
    if not (row.get("issuer") or "").strip():
        raise FieldError("issuer", "issuer must not be empty", row.get("issuer"))
    if not row.get("claimsProperty") or not str(row["claimsProperty"]).strip():
        row["claimsProperty"] = _DEFAULT_CLAIMS_PROPERTY
    if row.get("useExternalId") is None:
        row["useExternalId"] = False
    cert_pem, jwks = row.get("certPem"), row.get("jwksEndpoint")
    if cert_pem is None and jwks is None:
        raise FieldError("certPem", "jwksEndpoint or certPem is required", None)
    if cert_pem is not None and jwks is not None:
        raise FieldError("jwksEndpoint", "only one of jwksEndpoint or certPem may be defined", jwks)
    _check_url(row, "jwksEndpoint")
    _check_url(row, "externalAuthUrl")
    if cert_pem is not None:
        row.update(_certificate_facts(cert_pem))
    else:
        row.update({"commonName": "", "fingerprint": None, "notBefore": None, "notAfter": None})


def _before_delete(ctx: WriteContext, row: Mapping[str, Any]) -> None:
    signer_id = row["id"]
    allowing, requiring = [], []
    for policy in ctx.txn.scan("auth-policies"):
        if signer_id in (((policy.get("primary") or {}).get("extJwt") or {}).get("allowedSigners") or []):
            allowing.append(policy["id"])
        if (policy.get("secondary") or {}).get("requireExtJwtSigner") == signer_id:
            requiring.append(policy["id"])
    for field_name, users in (("primary.extJwt.allowedSigners", allowing),
                              ("secondary.requireExtJwtSigner", requiring)):
        if users:
            raise ApiError("CAN_NOT_DELETE_REFERENCED_ENTITY",
                           field_cause(field_name, f"referenced by {len(users)} auth-policies", users))


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["notBefore"] = row.get("notBefore") or _ZERO_TIME
    out["notAfter"] = row.get("notAfter") or _ZERO_TIME
    out.setdefault("commonName", "")


def _instant_field(name: str) -> Field:
    return Field(name, {"type": "string", "format": "date-time"}, writable=_NONE, default=None,
                 filter=FieldType.DATETIME)


EXTERNAL_JWT_SIGNERS = Resource(
    kind="external-jwt-signers", singular="externalJwtSigner", op_name="ExternalJwtSigner",
    op_plural="ExternalJwtSigners", tag="External JWT Signer", body_name="externalJwtSigner",
    fields=(
        NAME,
        bool_field("enabled", required=REQUIRED_CU, default=True),
        string_field("issuer", required=REQUIRED_CU, unique=True),
        string_field("audience", required=REQUIRED_CU, nullable=True, default=None),
        string_field("certPem", nullable=True, default=None),
        Field("jwksEndpoint", {"type": "string", "format": "uri"}, nullable=True, default=None),
        string_field("claimsProperty", nullable=True, default=_DEFAULT_CLAIMS_PROPERTY),
        Field("externalAuthUrl", {"type": "string", "format": "url"}, nullable=True, default=None),
        string_field("kid", nullable=True, unique=True, default=None),
        bool_field("useExternalId", nullable=True, default=False),
        string_field("fingerprint", writable=_NONE, unique=True, default=None),
        string_field("commonName", writable=_NONE, default=""),
        _instant_field("notBefore"),
        _instant_field("notAfter"),
    ),
    hooks=Hooks(validate=_validate, before_delete=_before_delete, present=_present),
)
