"""Password login: body checks, the updb authenticator, the auth policy, disabled identities."""

from __future__ import annotations

from typing import Any

from controller.clock import format_time
from controller.errors import ApiError, field_cause
from controller.resources.identities import identity_disabled

__all__ = ["login_password"]

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
        raise ApiError("INVALID_AUTH")
    assert authenticator is not None
    if identity is None or identity_disabled(identity, format_time(controller.clock.now())):
        raise ApiError("INVALID_AUTH")
    if policy is not None and not policy.get("primary", {}).get("updb", {}).get("allowed", True):
        raise ApiError("INVALID_AUTH")
    extra = {k: body[k] for k in ("envInfo", "sdkInfo") if isinstance(body.get(k), dict)}
    if isinstance(body.get("configTypes"), list):
        extra["configTypes"] = [str(c) for c in body["configTypes"]]
    row: dict[str, Any] = await controller.sessions.create(identity["id"], authenticator["id"], ip, extra)
    return row
