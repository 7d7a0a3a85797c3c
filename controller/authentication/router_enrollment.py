"""Routers and their certificates: enrolment (``erott``/``trott``), extension, and re-enrolment by an admin.

A router enrols with two CSRs in a JSON body, ``certCsr`` (its client certificate, which it presents to the
controller) and ``serverCertCsr`` (the certificate it serves endpoints with, whose DNS and IP names come from the
CSR); both certificates name the router by its id. Enrolment marks the router verified and records its client
certificate and that certificate's fingerprint, by which ``/enroll/extend/router`` later recognises it. Re-enrolling
a router forgets its certificate and gives it a new enrollment, replacing any it had.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography import x509

from controller.authentication.enrollment_claims import Enrolled, EnrollmentRequest, claim, issue_time
from controller.authentication.parts import IssuingParts
from controller.certificates.csr import load_csr
from controller.certificates.issuing import certificate_pem, fingerprint
from controller.data.write_path import delete_row, write_internal
from controller.errors import ApiError, field_cause, not_found
from controller.model.spec import WriteContext
from controller.resources.enrollments import ROUTER_KINDS, start_router_enrollment

__all__ = ["enroll_router", "extend_router", "reenroll_router"]

# The body names the reference's router sends, then those its spec documents.
_CLIENT_CSR = ("certCsr", "clientCsr")
_SERVER_CSR = ("serverCertCsr", "serverCsr")


def _csr_field(body: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        value = body.get(name)
        if value is not None:
            return name, str(value)
    raise ApiError("MISSING_OR_INVALID_CSR", field_cause(names[0], f"{names[0]} is required", None))


def _router_certificates(parts: IssuingParts, router_id: str,
                         body: Mapping[str, Any]) -> tuple[x509.Certificate, x509.Certificate]:
    """The router's (client, server) certificates for the CSRs of ``body``."""
    server_field, server_csr = _csr_field(body, _SERVER_CSR)
    client_field, client_csr = _csr_field(body, _CLIENT_CSR)
    now = issue_time(parts.clock)
    server = parts.issuer.server_certificate(load_csr(server_csr, server_field), router_id, now=now,
                                             field=server_field)
    client = parts.issuer.client_certificate(load_csr(client_csr, client_field), router_id, now=now)
    return client, server


def _set_certificate(ctx: WriteContext, kind: str, router: Mapping[str, Any],
                     certificate: x509.Certificate | None) -> None:
    """Record (or, with None, forget) a router's client certificate, verified when it has one."""
    changes = {"isVerified": certificate is not None,
               "certPem": certificate_pem(certificate) if certificate is not None else None,
               "fingerprint": fingerprint(certificate) if certificate is not None else None}
    write_internal(ctx, ctx.registry[kind], {**router, **changes}, router)


async def enroll_router(parts: IssuingParts, enrollment: Mapping[str, Any], request: EnrollmentRequest) -> Enrolled:
    """Enrol the router of an ``erott``/``trott`` enrollment; answers its certificates and the CA bundle."""
    kind = "edge-routers" if enrollment.get("edgeRouterId") else "routers"
    method, subject_field = ROUTER_KINDS[kind]
    router_id = str(enrollment[subject_field])
    client, server = _router_certificates(parts, router_id, request.json or {})
    def write(ctx: WriteContext) -> None:
        consumed = claim(ctx, enrollment, (method,))
        router = ctx.txn.get(kind, str(consumed[subject_field]))
        if router is None:
            raise ApiError("INVALID_ENROLLMENT_TOKEN")
        _set_certificate(ctx, kind, router, client)

    await parts.domain.write(write)
    return Enrolled(cert=certificate_pem(client), server_cert=certificate_pem(server),
                    ca=parts.pki.ca_pem.decode("ascii"))


async def extend_router(parts: IssuingParts, certificate: x509.Certificate | None, body: Any) -> Enrolled:
    """``POST /enroll/extend/router``: a router presenting its current client certificate gets new certificates
    for new CSRs; its old certificate stops working at once.

    Raises:
        ApiError: 401 UNAUTHORIZED when the TLS certificate is no router's; 400 COULD_NOT_VALIDATE when a CSR
            field is missing; 400 COULD_NOT_PROCESS_CSR for a bad CSR.
    """
    if certificate is None:
        raise ApiError("UNAUTHORIZED")
    current = fingerprint(certificate)
    with parts.domain.read() as ctx:
        found = [(kind, router_id) for kind in ROUTER_KINDS
                 if (router_id := ctx.txn.by_unique(kind, "fingerprint", current)) is not None]
    if not found:
        raise ApiError("UNAUTHORIZED")
    kind, router_id = found[0]
    fields = body if isinstance(body, dict) else {}
    for name in ("certCsr", "serverCertCsr"):
        if fields.get(name) is None:
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
    client, server = _router_certificates(parts, router_id, fields)

    def write(ctx: WriteContext) -> None:
        router = ctx.txn.get(kind, router_id)
        if router is None or router.get("fingerprint") != current:
            raise ApiError("UNAUTHORIZED")  # re-enrolled or extended meanwhile
        _set_certificate(ctx, kind, router, client)

    await parts.domain.write(write)
    return Enrolled(cert=certificate_pem(client), server_cert=certificate_pem(server))


async def reenroll_router(parts: IssuingParts, kind: str, router_id: str) -> None:
    """An admin's re-enrolment: the router forgets its certificate (it can no longer authenticate) and gets a new
    enrollment in place of any it had."""
    subject_field = ROUTER_KINDS[kind][1]
    resource = parts.domain.registry[kind]

    def write(ctx: WriteContext) -> None:
        router = ctx.txn.get(kind, router_id)
        if router is None:
            raise not_found(resource.singular, router_id)
        for enrollment_id in ctx.txn.ids_by_ref("enrollments", subject_field, router_id):
            delete_row(ctx, ctx.registry["enrollments"], enrollment_id)
        _set_certificate(ctx, kind, router, None)
        start_router_enrollment(ctx, kind, router_id)

    await parts.domain.write(write)
