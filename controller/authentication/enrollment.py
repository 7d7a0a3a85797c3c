"""Enrolment, the client's side: a one-time token (or a CA's certificate) exchanged for a credential.

``POST /enroll?method=…&token=…`` finds the enrollment by its token and follows the enrollment's own method
(whatever ``method`` says, as the reference does), except ``method=ca``, which needs no token
(``ca_enrollment.py``):

* ``ott``: a CSR in, a certificate from the controller's CA out, stored as the identity's cert authenticator;
* ``ottca``: the client's certificate from a third-party CA (presented over TLS) becomes its cert authenticator;
* ``updb``: a password in, stored (hashed) as the identity's updb authenticator under the enrollment's username;
* ``erott``/``trott``: a router's client and server CSRs in, its certificates out (``router_enrollment.py``).

Every enrolment consumes its token in the same durable write that stores the credential, so a token works once
even when two requests race with it. Unlike the reference (which checks expiry only for routers), an expired
enrollment is refused for every method: an expiry no one enforces is no expiry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.authentication.ca_enrollment import enroll_through_ca
from controller.authentication.enrollment_claims import (
    Enrolled,
    EnrollmentRequest,
    claim,
    issue_time,
    refuse_certificate_in_use,
)
from controller.authentication.parts import IssuingParts
from controller.authentication.router_enrollment import enroll_router
from controller.certificates.client_certificates import ca_certificate, within_validity
from controller.certificates.csr import load_csr
from controller.certificates.issuing import certificate_pem, fingerprint, issued_by
from controller.clock import parse_time
from controller.data.write_path import create_row
from controller.errors import ApiError, field_cause
from controller.model.spec import WriteContext
from controller.resources.enrollments import TOKEN_DIGEST

__all__ = ["enroll"]

_PASSWORD_LENGTH = (5, 100)


def _outstanding(parts: IssuingParts, token: str | None) -> dict[str, Any]:
    """The enrollment a token names, checked before any work is done for it (the write checks again)."""
    with parts.domain.read() as ctx:
        digest = parts.jwts.digest(token) if token else None
        enrollment_id = ctx.txn.by_unique("enrollments", TOKEN_DIGEST, digest) if digest else None
        row: dict[str, Any] | None = ctx.txn.get("enrollments", enrollment_id) if enrollment_id else None
        subject_kind, subject_id = _subject(row) if row else ("", "")
        if row is None or not subject_id or not ctx.txn.exists(subject_kind, subject_id):
            raise ApiError("INVALID_ENROLLMENT_TOKEN")
    if parse_time(row["expiresAt"]) <= parts.clock.now():
        raise ApiError("ENROLLMENT_EXPIRED")
    return row


def _subject(row: Mapping[str, Any]) -> tuple[str, str]:
    for name, kind in (("identityId", "identities"), ("edgeRouterId", "edge-routers"),
                       ("transitRouterId", "routers")):
        if row.get(name):
            return kind, str(row[name])
    return "", ""


async def enroll(parts: IssuingParts, method: str | None, request: EnrollmentRequest) -> Enrolled:
    """Carry out an enrolment; see the module docstring.

    Raises:
        ApiError: 400 INVALID_ENROLLMENT_TOKEN, ENROLLMENT_EXPIRED, COULD_NOT_PROCESS_CSR,
            MISSING_OR_INVALID_CSR, ENROLLMENT_CA_NOT_VALID, CERT_FAILED_VALIDATION, COULD_NOT_VALIDATE;
            409 CERT_IN_USE, MAX_AUTHENTICATOR_METHODS_REACHED.
    """
    if method == "ca":
        await enroll_through_ca(parts, request)
        return Enrolled()
    enrollment = _outstanding(parts, request.token)
    match enrollment["method"]:
        case "ott":
            return await _enroll_ott(parts, enrollment, request)
        case "ottca":
            await _enroll_ottca(parts, enrollment, request)
            return Enrolled()
        case "updb":
            await _enroll_updb(parts, enrollment, request)
            return Enrolled()
        case "erott" | "trott":
            return await enroll_router(parts, enrollment, request)
    raise ApiError("INVALID_ENROLL_METHOD")


def _csr(request: EnrollmentRequest) -> str | bytes:
    """The CSR of an ``ott`` enrolment: the raw body, or a JSON body's ``csr``/``clientCsr`` (the reference's
    documented body for ``/enroll/ott``)."""
    if request.raw is not None:
        return request.raw
    value = (request.json or {}).get("csr", (request.json or {}).get("clientCsr"))
    return value if isinstance(value, str) else ""


async def _enroll_ott(parts: IssuingParts, enrollment: Mapping[str, Any], request: EnrollmentRequest) -> Enrolled:
    csr = load_csr(_csr(request), "csr")
    certificate = parts.issuer.client_certificate(csr, str(enrollment["identityId"]), now=issue_time(parts.clock))
    pem = certificate_pem(certificate)
    def write(ctx: WriteContext) -> None:
        consumed = claim(ctx, enrollment, ("ott",))
        body = {"identityId": consumed["identityId"], "method": "cert", "certPem": pem}
        create_row(ctx, ctx.registry["authenticators"], body, None)

    await parts.domain.write(write)
    return Enrolled(cert=pem)


async def _enroll_ottca(parts: IssuingParts, enrollment: Mapping[str, Any], request: EnrollmentRequest) -> None:
    """The client's own certificate, issued by the enrollment's CA, becomes its cert authenticator."""
    with parts.domain.read() as ctx:
        ca = ctx.txn.get("cas", str(enrollment.get("caId") or ""))
    if ca is None:
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    if not (ca.get("isOttCaEnrollmentEnabled") and ca.get("isVerified")):
        raise ApiError("ENROLLMENT_CA_NOT_VALID")
    certificate = request.certificate
    ca_cert = ca_certificate(ca)
    if (certificate is None or ca_cert is None or not issued_by(certificate, ca_cert)
            or not within_validity(certificate, parts.clock.now())):
        raise ApiError("CERT_FAILED_VALIDATION")
    pem, print_ = certificate_pem(certificate), fingerprint(certificate)
    def write(ctx: WriteContext) -> None:
        consumed = claim(ctx, enrollment, ("ottca",))
        refuse_certificate_in_use(ctx, print_)
        body = {"identityId": consumed["identityId"], "method": "cert", "certPem": pem}
        create_row(ctx, ctx.registry["authenticators"], body, None)

    await parts.domain.write(write)


async def _enroll_updb(parts: IssuingParts, enrollment: Mapping[str, Any], request: EnrollmentRequest) -> None:
    """A password for the enrollment's username becomes the identity's updb authenticator."""
    password = (request.json or {}).get("password")
    if not isinstance(password, str) or not password:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("password", "password in body is required", None))
    low, high = _PASSWORD_LENGTH
    if not low <= len(password) <= high:
        raise ApiError("COULD_NOT_VALIDATE", field_cause(
            "password", f"password in body should be between {low} and {high} chars long", "*"))
    digest = await parts.hashing.hash(password)
    def write(ctx: WriteContext) -> None:
        consumed = claim(ctx, enrollment, ("updb",))
        body = {"identityId": consumed["identityId"], "method": "updb", "username": consumed.get("username"),
                "_passwordHash": digest}
        create_row(ctx, ctx.registry["authenticators"], body, None)

    await parts.domain.write(write)
