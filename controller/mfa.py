"""TOTP MFA: enrolment, verification, recovery codes, and what MFA changes for API sessions and posture.

One record per identity in the internal ``mfa`` kind (keyed by the identity id). TOTP is SHA-1, 6 digits, a
30-second step, accepted within two steps either side, computed with pyotp at the controller's clock (so tests on
a virtual clock compute the same codes). The secret is 20 random bytes (32 base32 characters, RFC 4226's
recommendation). Recovery codes are single-use.
"""

from __future__ import annotations

import base64
import io
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyotp
import segno

from actors.messages import MfaPassed, MfaRemoved
from controller.clock import format_time
from controller.crud import new_id
from controller.errors import ApiError
from controller.resources.context import WriteContext

if TYPE_CHECKING:
    from controller.auth import LiveSession
    from controller.root import Controller

__all__ = ["ISSUER", "MFA_AUTH_QUERY", "MfaService", "provisioning_url", "recovery_codes"]

KIND = "mfa"
ISSUER = "tollgate"
RECOVERY_CODES = 20
MFA_AUTH_QUERY: dict[str, Any] = {"typeId": "MFA", "provider": "ziti", "httpMethod": "POST",
                                  "httpUrl": "./authenticate/mfa", "format": "alphaNumeric", "minLength": 4,
                                  "maxLength": 6}


def recovery_codes() -> list[str]:
    """Twenty single-use codes of six base32 characters."""
    return [base64.b32encode(secrets.token_bytes(8)).decode()[:6] for _ in range(RECOVERY_CODES)]


def provisioning_url(identity_name: str, secret: str) -> str:
    return f"otpauth://totp/{ISSUER}:{identity_name}?issuer={ISSUER}&secret={secret}"


def _totp_ok(secret: str, code: str, now: float) -> bool:
    if len(code) != 6 or not code.isdigit():
        return False
    return bool(pyotp.TOTP(secret).verify(code, for_time=int(now), valid_window=2))


