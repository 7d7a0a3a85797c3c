"""JWTs of external identity providers: as the primary login, and as the second factor an auth policy may require.

Primary login, ``POST /authenticate?method=ext-jwt``: each ``Authorization: Bearer`` token of the request (at most
two, in order) is tried until one passes. Its signer is chosen among the stored ``external-jwt-signers`` and the
token verified (:mod:`controller.authentication.external_jwt`); the identity it names is found by id, or by
``externalId`` when the signer says so; that identity's auth policy must allow external JWT login and, when it lists
``allowedSigners``, list this signer. The session's ``authenticatorId`` is ``extJwtId:<signerId>``. Every failure is
401 INVALID_AUTH; why a token was refused goes to the log at info level, never the token.

Second factor, ``secondary.requireExtJwtSigner``: whatever the primary method, a session whose identity's auth
policy names a signer (fixed at login, as the MFA requirement is) is partially authenticated until a request brings
a bearer JWT from exactly that signer, naming the session's own identity (the reference accepts any identity's JWT
here; a factor another person's token satisfies would prove nothing). While the factor is owed, ``authQueries``
shows :func:`ext_jwt_auth_query`.

Design choice: a valid JWT satisfies the factor until the instant its verification would start failing, its
``exp`` plus :data:`~controller.authentication.external_jwt.CLOCK_LEEWAY_SECONDS`; from then on the session is
partial again until a request brings a fresh one. The reference verifies the bearer token on every request; this
keeps its sliding behaviour while verifying only when the factor is owed: requests without a bearer token, of a
satisfied session, or of a session that owes no JWT never verify one. The check runs before the request's handler
(``web/guards.py``), so a request that brings the fresh JWT is served as fully authenticated. The satisfied-until
instant is persisted with the session (:meth:`ApiSessions.mark_ext_jwt_satisfied`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from controller.authentication.api_sessions import LiveSession
from controller.authentication.external_jwt import CLOCK_LEEWAY_SECONDS, Claim, ExternalJwtError, select_signer, verify
from controller.authentication.parts import LoginParts
from controller.authentication.session_start import auth_policy, method_allowed, start_session
from controller.errors import ApiError
from controller.resources.identities import identity_disabled
from storage.store import ReadTxn

__all__ = ["AUTHENTICATOR_PREFIX", "MAX_BEARER_TOKENS", "ext_jwt_auth_query", "login_external_jwt",
           "satisfy_ext_jwt_factor"]

log = logging.getLogger("tollgate.auth")

SIGNERS = "external-jwt-signers"
#: A session authenticated by an external JWT has ``authenticatorId`` = this prefix + the signer id.
AUTHENTICATOR_PREFIX = "extJwtId:"
#: Bearer tokens of one request that are tried; the others are ignored, as in the reference.
MAX_BEARER_TOKENS = 2


def ext_jwt_auth_query(txn: ReadTxn, signer_id: str) -> dict[str, Any]:
    """The auth query of a session owing a JWT from ``signer_id``: ``{typeId: "EXT-JWT", provider: "url",
    httpUrl}``, where ``httpUrl`` is the signer's ``externalAuthUrl`` and is left out when it has none."""
    query: dict[str, Any] = {"typeId": "EXT-JWT", "provider": "url"}
    signer = txn.get(SIGNERS, signer_id)
    url = signer.get("externalAuthUrl") if signer else None
    if url:
        query["httpUrl"] = url
    return query


async def login_external_jwt(parts: LoginParts, bearer_tokens: Sequence[str], body: Any, ip: str) -> dict[str, Any]:
    """Authenticate with the first bearer token that passes (see the module doc) and start an API session.

    Args:
        controller: the running controller.
        bearer_tokens: the request's ``Authorization: Bearer`` tokens, in order; only the first two are tried.
        body: the decoded login body (``envInfo``, ``sdkInfo``, ``configTypes``), or None.
        ip: the client's address.

    Returns:
        The stored API session row.

    Raises:
        ApiError: 401 INVALID_AUTH when there is no token or none passes.
    """
    if not bearer_tokens:
        log.info("external JWT login refused", extra={"reason": "no bearer token"})
    for position, token in enumerate(bearer_tokens[:MAX_BEARER_TOKENS], start=1):
        try:
            identity, policy, signer_id = await _primary(parts, token)
        except ExternalJwtError as error:
            log.info("external JWT login refused", extra={"reason": error.reason, "bearerToken": position})
            continue
        return await start_session(parts, identity, AUTHENTICATOR_PREFIX + signer_id, policy, "extJwt", body,
                                   ip)
    raise ApiError("INVALID_AUTH")


