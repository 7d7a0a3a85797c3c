"""TOTP MFA: enrolment, verification, recovery codes, and what MFA changes for API sessions and posture.

One record per identity in the internal ``mfa`` kind (keyed by the identity id). TOTP is SHA-1, 6 digits, a
30-second step, accepted within one step either side and once only (the record keeps the last step used), where the
reference accepts two steps either side and replays; codes are computed with pyotp at the controller's clock (so
tests on a virtual clock compute the same codes). The secret is 20 random bytes (32 base32 characters, RFC 4226's
recommendation). Recovery codes are single-use and compared in constant time: a code is checked and consumed in
one write, so two requests racing with the same code cannot both succeed. Wrong codes are throttled per identity,
and enough of them in a row lock the identity out (``throttle.py``).
"""

from __future__ import annotations

import base64
import hmac
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import pyotp
import segno

from controller.authentication.api_sessions import ApiSessions, LiveSession
from controller.authentication.disable import disable
from controller.authentication.parts import LoginFailures, PostureEvents
from controller.authentication.throttle import MFA_LOCKOUT_FAILURES, MFA_LOCKOUT_MINUTES, Throttles
from controller.clock import format_time
from controller.data.domain import Domain
from controller.errors import ApiError, not_found
from controller.ids import new_id
from controller.model.events import MFA, Event
from controller.model.spec import WriteContext
from controller.posture.engine import record_mfa_removal

__all__ = ["ISSUER", "MFA_AUTH_QUERY", "MFA_CODE_SCHEMA", "QR_SIZE", "MfaService", "provisioning_url",
           "qr_png", "recovery_codes"]

KIND = "mfa"
ISSUER = "tollgate"
STEP_SECONDS = 30
RECOVERY_CODES = 20
QR_SIZE = 256
MFA_AUTH_QUERY: dict[str, Any] = {"typeId": "MFA", "provider": "ziti", "httpMethod": "POST",
                                  "httpUrl": "./authenticate/mfa", "format": "alphaNumeric", "minLength": 4,
                                  "maxLength": 6}
# The body of every operation that takes a code (``mfaCode`` in the reference).
MFA_CODE_SCHEMA: dict[str, Any] = {"type": "object", "required": ["code"],
                                   "properties": {"code": {"type": "string"}}}
_LINKS = {"self": {"href": "./current-identity/mfa"}}


def recovery_codes() -> list[str]:
    """Twenty single-use codes, each the first six base32 characters of eight random bytes."""
    return [base64.b32encode(secrets.token_bytes(8)).decode()[:6] for _ in range(RECOVERY_CODES)]


def provisioning_url(identity_name: str, secret: str) -> str:
    """``otpauth://totp/<issuer>:<name>?issuer=<issuer>&secret=<secret>`` (query keys sorted, as the reference).

    The reference leaves the label unescaped; we percent-encode it (keeping ``@``), so that a name with a space,
    ``?`` or ``#`` still gives a valid URI whose decoded path is ``/<issuer>:<name>``.
    """
    label = f"{quote(ISSUER, safe='')}:{quote(identity_name, safe='@')}"
    return f"otpauth://totp/{label}?{urlencode({'issuer': ISSUER, 'secret': secret})}"


def qr_png(text: str, size: int = QR_SIZE) -> bytes:
    """A ``size`` x ``size`` greyscale PNG of the QR code of ``text`` (medium error correction).

    Like the reference's renderer, each module is a whole number of pixels and the code (with its four-module quiet
    zone) is centred on a white square; a code with more modules than ``size`` gets one pixel per module.
    """
    matrix = [[bool(m) for m in row] for row in segno.make(text, error="m", micro=False).matrix_iter(border=4)]
    modules = len(matrix)
    size = max(size, modules)
    scale = size // modules
    offset = (size - modules * scale) // 2
    white_line = b"\x00" + b"\xff" * size  # each scanline starts with filter type 0 (none)
    lines = [white_line] * offset
    for row in matrix:
        pixels = b"".join((b"\x00" if dark else b"\xff") * scale for dark in row)
        line = b"\x00" + b"\xff" * offset + pixels + b"\xff" * (size - offset - len(pixels))
        lines.extend([line] * scale)
    lines.extend([white_line] * (size - len(lines)))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0)  # 8-bit greyscale, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(lines), 9))
            + chunk(b"IEND", b""))


