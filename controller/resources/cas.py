"""Third-party certificate authorities: CAs whose certificates identities may enrol and log in with.

A CA is created unverified with a random ``verificationToken``; its owner proves control of the CA key by sending a
certificate it signed whose common name is that token (``POST /cas/{id}/verify``, :func:`check_proof` then
:func:`mark_verified`). Only a verified CA takes part in enrolment (``ottca``, automatic CA enrolment) and, when
``isAuthEnabled``, in certificate login. ``certPem`` is given once, on create: one or more PEM certificates, the first
being the CA itself, whose SHA-1 ``fingerprint`` is unique among CAs. ``certPem``, ``fingerprint``,
``verificationToken`` and ``isVerified`` never change through create/update/patch afterwards (only verification sets
``isVerified``). Deleting a CA deletes its ``ottca`` enrollments (their ``caId`` cascades); the authenticators of
identities enrolled through it stay, but their certificates no longer chain to a known CA.

``identityRoles`` are the role attributes an identity enrolled through the CA receives (plain attributes, as an
identity's ``roleAttributes``, not selectors); ``identityNameFormat`` names it (:data:`DEFAULT_NAME_FORMAT` when
empty); ``externalIdClaim`` says where its certificates carry the identity's ``externalId``
(``controller/certificates/external_id.py``).

``externalIdClaim`` on writes:

* create and PUT carry either no claim (PUT: the stored one is removed) or a whole one, all six fields present and
  non-null (the request schema says so);
* PATCH: absent keeps the stored claim, null removes it, an object is merged onto the stored claim (its non-null
  fields replace the stored ones). The merged claim must be whole; an empty object onto no claim leaves none. This
  is what the reference's ``externalIdClaimPatch`` means, and what its CLI relies on: ``ziti edge update ca`` always
  sends ``externalIdClaim``, holding only the fields given on its command line (often none).
* every write (not only create, as in the reference) refuses a claim that can never yield an id
  (:func:`~controller.certificates.external_id.claim_problem`) with 400 REFERENCED_ENTITY_NOT_FOUND: a claim that
  is wrong after an update would otherwise fail every login and enrolment through the CA, silently.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from controller.access.roles import check_attributes
from controller.certificates.client_certificates import ca_certificate, within_validity
from controller.certificates.external_id import claim_problem
from controller.certificates.issuing import fingerprint, issued_by, load_certificates
from controller.clock import format_time
from controller.data.write_path import put_row
from controller.errors import ApiError, FieldError, field_cause, nested_cause, not_found
from controller.model.field import (
    CREATE_ONLY,
    NAME,
    REQUIRED_CU,
    STRING_LIST,
    Field,
    Mode,
    bool_field,
    object_field,
    string_field,
)
from controller.model.spec import Hooks, ReadContext, Resource, WriteContext
from controller.model.validation import SchemaCheck
from storage.zitiql import FieldType

__all__ = [
    "CAS",
    "CLAIM_FIELDS",
    "DEFAULT_NAME_FORMAT",
    "EXTERNAL_ID_CLAIM",
    "EXTERNAL_ID_CLAIM_PATCH",
    "PROOF_FIELD",
    "check_proof",
    "mark_verified",
]

DEFAULT_NAME_FORMAT = "[caName]-[commonName]"
"""How an identity enrolled through a CA is named unless the CA says otherwise (placeholders: ``[caName]``,
``[caId]``, ``[commonName]``, ``[requestedName]``, ``[identityId]``)."""

PROOF_FIELD = "certificate"
"""The name of the verification proof (the body of ``POST /cas/{id}/verify``) in error causes."""

CLAIM_FIELDS = ("location", "matcher", "matcherCriteria", "parser", "parserCriteria", "index")
"""The fields of an ``externalIdClaim``, in the order it is stored and shown."""

_CLAIM_PROPERTIES: dict[str, dict[str, Any]] = {
    "location": {"type": "string", "enum": ["COMMON_NAME", "SAN_URI", "SAN_EMAIL"]},
    "matcher": {"type": "string", "enum": ["ALL", "PREFIX", "SUFFIX", "SCHEME"]},
    "matcherCriteria": {"type": "string"},
    "parser": {"type": "string", "enum": ["NONE", "SPLIT"]},
    "parserCriteria": {"type": "string"},
    "index": {"type": "integer", "minimum": 0},
}

EXTERNAL_ID_CLAIM: dict[str, Any] = {"type": "object", "required": list(CLAIM_FIELDS), "properties": _CLAIM_PROPERTIES}
"""A whole claim: where in a client certificate a CA's identities carry their ``externalId``."""


