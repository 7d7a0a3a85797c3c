"""Enrolment, the administrator's side: enrollments made, refreshed, and authenticators turned back into them.

``POST /enrollments`` makes an identity enrollment under the rules of ``request_enrollment`` (its errors are the
reference's 400 REFERENCED_ENTITY_NOT_FOUND and 409 ENROLLMENT_EXISTS). A refresh gives an enrollment a new expiry
and a new token: the mission asks that the old JWT stop working, which a new expiry alone would not do (the
reference keeps the token). Re-enrolling an authenticator replaces it by the enrollment that would make it again:
``updb`` for a password, ``ottca`` for a certificate a stored CA issued, ``ott`` for any other certificate; the
authenticator's API sessions end with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.authentication.parts import IssuingParts
from controller.certificates.client_certificates import issuing_ca, network_issued
from controller.certificates.issuing import load_certificates
from controller.clock import parse_time
from controller.data.write_path import delete_row
from controller.errors import ApiError, field_cause, not_found
from controller.model.spec import WriteContext
from controller.model.validation import SchemaCheck
from controller.resources.enrollments import CREATE_SCHEMA, REFRESH_SCHEMA, refresh_enrollment, request_enrollment

__all__ = ["create_enrollment", "reenroll_authenticator", "refresh"]

_create_check = SchemaCheck.of(CREATE_SCHEMA)
_refresh_check = SchemaCheck.of(REFRESH_SCHEMA)


def _body(check: SchemaCheck, body: Any, name: str) -> Mapping[str, Any]:
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
    check.validate(body)
    result: Mapping[str, Any] = body
    return result


def _future(ctx: WriteContext, expires_at: str) -> float:
    """A refresh's expiry, which must be ahead (400 COULD_NOT_VALIDATE on ``expiresAt``, as the reference)."""
    try:
        moment = parse_time(expires_at)
    except ValueError:
        moment = ctx.now
    if moment <= ctx.now:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("expiresAt", "must be after the current date and time",
                                                         expires_at))
    return moment


async def create_enrollment(parts: IssuingParts, body: Any) -> dict[str, Any]:
    """``POST /enrollments``: validate the body and store the enrollment; returns its row."""
    fields = _body(_create_check, body, "enrollment")

    def write(ctx: WriteContext) -> dict[str, Any]:
        return request_enrollment(ctx, str(fields["identityId"]), str(fields["method"]), fields["expiresAt"],
                                  fields.get("caId"), fields.get("username"))

    row: dict[str, Any] = await parts.domain.write(write)
    return row


async def refresh(parts: IssuingParts, enrollment_id: str, body: Any) -> dict[str, Any]:
    """``POST /enrollments/{id}/refresh``: a new token and expiry; returns the row."""
    expires_at = str(_body(_refresh_check, body, "refresh")["expiresAt"])

    def write(ctx: WriteContext) -> dict[str, Any]:
        if not ctx.txn.exists("enrollments", enrollment_id):
            raise not_found("enrollment", enrollment_id)
        return refresh_enrollment(ctx, enrollment_id, _future(ctx, expires_at))

    row: dict[str, Any] = await parts.domain.write(write)
    return row


async def reenroll_authenticator(parts: IssuingParts, authenticator_id: str, body: Any) -> dict[str, Any]:
    """``POST /authenticators/{id}/re-enroll``: the authenticator is replaced by an enrollment; returns it."""
    expires_at = _body(_refresh_check, body, "reEnroll")["expiresAt"]
    network_ca_pem = parts.pki.ca_pem

    def write(ctx: WriteContext) -> dict[str, Any]:
        authenticator = ctx.txn.get("authenticators", authenticator_id)
        if authenticator is None:
            raise not_found("authenticator", authenticator_id)
        method, ca_id, username = "updb", None, authenticator.get("username")
        if authenticator.get("method") == "cert":
            certificate = load_certificates(str(authenticator.get("certPem") or ""), "certPem")[0]
            ca = None if network_issued(certificate, network_ca_pem) else issuing_ca(ctx.txn, certificate,
                                                                                     lambda row: True)
            method, ca_id, username = ("ottca", ca["id"], None) if ca is not None else ("ott", None, None)
        delete_row(ctx, ctx.registry["authenticators"], authenticator_id)
        return request_enrollment(ctx, str(authenticator["identityId"]), method, expires_at, ca_id, username)

    row: dict[str, Any] = await parts.domain.write(write)
    return row
