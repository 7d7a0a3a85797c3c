"""An identity's own authenticators: its password change, and the extension of its certificate.

A password is changed with the current one (``PUT``/``PATCH /current-identity/authenticators/{id}``); its API
sessions stay. A certificate the controller's CA issued is extended in two steps: ``extend`` issues a new
certificate for a CSR (a new key is allowed) and keeps it pending, while the old one keeps working; ``extend-verify``
with the new certificate makes it the authenticator's, after which only the new one logs in. The caller must be
connected with the certificate being extended. Another identity's authenticator answers 404 for reads and 401 for
changes, as the reference does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography import x509

from controller.authentication.enrollment_claims import issue_time
from controller.authentication.parts import IssuingParts
from controller.certificates.client_certificates import network_issued
from controller.certificates.csr import load_csr
from controller.certificates.issuing import certificate_pem, fingerprint, load_certificates
from controller.data.write_path import delete_row, write_internal
from controller.errors import ApiError, field_cause, not_found
from controller.model.field import Mode
from controller.model.spec import WriteContext
from controller.model.validation import SchemaCheck
from controller.resources.api_session_certificates import record_session_certificate
from controller.resources.authenticators import PASSWORD, USERNAME

__all__ = ["EXTEND_SCHEMA", "EXTEND_VERIFY_SCHEMA", "OWN_PATCH_SCHEMA", "OWN_UPDATE_SCHEMA", "change_password",
           "extend_certificate", "own_authenticator_ids", "verify_extension"]

OWN_UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["username", "password", "currentPassword"],
    "properties": {"username": USERNAME, "password": PASSWORD, "currentPassword": PASSWORD,
                   "tags": {"type": ["object", "null"]}},
}
OWN_PATCH_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["currentPassword"],
    "properties": {"username": {**USERNAME, "type": ["string", "null"]},
                   "password": {**PASSWORD, "type": ["string", "null"]}, "currentPassword": PASSWORD,
                   "tags": {"type": ["object", "null"]}},
}
EXTEND_SCHEMA: dict[str, Any] = {"type": "object", "required": ["clientCertCsr"],
                                 "properties": {"clientCertCsr": {"type": "string"}}}
EXTEND_VERIFY_SCHEMA: dict[str, Any] = {"type": "object", "required": ["clientCert"],
                                        "properties": {"clientCert": {"type": "string"}}}
_CHECKS = {Mode.UPDATE: SchemaCheck.of(OWN_UPDATE_SCHEMA), Mode.PATCH: SchemaCheck.of(OWN_PATCH_SCHEMA),
           "extend": SchemaCheck.of(EXTEND_SCHEMA), "verify": SchemaCheck.of(EXTEND_VERIFY_SCHEMA)}


def own_authenticator_ids(parts: IssuingParts, identity_id: str) -> set[str]:
    """The ids of an identity's authenticators (what ``/current-identity/authenticators`` lists)."""
    with parts.domain.read() as ctx:
        return set(ctx.txn.ids_by_ref("authenticators", "identityId", identity_id))


def _checked(key: Any, body: Any, name: str) -> Mapping[str, Any]:
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
    _CHECKS[key].validate(body)
    checked: Mapping[str, Any] = body
    return checked


def _own(parts: IssuingParts, identity_id: str, authenticator_id: str, *, method: str) -> dict[str, Any]:
    """The authenticator to change: 404 when unknown, 409 CAN_NOT_UPDATE_AUTHENTICATOR when not of ``method``,
    401 when another identity's."""
    with parts.domain.read() as ctx:
        row: dict[str, Any] | None = ctx.txn.get("authenticators", authenticator_id)
    if row is None:
        raise not_found("authenticator", authenticator_id)
    if row.get("method") != method:
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR",
                       field_cause("method", f"only {method} authenticators can be changed this way",
                                   row.get("method")))
    if row.get("identityId") != identity_id:
        raise ApiError("UNAUTHORIZED")
    return row


async def change_password(parts: IssuingParts, identity_id: str, authenticator_id: str, body: Any,
                          mode: Mode) -> None:
    """Change the caller's username and/or password, given its current password (401 UNAUTHORIZED on
    ``currentPassword`` when wrong, without echoing it)."""
    fields = dict(_checked(mode, body, "authenticator"))
    row = _own(parts, identity_id, authenticator_id, method="updb")
    current = str(fields.pop("currentPassword"))
    if not await parts.hashing.verify(current, row.get("_passwordHash")):
        raise ApiError("UNAUTHORIZED", field_cause("currentPassword", "invalid current password", "*"))
    await parts.domain.replace("authenticators", authenticator_id, fields, mode)