def _or_null(schema: Mapping[str, Any]) -> dict[str, Any]:
    nullable = {**schema, "type": [schema["type"], "null"]}
    if "enum" in schema:
        nullable["enum"] = [*schema["enum"], None]
    return nullable


EXTERNAL_ID_CLAIM_PATCH: dict[str, Any] = {
    "type": "object", "properties": {name: _or_null(schema) for name, schema in _CLAIM_PROPERTIES.items()}}
"""The claim of a PATCH: any of the fields, null meaning "keep the stored value"."""

# A PATCH's claim is moved here before schema validation (the field's schema is the whole claim's) and merged onto
# the stored claim by _validate, which pops it: it is never stored.
_CLAIM_PATCH = "_externalIdClaimPatch"
_claim_patch_check = SchemaCheck.of(EXTERNAL_ID_CLAIM_PATCH)
_NONE: frozenset[Mode] = frozenset()
_CERT_VALUE = "<certificate>"


def _prepare(body: dict[str, Any], mode: Mode) -> dict[str, Any]:
    """Set a PATCH's partial claim aside for :func:`_validate` to merge, once its values are checked.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE for a claim field of the wrong type or value.
    """
    claim = body.get("externalIdClaim")
    if mode is Mode.PATCH and isinstance(claim, dict):
        _claim_patch_check.validate(claim, "externalIdClaim")
        body = {k: v for k, v in body.items() if k != "externalIdClaim"}
        body[_CLAIM_PATCH] = claim
    return body


