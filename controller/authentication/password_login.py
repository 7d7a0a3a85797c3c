"""Password login: body checks, the updb authenticator, the auth policy and its lockout."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from actors.messages import ApiSessionStarted
from controller.authentication.disable import disable
from controller.authentication.lockout import lockout_minutes
from controller.errors import ApiError, field_cause
from controller.resources.identities import identity_disabled
from storage.store import ReadTxn

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


async def login_password(controller: Any, body: Any, ip: str) -> dict[str, Any]:
    """Authenticate by username and password and start an API session; 401 INVALID_AUTH on any failure.

    The same work is done for an unknown username as for a wrong password, so timing reveals nothing.
    """
    username, password = _check_body(body)
    with controller.store.read() as txn:
        authenticator_id = txn.by_unique("authenticators", "username", username)
        authenticator = txn.get("authenticators", authenticator_id) if authenticator_id else None
        identity = txn.get("identities", authenticator["identityId"]) if authenticator else None
        policy = txn.get("auth-policies", identity.get("authPolicyId") or "default") if identity else None
    stored_hash = authenticator.get("_passwordHash") if authenticator else None
    if not await controller.sessions.verify_password(password, stored_hash):
        if authenticator is not None and identity is not None:
            await _count_failure(controller, str(authenticator["id"]), identity, policy)
        raise ApiError("INVALID_AUTH")
    assert authenticator is not None
    if identity is None or identity_disabled(identity, controller.clock.now()):
        raise ApiError("INVALID_AUTH")
    if policy is not None and not policy.get("primary", {}).get("updb", {}).get("allowed", True):
        raise ApiError("INVALID_AUTH")
    controller.sessions.failed_logins.clear(authenticator["id"])
    extra = {k: body[k] for k in ("envInfo", "sdkInfo") if isinstance(body.get(k), dict)}
    if isinstance(body.get("configTypes"), list):
        with controller.store.read() as txn:
            extra["configTypes"] = _config_type_ids(txn, body["configTypes"])
    # A verified MFA enrolment (or an auth policy demanding TOTP) leaves the session partial until the code.
    require_totp = bool(policy and policy.get("secondary", {}).get("requireTotp"))
    mfa_required = require_totp or controller.mfa.is_enrolled(identity["id"])
    row: dict[str, Any] = await controller.sessions.create(identity["id"], authenticator["id"], ip, extra,
                                                           mfa_required=mfa_required)
    controller.engine.post(identity["id"], ApiSessionStarted(row["id"], extra.get("sdkInfo") or {}))
    return row


async def _count_failure(controller: Any, authenticator_id: str, identity: Mapping[str, Any],
                         policy: Mapping[str, Any] | None) -> None:
    """A wrong password for an existing authenticator: count it, and lock the identity out when the auth policy's
    ``maxAttempts`` is exceeded (``controller/authentication/lockout.py``)."""
    failures = controller.sessions.failed_logins.failed(authenticator_id)
    minutes = lockout_minutes(policy, failures)
    if minutes is None:
        return
    controller.sessions.failed_logins.clear(authenticator_id)
    if await disable(controller, str(identity["id"]), minutes, lockout=True):
        log.warning("identity locked out", extra={"identityId": identity["id"], "failedAttempts": failures,
                                                  "lockoutMinutes": minutes})


def _config_type_ids(txn: ReadTxn, requested: Iterable[Any]) -> list[str]:
    """Config type ids for the names or ids a client asked for: unknown ones are dropped, ``all`` is kept."""
    out: list[str] = []
    for value in requested:
        if not isinstance(value, str):
            continue
        if value == "all" or txn.exists("config-types", value):
            resolved: str | None = value
        else:
            resolved = txn.by_unique("config-types", "name", value)
        if resolved is not None and resolved not in out:
            out.append(resolved)
    return out