def totp_step(secret: str, code: str, now: float, after: int) -> int | None:
    """The 30-second step whose TOTP ``code`` is: the current one or one either side, and later than ``after`` (a
    step already used: a code works once). None when it is none of them."""
    if len(code) != 6 or not (code.isascii() and code.isdigit()):
        return None
    totp = pyotp.TOTP(secret)
    current = int(now) // STEP_SECONDS
    for step in (current - 1, current, current + 1):
        if step > after and hmac.compare_digest(totp.at(step * STEP_SECONDS), code):
            return step
    return None


def _event(event_type: str, session: LiveSession, **fields: Any) -> Event:
    """An ``mfa`` event of the session's identity (never the code: only how it passed)."""
    return Event(MFA, event_type, {"identity_id": session.identity_id, "api_session_id": session.id, **fields})


def _holds(codes: Iterable[str], code: str) -> bool:
    """Whether ``code`` is one of ``codes``, comparing with every one in constant time."""
    found = False
    for candidate in codes:
        found |= hmac.compare_digest(candidate.encode(), code.encode())
    return found


@dataclass(frozen=True, slots=True)
class _Accepted:
    """A code that passed: the TOTP step it used (so it is not used again), or the recovery code (consumed)."""

    step: int | None = None
    recovery: str | None = None