async def satisfy_ext_jwt_factor(parts: LoginParts, session: LiveSession, bearer_tokens: Sequence[str]) -> bool:
    """Complete ``session``'s external JWT factor with the first of ``bearer_tokens`` (at most two) that is a valid
    JWT from the required signer naming the session's identity; refused tokens are logged, never raised.

    Returns:
        True when a token satisfied the factor (until its expiry, persisted); False when the session owes no JWT
        or no token passed.
    """
    signer_id = session.ext_jwt_signer_id
    if signer_id is None:
        return False
    for position, token in enumerate(bearer_tokens[:MAX_BEARER_TOKENS], start=1):
        try:
            until = await _secondary(parts, token, signer_id, session.identity_id)
        except ExternalJwtError as error:
            log.info("external JWT second factor refused",
                     extra={"reason": error.reason, "bearerToken": position, "apiSessionId": session.id})
            continue
        await parts.sessions.mark_ext_jwt_satisfied(session.id, until)
        return True
    return False


def _signer(parts: LoginParts, token: str) -> Mapping[str, Any]:
    """The enabled signer ``token`` claims to come from (:func:`select_signer`); raises ExternalJwtError."""
    with parts.domain.read() as ctx:
        signers = list(ctx.txn.scan(SIGNERS))
    return select_signer(token, signers)


def _identity(txn: ReadTxn, claim: Claim) -> dict[str, Any]:
    """The enabled identity ``claim`` names; raises ExternalJwtError when there is none or it is disabled."""
    if claim.is_external_id:
        identity_id = txn.by_unique("identities", "externalId", claim.subject)
        identity = txn.get("identities", identity_id) if identity_id else None
    else:
        identity = txn.get("identities", claim.subject)
    what = "externalId" if claim.is_external_id else "id"
    if identity is None:
        raise ExternalJwtError(f"no identity has {what} {claim.subject!r}")
    return identity


def _check_enabled(identity: Mapping[str, Any], now: float) -> None:
    if identity_disabled(identity, now):
        raise ExternalJwtError(f"identity {identity['id']!r} is disabled")


async def _primary(parts: LoginParts, token: str) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """The identity, its auth policy and the signer id of a token that logs in; raises ExternalJwtError."""
    claim = await verify(token, _signer(parts, token), parts.jwks, now=parts.clock.now())
    with parts.domain.read() as ctx:
        identity = _identity(ctx.txn, claim)
        policy = auth_policy(ctx.txn, identity)
    _check_enabled(identity, parts.clock.now())
    if not method_allowed(policy, "extJwt"):
        raise ExternalJwtError(f"auth policy {identity.get('authPolicyId')!r} does not allow external JWT login")
    allowed = (((policy or {}).get("primary") or {}).get("extJwt") or {}).get("allowedSigners") or []
    if allowed and claim.signer_id not in allowed:
        raise ExternalJwtError(f"auth policy {identity.get('authPolicyId')!r} does not allow signer "
                               f"{claim.signer_id!r}")
    return identity, policy, claim.signer_id


async def _secondary(parts: LoginParts, token: str, signer_id: str, identity_id: str) -> float:
    """Until when (wall-clock epoch seconds) ``token`` satisfies the factor owed to ``signer_id`` by a session of
    ``identity_id``; raises ExternalJwtError when it does not satisfy it."""
    signer = _signer(parts, token)
    if signer["id"] != signer_id:
        raise ExternalJwtError(f"token is for signer {signer['id']!r}, the auth policy requires {signer_id!r}")
    claim = await verify(token, signer, parts.jwks, now=parts.clock.now())
    with parts.domain.read() as ctx:
        identity = _identity(ctx.txn, claim)
    if identity["id"] != identity_id:
        raise ExternalJwtError(f"token names identity {identity['id']!r}, the session is {identity_id!r}'s")
    _check_enabled(identity, parts.clock.now())
    return claim.expires_at + CLOCK_LEEWAY_SECONDS
