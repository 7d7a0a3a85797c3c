"""MFA routes of both APIs: enrolment, verification, QR code, recovery codes, MFA login, and admin removal.

A partially authenticated session (one still owing its MFA code) may call only ``POST /authenticate/mfa``,
``GET``/``POST /current-identity/mfa``, ``POST /current-identity/mfa/verify`` and the QR code; the other MFA
operations need a complete session. ``DELETE /current-identity/mfa`` reads its code only from the
``mfa-validation-code`` header (a body is ignored); ``GET …/recovery-codes`` takes the header or a body.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.authentication import MFA_CODE_SCHEMA
from controller.errors import ApiError, field_cause
from controller.model.validation import SchemaCheck
from controller.runtime.composition import Controller
from web.envelope import created, empty, ok
from web.guards import Access, current_session
from web.request import read_json
from web.route_table import RouteInfo, Routes

__all__ = ["register"]

_code_check = SchemaCheck.of(MFA_CODE_SCHEMA)
_CODE_HEADER = "mfa-validation-code"
_ENTITY = {"type": "object", "required": ["id", "createdAt", "updatedAt", "_links"],
           "properties": {"id": {"type": "string"}, "createdAt": {"type": "string", "format": "date-time"},
                          "updatedAt": {"type": "string", "format": "date-time"}, "tags": {"type": "object"},
                          "_links": {"type": "object"}}}
_CODES = {"type": "array", "items": {"type": "string"}}
_DETAIL = {"allOf": [_ENTITY, {"type": "object", "required": ["isVerified"], "properties": {
    "isVerified": {"type": "boolean"}, "provisioningUrl": {"type": "string"}, "recoveryCodes": _CODES}}]}
_RECOVERY = {"allOf": [_ENTITY, {"type": "object", "required": ["recoveryCodes"],
                                 "properties": {"recoveryCodes": _CODES}}]}
_CREATED = {"type": "object", "properties": {"id": {"type": "string"}, "_links": {"type": "object"}}}


async def _code_from_body(name: str) -> str:
    """The ``code`` of a required ``{code}`` body named ``name`` in the reference; 400 COULD_NOT_VALIDATE when the
    body or its code is missing or the code is not a string (an empty string is a wrong code, not a missing one)."""
    body = await read_json(name)
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
    _code_check.validate(body)
    return str(body["code"])


async def _optional_code() -> str | None:
    """The code of ``GET …/recovery-codes``: the header if sent, else the body's (which may be absent)."""
    header = request.headers.get(_CODE_HEADER)
    if header:
        return header
    body = await read_json("mfaValidation")
    if body is None:
        return None
    _code_check.validate(body)
    return str(body["code"])


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    mfa = controller.mfa

    def add(method: str, path: str, operation_id: str, summary: str, handler: Any, access: Access,
            **details: Any) -> None:
        routes.add(bp, RouteInfo(api, method, path, operation_id, "MFA", access=access, summary=summary, **details),
                   handler)

    def identity_name(identity_id: str) -> str:
        with controller.store.read() as txn:
            row = txn.get("identities", identity_id)
        return str(row.get("name", "")) if row else ""

    async def authenticate_mfa() -> Response:
        session = current_session()
        await mfa.authenticate(session, await _code_from_body("mfaAuth"))
        return empty()

    async def detail_mfa() -> Response:
        session = current_session()
        record = mfa.record(session.identity_id)
        if record is None:
            raise ApiError("NOT_FOUND")
        return ok(mfa.view(record, identity_name(session.identity_id)))

    async def enroll_mfa() -> Response:
        session = current_session()
        return created(await mfa.enroll(session.identity_id))

    async def delete_mfa() -> Response:
        session = current_session()
        await mfa.remove_own(session, request.headers.get(_CODE_HEADER, ""))
        return empty()

    async def verify_mfa() -> Response:
        session = current_session()
        await mfa.verify(session, await _code_from_body("mfaValidation"))
        return empty()

    async def qr_code() -> Response:
        session = current_session()
        png = mfa.qr_code(session.identity_id, identity_name(session.identity_id))
        return Response(png, content_type="image/png")

    async def detail_recovery_codes() -> Response:
        session = current_session()
        return ok(await mfa.recovery_codes(session, await _optional_code()))

    async def regenerate_recovery_codes() -> Response:
        session = current_session()
        await mfa.regenerate_recovery_codes(session, await _code_from_body("mfaValidation"))
        return empty()

    partial, full = Access.PARTIAL_SESSION, Access.SESSION
    # 404: the caller has no enrolment in the state the operation needs; 429: too many wrong codes lately.
    code_header = {_CODE_HEADER: {"type": "string"}}
    add("POST", "/authenticate/mfa", "authenticateMfa", "Complete a login with a TOTP or a recovery code",
        authenticate_mfa, partial, body=MFA_CODE_SCHEMA, errors=(404, 409, 429))
    add("GET", "/current-identity/mfa", "detailMfa", "Show the caller's MFA enrolment", detail_mfa, partial,
        data=_DETAIL, errors=(404,))
    add("POST", "/current-identity/mfa", "enrollMfa", "Start MFA enrolment", enroll_mfa, partial, status=201,
        data=_CREATED, errors=(409,))
    add("DELETE", "/current-identity/mfa", "deleteMfa", "Remove the caller's MFA enrolment", delete_mfa, full,
        headers=code_header, errors=(404, 429))
    add("POST", "/current-identity/mfa/verify", "verifyMfa", "Complete MFA enrolment with a TOTP", verify_mfa,
        partial, body=MFA_CODE_SCHEMA, errors=(404, 429))
    add("GET", "/current-identity/mfa/qr-code", "detailMfaQrCode", "The provisioning URL as a QR code", qr_code,
        partial, produces="image/png", raw=True, data={"type": "string", "format": "binary"}, errors=(404,))
    add("GET", "/current-identity/mfa/recovery-codes", "detailMfaRecoveryCodes", "Show the recovery codes",
        detail_recovery_codes, full, data=_RECOVERY, headers=code_header, errors=(404, 429))
    add("POST", "/current-identity/mfa/recovery-codes", "createMfaRecoveryCodes", "Replace the recovery codes",
        regenerate_recovery_codes, full, body=MFA_CODE_SCHEMA, errors=(404, 429))
    if api == "management":
        async def remove_identity_mfa(id: str) -> Response:
            await mfa.remove_by_admin(id)
            return empty()

        add("DELETE", "/identities/{id}/mfa", "removeIdentityMfa", "Remove an identity's MFA enrolment",
            remove_identity_mfa, Access.ADMIN)