class MfaService:
    """MFA operations for one controller; every change goes through the single write path."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def record(self, identity_id: str) -> dict[str, Any] | None:
        with self.controller.store.read() as txn:
            return txn.get(KIND, identity_id)

    def is_enrolled(self, identity_id: str) -> bool:
        record = self.record(identity_id)
        return bool(record and record.get("isVerified"))

    def view(self, record: Mapping[str, Any], identity_name: str) -> dict[str, Any]:
        """The enrolment as the API shows it; secrets and codes only while unverified."""
        out: dict[str, Any] = {"id": record["mfaId"], "isVerified": record["isVerified"],
                               "createdAt": record["createdAt"], "updatedAt": record["updatedAt"], "tags": {},
                               "_links": {"self": {"href": "./current-identity/mfa"}}}
        if not record["isVerified"]:
            out["recoveryCodes"] = list(record["recoveryCodes"])
            out["provisioningUrl"] = provisioning_url(identity_name, record["secret"])
        return out

    async def enroll(self, identity_id: str) -> dict[str, Any]:
        """Start enrolment; 409 MFA_EXISTS while any record exists."""
        now = format_time(self.controller.clock.now())

        def write(ctx: WriteContext) -> dict[str, Any]:
            if ctx.txn.exists(KIND, identity_id):
                raise ApiError("MFA_EXISTS")
            record = {"id": identity_id, "mfaId": new_id(), "isVerified": False,
                      "secret": base64.b32encode(secrets.token_bytes(20)).decode(),
                      "recoveryCodes": recovery_codes(), "createdAt": now, "updatedAt": now}
            ctx.txn.put(KIND, record)
            return record

        record: dict[str, Any] = await self.controller.domain.write(write)
        return record

    def check_code(self, record: Mapping[str, Any], code: Any, *, allow_recovery: bool) -> str | None:
        """``"totp"`` or ``"recovery"`` for a valid code, None otherwise (no side effects)."""
        if not isinstance(code, str) or not code:
            return None
        if _totp_ok(str(record["secret"]), code, self.controller.clock.now()):
            return "totp"
        if allow_recovery and code in record.get("recoveryCodes", []):
            return "recovery"
        return None

    async def _consume(self, identity_id: str, code: str) -> None:
        def write(ctx: WriteContext) -> None:
            record = ctx.txn.get(KIND, identity_id)
            if record is not None and code in record["recoveryCodes"]:
                record["recoveryCodes"] = [c for c in record["recoveryCodes"] if c != code]
                ctx.txn.put(KIND, record)

        await self.controller.domain.write(write)

    async def _passed(self, session: LiveSession) -> None:
        """The API session proved MFA: complete it, persist that, and tell the identity's actor."""
        await self.controller.sessions.mark_mfa_complete(session.id)
        self.controller.engine.post(session.identity_id, MfaPassed(session.id))

    async def verify(self, session: LiveSession, code: Any) -> None:
        """Complete enrolment with a TOTP (recovery codes do not count here)."""
        record = self.record(session.identity_id)
        if record is None or record["isVerified"]:
            raise ApiError("NOT_FOUND")
        if self.check_code(record, code, allow_recovery=False) is None:
            raise ApiError("MFA_INVALID_TOKEN")
        now = format_time(self.controller.clock.now())

        def write(ctx: WriteContext) -> None:
            current = ctx.txn.get(KIND, session.identity_id)
            if current is None:
                raise ApiError("NOT_FOUND")
            ctx.txn.put(KIND, {**current, "isVerified": True, "updatedAt": now})

        await self.controller.domain.write(write)
        await self.controller.sessions.mark_mfa_required(session.id)
        await self._passed(session)

    async def authenticate(self, session: LiveSession, code: Any) -> None:
        """``POST /authenticate/mfa``: a TOTP or an unused recovery code (consumed)."""
        record = self.record(session.identity_id)
        if record is None:
            raise ApiError("MFA_NOT_ENROLLED")
        kind = self.check_code(record, code, allow_recovery=True)
        if kind is None:
            raise ApiError("MFA_INVALID_TOKEN")
        if kind == "recovery":
            await self._consume(session.identity_id, str(code))
        await self._passed(session)

    async def remove_own(self, session: LiveSession, code: Any) -> None:
        """``DELETE /current-identity/mfa``: an unverified enrolment goes without a code."""
        record = self.record(session.identity_id)
        if record is None:
            raise ApiError("NOT_FOUND")
        if record["isVerified"]:
            kind = self.check_code(record, code, allow_recovery=True)
            if kind is None:
                raise ApiError("MFA_INVALID_TOKEN")
        await self._delete(session.identity_id)
        if record["isVerified"]:
            self.controller.engine.post(session.identity_id, MfaRemoved())

    async def remove_by_admin(self, identity_id: str) -> None:
        """Admin removal; posture already passed by live API sessions stays until they end."""
        with self.controller.store.read() as txn:
            if not txn.exists("identities", identity_id):
                raise ApiError("NOT_FOUND")
        await self._delete(identity_id)

    async def _delete(self, identity_id: str) -> None:
        await self.controller.domain.write(lambda ctx: ctx.txn.delete(KIND, identity_id) and None)

    async def recovery_codes(self, session: LiveSession, code: Any) -> dict[str, Any]:
        record = self.record(session.identity_id)
        if record is None or not record["isVerified"]:
            raise ApiError("NOT_FOUND")
        if self.check_code(record, code, allow_recovery=False) is None:
            raise ApiError("MFA_INVALID_TOKEN")
        return {"recoveryCodes": list(record["recoveryCodes"]), **self.view(record, "")}

    async def regenerate_recovery_codes(self, session: LiveSession, code: Any) -> None:
        record = self.record(session.identity_id)
        if record is None or not record["isVerified"]:
            raise ApiError("NOT_FOUND")
        if self.check_code(record, code, allow_recovery=True) is None:
            raise ApiError("MFA_INVALID_TOKEN")
        now = format_time(self.controller.clock.now())

        def write(ctx: WriteContext) -> None:
            current = ctx.txn.get(KIND, session.identity_id)
            if current is not None:
                ctx.txn.put(KIND, {**current, "recoveryCodes": recovery_codes(), "updatedAt": now})

        await self.controller.domain.write(write)

    def qr_png(self, identity_id: str, identity_name: str) -> bytes:
        """A PNG of the provisioning URL while enrolment is unverified; 404 otherwise."""
        record = self.record(identity_id)
        if record is None or record["isVerified"]:
            raise ApiError("NOT_FOUND")
        buffer = io.BytesIO()
        segno.make(provisioning_url(identity_name, record["secret"]), error="m").save(buffer, kind="png", scale=6)
        return buffer.getvalue()
