"""Automatic CA enrolment: ``POST /enroll?method=ca`` with a certificate a third-party CA issued, and no token.

The certificate (presented over TLS, within its validity dates) must come from a CA that is verified and has
``isAutoCaEnrollmentEnabled``. When that CA has an ``externalIdClaim``, the certificate names its identity by
external id: enrolment makes sure an identity with that ``externalId`` exists (creating it when there is none), and
later logins find it by that id. Otherwise enrolment creates a new identity with a cert authenticator holding the
certificate, which must not be in use already; later logins find it by fingerprint.

A new identity is named by the CA's ``identityNameFormat`` (placeholders ``[caName]``, ``[caId]``,
``[commonName]``, ``[requestedName]`` (the body's ``name``, else the new identity's id) and ``[identityId]``);
when the name is taken, a six-digit counter is appended until it is free, as the reference does. It gets the CA's
``identityRoles`` as role attributes and the default auth policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from controller.authentication.enrollment_claims import EnrollmentRequest, refuse_certificate_in_use
from controller.authentication.parts import IssuingParts
from controller.certificates.client_certificates import issuing_ca, within_validity
from controller.certificates.external_id import ExternalIdError, external_id
from controller.certificates.issuing import certificate_pem, fingerprint
from controller.data.write_path import create_row
from controller.errors import ApiError, nested_cause
from controller.ids import new_id
from controller.model.spec import WriteContext

__all__ = ["enroll_through_ca", "identity_name"]


def _auto_enrolling(ca: Mapping[str, Any]) -> bool:
    return bool(ca.get("isVerified") and ca.get("isAutoCaEnrollmentEnabled"))


def identity_name(name_format: str, ca: Mapping[str, Any], certificate: x509.Certificate, requested: str,
                  identity_id: str) -> str:
    """``name_format`` with its placeholders replaced (plain substring replacement, as the reference)."""
    common_names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    values = {"[caName]": str(ca.get("name") or ""), "[caId]": str(ca["id"]),
              "[commonName]": str(common_names[0].value) if common_names else "",
              "[requestedName]": requested or identity_id, "[identityId]": identity_id}
    name = name_format
    for placeholder, value in values.items():
        name = name.replace(placeholder, value)
    return name


def _free_name(ctx: WriteContext, name: str) -> str:
    """``name``, or ``name`` with a six-digit counter appended (repeatedly) until no identity has it."""
    candidate, counter = name, 0
    while ctx.txn.by_unique("identities", "name", candidate) is not None:
        counter += 1
        candidate = f"{candidate}{counter:06d}"
    return candidate


async def enroll_through_ca(parts: IssuingParts, request: EnrollmentRequest) -> None:
    """Enrol the presented certificate's holder; see the module docstring.

    Raises:
        ApiError: 400 ENROLLMENT_NO_VALID_CAS when no CA exists; 400 CERT_FAILED_VALIDATION when there is no
            certificate or no enrolling CA issued it or it is outside its validity dates; 400 MISSING_CERT_CLAIM
            when the CA's external-id claim finds nothing; 409 CERT_IN_USE when the certificate is an
            authenticator's already.
    """
    certificate = request.certificate
    with parts.domain.read() as ctx:
        if ctx.txn.count("cas") == 0:
            raise ApiError("ENROLLMENT_NO_VALID_CAS")
        ca = issuing_ca(ctx.txn, certificate, _auto_enrolling) if certificate is not None else None
    if certificate is None or ca is None or not within_validity(certificate, parts.clock.now()):
        raise ApiError("CERT_FAILED_VALIDATION")
    claimed = None
    if ca.get("externalIdClaim"):
        try:
            claimed = external_id(certificate, ca["externalIdClaim"])
        except ExternalIdError as exc:
            raise ApiError("MISSING_CERT_CLAIM", nested_cause(str(exc))) from None
    requested = (request.json or {}).get("name")
    requested = requested if isinstance(requested, str) else ""
    pem, print_ = certificate_pem(certificate), fingerprint(certificate)
    found_ca: dict[str, Any] = ca

    def write(ctx: WriteContext) -> None:
        if claimed is not None and ctx.txn.by_unique("identities", "externalId", claimed) is not None:
            return  # the identity exists: its logins will find it by this external id
        if claimed is None:
            refuse_certificate_in_use(ctx, print_)
        identity_id = new_id(ctx.now)
        name = identity_name(str(found_ca.get("identityNameFormat") or ""), found_ca, certificate, requested,
                             identity_id)
        body = {"name": _free_name(ctx, name), "type": "Default", "isAdmin": False,
                "roleAttributes": list(found_ca.get("identityRoles") or []), "externalId": claimed}
        identity = create_row(ctx, ctx.registry["identities"], body, None, row_id=identity_id)
        if claimed is None:
            create_row(ctx, ctx.registry["authenticators"],
                       {"identityId": identity["id"], "method": "cert", "certPem": pem}, None)

    await parts.domain.write(write)