def _presented(row: Mapping[str, Any], certificate: x509.Certificate | None) -> None:
    """The connection must present the certificate being extended (401 otherwise)."""
    if certificate is None or fingerprint(certificate) != row.get("fingerprint"):
        raise ApiError("UNAUTHORIZED")


async def extend_certificate(parts: IssuingParts, identity_id: str, authenticator_id: str,
                             certificate: x509.Certificate | None, body: Any) -> dict[str, str]:
    """Issue a new certificate for the caller's cert authenticator and keep it pending; returns
    ``{clientCert, ca}``.

    Raises:
        ApiError: 401 when the connection's certificate is missing or not this authenticator's; 404 / 409 / 401
            as :func:`_own`; 409 CAN_NOT_UPDATE_AUTHENTICATOR for a certificate of a third-party CA (only the
            controller's own certificates are extended); 400 COULD_NOT_PROCESS_CSR.
    """
    fields = _checked("extend", body, "extend")
    if certificate is None:
        raise ApiError("UNAUTHORIZED")
    row = _own(parts, identity_id, authenticator_id, method="cert")
    _presented(row, certificate)
    if not network_issued(certificate, parts.pki.ca_pem):
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR",
                       field_cause("certPem", "only certificates the controller issued can be extended", "<pem>"))
    csr = load_csr(str(fields["clientCertCsr"]), "clientCertCsr")
    issued = parts.issuer.client_certificate(csr, identity_id, now=issue_time(parts.clock))
    pem, print_ = certificate_pem(issued), fingerprint(issued)

    def write(ctx: WriteContext) -> None:
        current = ctx.txn.get("authenticators", authenticator_id)
        if current is None or current.get("fingerprint") != row["fingerprint"]:
            raise ApiError("UNAUTHORIZED")  # extended, re-enrolled or deleted meanwhile
        pending = {**current, "_unverifiedCertPem": pem, "_unverifiedFingerprint": print_}
        write_internal(ctx, ctx.registry["authenticators"], pending, current)

    await parts.domain.write(write)
    return {"clientCert": pem, "ca": parts.pki.ca_pem.decode("ascii")}


async def verify_extension(parts: IssuingParts, identity_id: str, authenticator_id: str, body: Any,
                           api_session_id: str) -> None:
    """Make the pending certificate the authenticator's, given that certificate; the caller's API session gets
    it as one of its certificates, and API-session certificates of the old one go.

    Raises:
        ApiError: 404 / 409 / 401 as :func:`_own`; 409 CAN_NOT_UPDATE_AUTHENTICATOR when nothing is pending;
            400 INVALID_CLIENT_CERT when ``clientCert`` is not exactly the pending certificate.
    """
    fields = _checked("verify", body, "extend")
    row = _own(parts, identity_id, authenticator_id, method="cert")
    if not row.get("_unverifiedFingerprint"):
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR",
                       field_cause("clientCert", "no extended certificate awaits verification", None))
    try:
        certificates = load_certificates(str(fields["clientCert"]), "clientCert")
    except ApiError:
        certificates = []
    if len(certificates) != 1 or fingerprint(certificates[0]) != row["_unverifiedFingerprint"]:
        raise ApiError("INVALID_CLIENT_CERT")
    new = certificates[0]

    def write(ctx: WriteContext) -> None:
        current = ctx.txn.get("authenticators", authenticator_id)
        if current is None or current.get("_unverifiedFingerprint") != row["_unverifiedFingerprint"]:
            raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR")
        replaced = {**current, "certPem": current["_unverifiedCertPem"], "fingerprint": fingerprint(new),
                    "_unverifiedCertPem": None, "_unverifiedFingerprint": None}
        write_internal(ctx, ctx.registry["authenticators"], replaced, current)
        _forget_session_certificates(ctx, str(current["fingerprint"]))
        if ctx.txn.exists("api-sessions", api_session_id):
            record_session_certificate(ctx, api_session_id, new)

    await parts.domain.write(write)


def _forget_session_certificates(ctx: WriteContext, old_fingerprint: str) -> None:
    kind = "api-session-certificates"
    for certificate_id in ctx.txn.ids_by_fields(kind, ("fingerprint",), (old_fingerprint,)):
        delete_row(ctx, ctx.registry[kind], certificate_id)