def _claim(row: dict[str, Any], old: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The claim to store: the one written, or a PATCH's fields merged onto the stored one; only the six fields.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE naming a field a merged claim lacks; 400 REFERENCED_ENTITY_NOT_FOUND for a
            claim :func:`claim_problem` refuses.
    """
    claim = row.get("externalIdClaim")
    patch = row.pop(_CLAIM_PATCH, None)
    if patch is not None:
        stored = (old or {}).get("externalIdClaim") or {}
        claim = {**stored, **{k: v for k, v in patch.items() if k in CLAIM_FIELDS and v is not None}} or None
    if claim is None:
        return None
    for name in CLAIM_FIELDS:
        if claim.get(name) is None:
            field = f"externalIdClaim.{name}"
            raise ApiError("COULD_NOT_VALIDATE", field_cause(field, f"{field} in body is required", None))
    claim = {name: claim[name] for name in CLAIM_FIELDS}
    problem = claim_problem(claim)
    if problem is not None:
        shown = json.dumps(claim, separators=(",", ":"))
        raise ApiError("REFERENCED_ENTITY_NOT_FOUND",
                       nested_cause(f"the value '{shown}' for 'externalIdClaim' is invalid: {problem}"))
    return claim


def _is_ca(certificate: x509.Certificate) -> bool:
    """Whether basic constraints say CA:TRUE (a certificate without them is no CA)."""
    try:
        return certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _ca_certificate(ctx: WriteContext, pem: Any) -> x509.Certificate:
    """The CA certificate of a create's ``certPem``: the first of its certificates, a CA not already stored.

    Raises:
        ApiError: what :func:`load_certificates` raises for text that is not PEM certificates; 400
            CERTIFICATE_IS_NOT_CA when the first is not a CA (the reference answers 500); 400 COULD_NOT_VALIDATE on
            ``certPem`` when another CA has the same certificate.
    """
    certificate = load_certificates(str(pem or ""), "certPem")[0]
    if not _is_ca(certificate):
        raise ApiError("CERTIFICATE_IS_NOT_CA",
                       field_cause("certPem", "the first certificate is not a CA (basic constraints CA:TRUE)",
                                   _CERT_VALUE))
    other = ctx.txn.by_unique("cas", "fingerprint", fingerprint(certificate))
    if other is not None:
        raise FieldError("certPem", f"certificate already used as CA {other}", _CERT_VALUE)
    return certificate


def _validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    """Complete and check a CA about to be stored: the default name format, the claim (:func:`_claim`), plain role
    attributes; on create (``old`` None) also the certificate (:func:`_ca_certificate`), its fingerprint, a fresh
    verification token and ``isVerified`` false. Raises ApiError as those helpers say."""
    if not (row.get("identityNameFormat") or "").strip():
        row["identityNameFormat"] = DEFAULT_NAME_FORMAT
    row["externalIdClaim"] = _claim(row, old)
    roles = check_attributes("identityRoles", row.get("identityRoles"))
    if "" in roles:
        # Identities enrolled through the CA get these as role attributes, where an empty one cannot be stored.
        raise FieldError("identityRoles", "role attributes must not be empty", roles)
    row["identityRoles"] = roles
    if old is not None:
        return
    row["fingerprint"] = fingerprint(_ca_certificate(ctx, row.get("certPem")))
    row["verificationToken"] = secrets.token_hex(8)
    row["isVerified"] = False


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    """``verify`` link while unverified, ``jwt`` link while auto enrolment is on; no ``externalIdClaim`` key when
    the CA has none."""
    links = out["_links"]
    if not row.get("isVerified"):
        links["verify"] = {"href": f"./cas/{row['id']}/verify"}
    if row.get("isAutoCaEnrollmentEnabled"):
        links["jwt"] = {"href": f"./cas/{row['id']}/jwt"}
    if out.get("externalIdClaim") is None:
        out.pop("externalIdClaim", None)


def check_proof(ca: Mapping[str, Any], pem: str, now: float) -> None:
    """Check a verification proof for a stored CA, in the reference's order of checks.

    Args:
        ca: the stored CA row.
        pem: the proof: PEM text whose first certificate has the CA's ``verificationToken`` as its subject common
            name (the last common name, when the subject has several) and is signed by the CA's first certificate.
        now: the current time, epoch seconds; the proof and the CA certificate must both be valid then.

    Raises:
        ApiError: 409 CA_ALREADY_VERIFIED; what :func:`load_certificates` raises (400 COULD_NOT_PARSE_BODY,
            EXPECTED_PEM_CERTIFICATE, COULD_NOT_PARSE_DER_BLOCK); 400 INVALID_COMMON_NAME; 400
            CERTIFICATE_FAILED_VALIDATION for a proof not signed by the CA or outside the validity dates.
    """
    if ca.get("isVerified"):
        raise ApiError("CA_ALREADY_VERIFIED")
    proof = load_certificates(pem, PROOF_FIELD)[0]
    names = proof.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    common_name = str(names[-1].value) if names else ""
    if common_name != ca.get("verificationToken"):
        raise ApiError("INVALID_COMMON_NAME",
                       field_cause(PROOF_FIELD, "the common name is not the CA's verificationToken", common_name))
    ca_cert = ca_certificate(ca)
    if ca_cert is None or not issued_by(proof, ca_cert):
        raise ApiError("CERTIFICATE_FAILED_VALIDATION",
                       field_cause(PROOF_FIELD, "the certificate is not signed by the CA's certificate", _CERT_VALUE))
    if not (within_validity(proof, now) and within_validity(ca_cert, now)):
        raise ApiError("CERTIFICATE_FAILED_VALIDATION",
                       field_cause(PROOF_FIELD, "the certificate or the CA's certificate is not valid now",
                                   _CERT_VALUE))


def mark_verified(ctx: WriteContext, ca_id: str) -> dict[str, Any]:
    """Store a CA as verified, once :func:`check_proof` accepted a proof; returns the stored row.

    Re-reads the CA in the write transaction, so that of two proofs checked at once only one verifies.

    Raises:
        ApiError: 404 NOT_FOUND when the CA was deleted meanwhile; 409 CA_ALREADY_VERIFIED when it was verified
            meanwhile.
    """
    old = ctx.txn.get("cas", ca_id)
    if old is None:
        raise not_found(CAS.singular, ca_id)
    if old.get("isVerified"):
        raise ApiError("CA_ALREADY_VERIFIED")
    row = {**old, "isVerified": True, "updatedAt": format_time(ctx.now)}
    return put_row(ctx, CAS, row, old, Mode.PATCH)


CAS = Resource(
    kind="cas", singular="ca", op_name="Ca", op_plural="Cas", tag="Certificate Authority", body_name="ca",
    fields=(
        NAME,
        string_field("certPem", required=CREATE_ONLY, writable=CREATE_ONLY, filterable=False),
        Field("identityRoles", STRING_LIST, required=REQUIRED_CU, default=list, filter=FieldType.SET),
        bool_field("isAuthEnabled", required=REQUIRED_CU, default=True),
        bool_field("isAutoCaEnrollmentEnabled", required=REQUIRED_CU, default=False),
        bool_field("isOttCaEnrollmentEnabled", required=REQUIRED_CU, default=False),
        string_field("identityNameFormat", required=frozenset({Mode.UPDATE}), nullable=True,
                     default=DEFAULT_NAME_FORMAT),
        # No default: a CA without a claim has none, stored as null and not shown (_validate always sets it).
        object_field("externalIdClaim", EXTERNAL_ID_CLAIM, nullable=True),
        Field(_CLAIM_PATCH, EXTERNAL_ID_CLAIM_PATCH),
        string_field("fingerprint", writable=_NONE, unique=True, default=None),
        string_field("verificationToken", writable=_NONE, default=None),
        bool_field("isVerified", writable=_NONE, default=False),
    ),
    hooks=Hooks(prepare=_prepare, validate=_validate, present=_present),
)
