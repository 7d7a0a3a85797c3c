"""MFA routes of both APIs: enrolment, verification, QR code, recovery codes, MFA login, admin removal."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.errors import ApiError, field_cause
from controller.root import Controller
from web.auth import require_admin, require_session
from web.crud import RouteInfo, Routes
from web.envelope import created, empty, ok
from web.request import read_json

__all__ = ["register"]


async def _code_from_body(required: bool = True) -> Any:
    body = await read_json()
    if isinstance(body, dict) and "code" in body:
        return body["code"]
    if required:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("code", "code in body is required", None))
    return None


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    mfa = controller.mfa

    def add(method: str, path: str, operation_id: str, handler: Any, admin: bool = False) -> None:
        routes.add(bp, RouteInfo(api, method, path, operation_id, "MFA", admin=admin), handler)

    def identity_name(identity_id: str) -> str:
        with controller.store.read() as txn:
            row = txn.get("identities", identity_id)
        return str(row.get("name", "")) if row else ""

    async def authenticate_mfa() -> Response:
        session = require_session(controller, allow_partial=True)
        await mfa.authenticate(session, await _code_from_body())
        return empty()

    async def detail_mfa() -> Response:
        session = require_session(controller, allow_partial=True)
        record = mfa.record(session.identity_id)
        if record is None:
            raise ApiError("NOT_FOUND")
        return ok(mfa.view(record, identity_name(session.identity_id)))

    async def enroll_mfa() -> Response:
        session = require_session(controller, allow_partial=True)
        record = await mfa.enroll(session.identity_id)
        return created({"id": record["mfaId"], "_links": {"self": {"href": "./current-identity/mfa"}}})

    async def delete_mfa() -> Response:
        session = require_session(controller)
        await mfa.remove_own(session, request.headers.get("mfa-validation-code", ""))
        return empty()

    async def verify_mfa() -> Response:
        session = require_session(controller, allow_partial=True)
        await mfa.verify(session, await _code_from_body())
        return empty()

    async def qr_code() -> Response:
        session = require_session(controller, allow_partial=True)
        png = mfa.qr_png(session.identity_id, identity_name(session.identity_id))
        return Response(png, content_type="image/png")

    async def detail_recovery_codes() -> Response:
        session = require_session(controller)
        code = request.headers.get("mfa-validation-code") or await _code_from_body(required=False)
        return ok(await mfa.recovery_codes(session, code))

    async def regenerate_recovery_codes() -> Response:
        session = require_session(controller)
        await mfa.regenerate_recovery_codes(session, await _code_from_body())
        return empty()

    add("POST", "/authenticate/mfa", "authenticateMfa", authenticate_mfa)
    add("GET", "/current-identity/mfa", "detailMfa", detail_mfa)
    add("POST", "/current-identity/mfa", "enrollMfa", enroll_mfa)
    add("DELETE", "/current-identity/mfa", "deleteMfa", delete_mfa)
    add("POST", "/current-identity/mfa/verify", "verifyMfa", verify_mfa)
    add("GET", "/current-identity/mfa/qr-code", "detailMfaQrCode", qr_code)
    add("GET", "/current-identity/mfa/recovery-codes", "detailMfaRecoveryCodes", detail_recovery_codes)
    add("POST", "/current-identity/mfa/recovery-codes", "createMfaRecoveryCodes", regenerate_recovery_codes)
    if api == "management":
        async def remove_identity_mfa(id: str) -> Response:
            require_admin(controller)
            await mfa.remove_by_admin(id)
            return empty()

        add("DELETE", "/identities/{id}/mfa", "removeIdentityMfa", remove_identity_mfa, admin=True)