class MfaService:
    """MFA operations for one controller; every change goes through the single write path.

    Each operation that takes a code raises 404 ``NOT_FOUND`` when its record is missing (or in the wrong state)
    before it looks at the code, then 400 ``MFA_INVALID_TOKEN`` for a wrong, empty or malformed code.

    Args:
        domain: the store it reads and writes MFA records through.
        sessions: the API sessions an MFA pass completes.
        engine: the posture engine, told of every pass and removal.
        throttles: the throttle on wrong codes per identity.
        failures: where refused second factors of a login are counted.
    """

    def __init__(self, domain: Domain, sessions: ApiSessions, engine: PostureEvents, throttles: Throttles,
                 failures: LoginFailures) -> None:
        self._domain = domain
        self._sessions = sessions
        self._engine = engine
        self._throttles = throttles
        self._failures = failures

    def record(self, identity_id: str) -> dict[str, Any] | None:
        with self._domain.read() as ctx:
            return ctx.txn.get(KIND, identity_id)

    def is_enrolled(self, identity_id: str) -> bool:
        """True once an enrolment is verified (a started one does not make MFA required)."""
        record = self.record(identity_id)
        return bool(record and record.get("isVerified"))

    def view(self, record: Mapping[str, Any], identity_name: str) -> dict[str, Any]:
        """The enrolment as the API shows it; the provisioning URL and recovery codes only while unverified."""
        out = self._entity(record)
        out["isVerified"] = record["isVerified"]
        if not record["isVerified"]:
            out["recoveryCodes"] = list(record["recoveryCodes"])
            out["provisioningUrl"] = provisioning_url(identity_name, record["secret"])
        return out

    @staticmethod
    def _entity(record: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": record["mfaId"], "createdAt": record["createdAt"], "updatedAt": record["updatedAt"],
                "tags": {}, "_links": dict(_LINKS)}

    def _match(self, record: Mapping[str, Any], code: Any, *, allow_recovery: bool) -> _Accepted | None:
        """What a code is worth against ``record``: a TOTP step not used before, a recovery code, or None."""
        if not isinstance(code, str) or not code:
            return None
        step = totp_step(str(record["secret"]), code, self._domain.clock.now(), int(record.get("lastStep", -1)))
        if step is not None:
            return _Accepted(step=step)
        if allow_recovery and _holds(record.get("recoveryCodes", ()), code):
            return _Accepted(recovery=code)
        return None

    async def _checked(self, session: LiveSession, record: Mapping[str, Any], code: Any, operation: str, *,
                       allow_recovery: bool) -> _Accepted:
        """A code given by the session's identity for ``operation``, throttled: 429 RATE_LIMITED while the identity
        has given too many wrong codes lately, 400 MFA_INVALID_TOKEN for a wrong one (an ``mfa`` ``failed`` event);
        the consecutive wrong codes that reach the lockout disable the identity for :data:`MFA_LOCKOUT_MINUTES` (its
        API sessions end)."""
        identity_id = session.identity_id
        throttles = self._throttles
        throttles.check_mfa(identity_id)
        accepted = self._match(record, code, allow_recovery=allow_recovery)
        if accepted is None:
            locked = await throttles.mfa_failed(identity_id) >= MFA_LOCKOUT_FAILURES
            if locked:
                await disable(self._domain, identity_id, MFA_LOCKOUT_MINUTES, lockout=True)
            await self._failed(session, operation, "MFA_INVALID_TOKEN", locked_out=locked)
            raise ApiError("MFA_INVALID_TOKEN")
        await throttles.mfa_passed(identity_id)
        return accepted

    async def _failed(self, session: LiveSession, operation: str, reason: str, *, locked_out: bool = False) -> None:
        await self._domain.record(Event(MFA, "failed", {
            "identity_id": session.identity_id, "api_session_id": session.id, "operation": operation,
            "reason": reason, "locked_out": locked_out}))

    def _require(self, identity_id: str, *, verified: bool | None) -> dict[str, Any]:
        """The identity's record; 404 when there is none or its ``isVerified`` is not ``verified`` (None: any)."""
        record = self.record(identity_id)
        if record is None or (verified is not None and record["isVerified"] != verified):
            raise ApiError("NOT_FOUND")
        return record

    async def _update(self, identity_id: str, seen: Mapping[str, Any], accepted: _Accepted | None,
                      change: Callable[[dict[str, Any]], dict[str, Any] | None], *, passes_end: bool = False,
                      events: tuple[Event, ...] = ()) -> None:
        """Apply ``change`` to the record in one write, if it is still the enrolment ``seen`` (a removal and a new
        enrolment in between give 404). The ``accepted`` code is spent in the same write: its TOTP step is recorded
        (a step used meanwhile gives 400 MFA_INVALID_TOKEN, so a code works once) or its recovery code consumed
        (one consumed meanwhile gives 400 MFA_INVALID_TOKEN). ``change`` returning None deletes the record;
        ``passes_end`` records in the same write that the identity's MFA passes must end
        (:func:`~controller.posture.engine.record_mfa_removal`), so that a crash cannot keep them. ``events`` are
        recorded in the same write."""
        def write(ctx: WriteContext) -> None:
            current = ctx.txn.get(KIND, identity_id)
            if current is None or current["mfaId"] != seen["mfaId"]:
                raise ApiError("NOT_FOUND")
            if accepted is not None and accepted.step is not None:
                if int(current.get("lastStep", -1)) >= accepted.step:
                    raise ApiError("MFA_INVALID_TOKEN")
                current = {**current, "lastStep": accepted.step}
            if accepted is not None and accepted.recovery is not None:
                if not _holds(current["recoveryCodes"], accepted.recovery):
                    raise ApiError("MFA_INVALID_TOKEN")
                current = {**current, "recoveryCodes": [c for c in current["recoveryCodes"]
                                                        if not hmac.compare_digest(c, accepted.recovery)]}
            new = change(current)
            if new is None:
                ctx.txn.delete(KIND, identity_id)
            else:
                ctx.txn.put(KIND, new)
            if passes_end:
                record_mfa_removal(ctx, identity_id)
            for event in events:
                ctx.record(event)

        await self._domain.write(write)

    async def enroll(self, identity_id: str) -> dict[str, Any]:
        """Start enrolment; 409 MFA_EXISTS while any record (verified or not) exists."""
        now = format_time(self._domain.clock.now())

        def write(ctx: WriteContext) -> dict[str, Any]:
            if ctx.txn.exists(KIND, identity_id):
                raise ApiError("MFA_EXISTS")
            record = {"id": identity_id, "mfaId": new_id(), "isVerified": False,
                      "secret": base64.b32encode(secrets.token_bytes(20)).decode(),
                      "recoveryCodes": recovery_codes(), "createdAt": now, "updatedAt": now}
            ctx.txn.put(KIND, record)
            return record

        record: dict[str, Any] = await self._domain.write(write)
        return {"id": record["mfaId"], "_links": dict(_LINKS)}

    async def _passed(self, session: LiveSession, *, enrolled: bool = False) -> None:
        """The API session proved MFA: complete it (persisted for restarts) and tell the identity's actor.

        Completing enrolment also makes MFA required for this session, as a login after enrolment would.
        """
        if enrolled:
            await self._sessions.mark_mfa_required(session.id)
        else:
            await self._sessions.mark_mfa_complete(session.id)
        # Answered once the pass is durable: a crash after the answer must not take it back.
        await self._engine.mfa_passed(session.identity_id, session.id)

    async def verify(self, session: LiveSession, code: Any) -> None:
        """Complete enrolment with a TOTP (recovery codes do not count here); 404 unless an unverified one exists."""
        record = self._require(session.identity_id, verified=False)
        accepted = await self._checked(session, record, code, "verify", allow_recovery=False)
        now = format_time(self._domain.clock.now())
        await self._update(session.identity_id, record, accepted,
                           lambda r: {**r, "isVerified": True, "updatedAt": now},
                           events=(_event("enrolled", session), _event("passed", session, method="totp")))
        await self._passed(session, enrolled=True)

    async def authenticate(self, session: LiveSession, code: Any) -> None:
        """``POST /authenticate/mfa``: a TOTP or an unused recovery code (consumed); repeatable.

        An enrolment that is not verified yet counts as none (409 MFA_NOT_ENROLLED): the reference would let its
        codes pass MFA here, so a session could pass MFA posture while the identity shows MFA as not enabled.
        """
        record = self.record(session.identity_id)
        try:
            if record is None or not record["isVerified"]:
                await self._failed(session, "authenticate", "MFA_NOT_ENROLLED")
                raise ApiError("MFA_NOT_ENROLLED")
            accepted = await self._checked(session, record, code, "authenticate", allow_recovery=True)
            method = "totp" if accepted.step is not None else "recoveryCode"
            await self._update(session.identity_id, record, accepted, lambda r: r,
                               events=(_event("passed", session, method=method),))
        except ApiError as refused:
            self._failures.login_failed("mfa", refused.code)  # the second factor of a login
            raise
        await self._passed(session)

    async def remove_own(self, session: LiveSession, code: Any) -> None:
        """``DELETE /current-identity/mfa``: an unverified enrolment goes without a code, a verified one needs a
        TOTP or a recovery code. Removing a verified one takes the MFA pass from every API session of the identity;
        the sessions depending on it are revoked before this returns."""
        record = self._require(session.identity_id, verified=None)
        accepted = None
        if record["isVerified"]:
            accepted = await self._checked(session, record, code, "remove", allow_recovery=True)
        removed = (_event("removed", session, by="self", verified=bool(record["isVerified"])),)
        await self._update(session.identity_id, record, accepted, lambda r: None, passes_end=record["isVerified"],
                           events=removed)
        if record["isVerified"]:
            # Returns once the sessions that depended on the removed MFA are revoked, durably.
            await self._engine.mfa_removed(session.identity_id)

    async def remove_by_admin(self, identity_id: str) -> None:
        """``DELETE /identities/{id}/mfa``: removes a verified or pending enrolment (200 even when there is none).

        Posture already passed by live API sessions stays until they end (the reference's behaviour).
        """
        with self._domain.read() as ctx:
            if not ctx.txn.exists("identities", identity_id):
                raise not_found("identity", identity_id)

        def write(ctx: WriteContext) -> None:
            removed = ctx.txn.delete(KIND, identity_id)
            if removed is not None:
                ctx.record(Event(MFA, "removed", {"identity_id": identity_id, "api_session_id": None, "by": "admin",
                                                  "verified": bool(removed.get("isVerified"))}))

        await self._domain.write(write)

    async def recovery_codes(self, session: LiveSession, code: Any) -> dict[str, Any]:
        """The current recovery codes of a verified enrolment, for a valid TOTP (recovery codes do not count)."""
        record = self._require(session.identity_id, verified=True)
        accepted = await self._checked(session, record, code, "recoveryCodes", allow_recovery=False)
        await self._update(session.identity_id, record, accepted, lambda r: r)
        return {**self._entity(record), "recoveryCodes": list(record["recoveryCodes"])}

    async def regenerate_recovery_codes(self, session: LiveSession, code: Any) -> None:
        """Replace every recovery code of a verified enrolment, for a TOTP or a recovery code."""
        record = self._require(session.identity_id, verified=True)
        accepted = await self._checked(session, record, code, "regenerateRecoveryCodes", allow_recovery=True)
        now = format_time(self._domain.clock.now())
        await self._update(session.identity_id, record, accepted,
                           lambda r: {**r, "recoveryCodes": recovery_codes(), "updatedAt": now})

    def qr_code(self, identity_id: str, identity_name: str) -> bytes:
        """A PNG of the provisioning URL while enrolment is unverified; 404 when there is none or it is verified."""
        record = self._require(identity_id, verified=False)
        return qr_png(provisioning_url(identity_name, record["secret"]))
