"""MFA routes of both APIs: enrolment, verification, QR code, recovery codes, MFA login, and admin removal.

A partially authenticated session (one still owing its MFA code) may call only ``POST /authenticate/mfa``,
``GET``/``POST /current-identity/mfa``, ``POST /current-identity/mfa/verify`` and the QR code; the other MFA
operations need a complete session. ``DELETE /current-identity/mfa`` reads its code only from the
``mfa-validation-code`` header (a body is ignored); ``GET …/recovery-codes`` takes the header or a body.
"""

from __future__ import annotations

from quart import Blueprint, Response, request

from controller.authentication import MFA_CODE_SCHEMA
from controller.errors import ApiError, field_cause
from controller.model.validation import SchemaCheck
from controller.runtime.composition import Controller
from web.envelope import created, empty, ok
from web.guards import Access, current_session
from web.request import read_json
from web.route_table import RouteGroup, Routes

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

    group = RouteGroup(routes, bp, api, tag="MFA", access=Access.SESSION)

    def identity_name(identity_id: str) -> str:
        with controller.domain.read() as ctx:
            row = ctx.txn.get("identities", identity_id)
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
    group.add("POST", "/authenticate/mfa", "authenticateMfa", authenticate_mfa,
              summary="Complete a login with a TOTP or a recovery code", access=partial, body=MFA_CODE_SCHEMA,
              errors=(404, 409, 429))
    group.add("GET", "/current-identity/mfa", "detailMfa", detail_mfa, summary="Show the caller's MFA enrolment",
              access=partial, data=_DETAIL, errors=(404,))
    group.add("POST", "/current-identity/mfa", "enrollMfa", enroll_mfa, summary="Start MFA enrolment", access=partial,
              status=201, data=_CREATED, errors=(409,))
    group.add("DELETE", "/current-identity/mfa", "deleteMfa", delete_mfa, summary="Remove the caller's MFA enrolment",
              access=full, headers=code_header, errors=(404, 429))
    group.add("POST", "/current-identity/mfa/verify", "verifyMfa", verify_mfa,
              summary="Complete MFA enrolment with a TOTP", access=partial, body=MFA_CODE_SCHEMA, errors=(404, 429))
    group.add("GET", "/current-identity/mfa/qr-code", "detailMfaQrCode", qr_code,
              summary="The provisioning URL as a QR code", access=partial, produces="image/png", raw=True,
              data={"type": "string", "format": "binary"}, errors=(404,))
    group.add("GET", "/current-identity/mfa/recovery-codes", "detailMfaRecoveryCodes", detail_recovery_codes,
              summary="Show the recovery codes", access=full, data=_RECOVERY, headers=code_header, errors=(404, 429))
    group.add("POST", "/current-identity/mfa/recovery-codes", "createMfaRecoveryCodes", regenerate_recovery_codes,
              summary="Replace the recovery codes", access=full, body=MFA_CODE_SCHEMA, errors=(404, 429))
    if api == "management":
        async def remove_identity_mfa(id: str) -> Response:
            await mfa.remove_by_admin(id)
            return empty()

        group.add("DELETE", "/identities/{id}/mfa", "removeIdentityMfa", remove_identity_mfa,
                  summary="Remove an identity's MFA enrolment", access=Access.ADMIN)
