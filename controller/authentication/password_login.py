"""Password login: body checks, the updb authenticator, the auth policy and its lockout."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controller.authentication.disable import disable
from controller.authentication.lockout import lockout_minutes
from controller.authentication.parts import LoginParts
from controller.authentication.session_start import auth_policy, start_session
from controller.errors import ApiError, field_cause

__all__ = ["login_password"]

log = logging.getLogger("tollgate.auth")

_LIMITS = {"username": (4, 100), "password": (5, 100)}


def _check_body(body: Any) -> tuple[str, str]:
    if not isinstance(body, dict):
        raise ApiError("COULD_NOT_VALIDATE", field_cause("auth", "auth in body is required", None))
    values = []
    for name, (low, high) in _LIMITS.items():
        value = body.get(name)
        if not isinstance(value, str) or value == "":
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", value))
        if not low <= len(value) <= high:
            raise ApiError("COULD_NOT_VALIDATE",
                           field_cause(name, f"{name} in body should be between {low} and {high} chars long",
                                       "*" if name == "password" else value))
        values.append(value)
    return values[0], values[1]


async def login_password(parts: LoginParts, body: Any, ip: str) -> dict[str, Any]:
    """Authenticate by username and password and start an API session; 401 INVALID_AUTH on any failure.

    The same work is done for an unknown username as for a wrong password, so timing reveals nothing. Wrong
    passwords are throttled per username and per client address (429 RATE_LIMITED, ``throttle.py``), before any
    hashing.
    """
    username, password = _check_body(body)
    parts.throttles.check_password(username, ip)
    with parts.domain.read() as ctx:
        authenticator_id = ctx.txn.by_unique("authenticators", "username", username)
        authenticator = ctx.txn.get("authenticators", authenticator_id) if authenticator_id else None
        identity = ctx.txn.get("identities", authenticator["identityId"]) if authenticator else None
        policy = auth_policy(ctx.txn, identity)
    stored_hash = authenticator.get("_passwordHash") if authenticator else None
    if not await parts.hashing.verify(password, stored_hash):
        await parts.throttles.password_failed(username, ip)
        if authenticator is not None and identity is not None:
            await _count_failure(parts, str(authenticator["id"]), identity, policy)
        raise ApiError("INVALID_AUTH")
    if authenticator is None or identity is None:
        raise ApiError("INVALID_AUTH")
    row = await start_session(parts, identity, authenticator["id"], policy, "updb", body, ip)
    await parts.throttles.login_counted_out(authenticator["id"])
    return row


async def _count_failure(parts: LoginParts, authenticator_id: str, identity: Mapping[str, Any],
                         policy: Mapping[str, Any] | None) -> None:
    """A wrong password for an existing authenticator: count it, and lock the identity out when the auth policy's
    ``maxAttempts`` is exceeded (``controller/authentication/lockout.py``)."""
    failures = await parts.throttles.login_failed(authenticator_id)
    minutes = lockout_minutes(policy, failures)
    if minutes is None:
        return
    await parts.throttles.login_counted_out(authenticator_id)
    if await disable(parts.domain, str(identity["id"]), minutes, lockout=True):
        log.warning("identity locked out", extra={"identityId": identity["id"], "failedAttempts": failures,
                                                  "lockoutMinutes": minutes})
