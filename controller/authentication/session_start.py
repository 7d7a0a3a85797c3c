"""The common end of every login: the identity's state, its auth policy, and the API session that starts.

Every primary login method (password, certificate, external JWT) finds an identity and the authenticator that
vouched for it, then calls :func:`start_session`, so disabled identities, the auth policy's per-method switch, the
second factors the session owes (an MFA code, a JWT from the external signer the policy requires) and what the
session records are decided in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cryptography import x509

from controller.authentication.parts import SessionParts
from controller.errors import ApiError
from controller.resources.identities import identity_disabled
from storage.store import ReadTxn

__all__ = ["auth_policy", "method_allowed", "required_ext_jwt_signer", "start_session"]


def auth_policy(txn: ReadTxn, identity: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The auth policy that governs ``identity`` (``default`` when it names none); None without an identity."""
    if identity is None:
        return None
    return txn.get("auth-policies", identity.get("authPolicyId") or "default")


def method_allowed(policy: Mapping[str, Any] | None, primary: str) -> bool:
    """Whether ``policy`` lets identities log in with the primary method ``primary`` (``updb``, ``cert`` or
    ``extJwt``); a missing policy or switch allows it."""
    return bool(((policy or {}).get("primary") or {}).get(primary, {}).get("allowed", True))


def required_ext_jwt_signer(policy: Mapping[str, Any] | None) -> str | None:
    """The id of the external JWT signer whose JWT ``policy`` requires as a second factor
    (``secondary.requireExtJwtSigner``); None when it requires none."""
    signer_id = ((policy or {}).get("secondary") or {}).get("requireExtJwtSigner")
    return signer_id if isinstance(signer_id, str) and signer_id else None


async def start_session(parts: SessionParts, identity: Mapping[str, Any], authenticator_id: str,
                        policy: Mapping[str, Any] | None, primary: str, body: Any, ip: str,
                        certificate: x509.Certificate | None = None) -> dict[str, Any]:
    """Start an API session for ``identity``, authenticated by ``authenticator_id`` with the primary method
    ``primary``; returns the stored session row. A certificate login passes its ``certificate``, which becomes one
    of the session's certificates.

    Raises:
        ApiError: 401 INVALID_AUTH when the identity is disabled or its auth policy does not allow ``primary``.

    The session is partial while it owes a second factor: an MFA code when the identity has a verified MFA
    enrolment or its policy demands TOTP, a JWT from the policy's required external signer when it names one (both
    fixed here, for the session's lifetime). ``envInfo``, ``sdkInfo`` and ``configTypes`` of the login body are kept
    with the session.
    """
    if identity_disabled(identity, parts.clock.now()) or not method_allowed(policy, primary):
        raise ApiError("INVALID_AUTH")
    details = body if isinstance(body, dict) else {}
    extra = {k: details[k] for k in ("envInfo", "sdkInfo") if isinstance(details.get(k), dict)}
    if isinstance(details.get("configTypes"), list):
        with parts.domain.read() as ctx:
            extra["configTypes"] = _config_type_ids(ctx.txn, details["configTypes"])
    require_totp = bool(policy and (policy.get("secondary") or {}).get("requireTotp"))
    mfa_required = require_totp or parts.mfa.is_enrolled(identity["id"])
    row: dict[str, Any] = await parts.sessions.create(identity["id"], authenticator_id, ip, extra,
                                                      mfa_required=mfa_required,
                                                      ext_jwt_signer_id=required_ext_jwt_signer(policy),
                                                      certificate=certificate)
    parts.posture.api_session_started(identity["id"], row["id"])
    return row


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
