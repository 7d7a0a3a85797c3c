"""``POST /authenticate?method=…``: one entry for every primary login method.

Each method turns the credentials of the request into an identity and the authenticator that vouched for it, then
ends in :func:`controller.authentication.session_start.start_session`. Whatever the method, bearer JWTs of the login
request also count towards the external JWT second factor the auth policy may require
(:mod:`controller.authentication.ext_jwt_login`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography import x509

from controller.authentication.certificate_login import login_certificate
from controller.authentication.ext_jwt_login import login_external_jwt, satisfy_ext_jwt_factor
from controller.authentication.parts import LoginParts
from controller.authentication.password_login import login_password
from controller.authentication.session_start import auth_policy
from controller.errors import ApiError
from controller.model.events import AUTHENTICATION, Event

__all__ = ["Credentials", "login"]

_PASSWORD_METHOD = "password"


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a login request carries.

    Attributes:
        body: the decoded JSON body (None when empty): a username and password, and ``envInfo``, ``sdkInfo``
            and ``configTypes`` for every method.
        ip: the client's address, kept with the session.
        certificate: the TLS client certificate of the connection, if any.
        bearer_tokens: the ``Authorization: Bearer`` tokens of the request, in order.
    """

    body: Any
    ip: str
    certificate: x509.Certificate | None = None
    bearer_tokens: tuple[str, ...] = ()


async def login(parts: LoginParts, method: str, credentials: Credentials) -> dict[str, Any]:
    """Authenticate with ``method`` (``password``, ``cert`` or ``ext-jwt``) and start an API session; returns the
    stored session row.

    The session starts partially authenticated when it owes a second factor; a bearer JWT of this request that
    satisfies the external JWT factor is taken into account before this returns. A refusal counts as a login failure
    of ``method`` (``parts.login_failures``) and, unless throttled, is an ``authentication`` ``fail`` event naming
    the method and the reason (never the credentials).

    Raises:
        ApiError: 400 INVALID_AUTH_METHOD for another method; 401 INVALID_AUTH when the credentials do not
            authenticate; 400 COULD_NOT_VALIDATE for a malformed password body.
    """
    try:
        match method:
            case "password":
                row = await login_password(parts, credentials.body, credentials.ip)
            case "cert":
                row = await login_certificate(parts, credentials.certificate, credentials.body, credentials.ip)
            case "ext-jwt":
                row = await login_external_jwt(parts, credentials.bearer_tokens, credentials.body,
                                               credentials.ip)
            case _:
                raise ApiError("INVALID_AUTH_METHOD")
    except ApiError as refused:
        parts.login_failures.login_failed(method, refused.code)
        if refused.code != "RATE_LIMITED":  # refused before any work: throttled guesses write nothing
            await parts.domain.record(_failure(parts, method, credentials, refused))
        raise
    session = parts.sessions.get(row["id"])
    if session is not None and session.ext_jwt_owed and credentials.bearer_tokens:
        await satisfy_ext_jwt_factor(parts, session, credentials.bearer_tokens)
    return row


def _failure(parts: LoginParts, method: str, credentials: Credentials, refused: ApiError) -> Event:
    """The ``authentication`` ``fail`` event of a refused login, in OpenZiti's field names. A password login names
    the identity and authenticator its username belongs to, when it belongs to one; nothing else of the request is
    kept (no username, password, certificate or token)."""
    authenticator: dict[str, Any] | None = None
    identity: dict[str, Any] | None = None
    body = credentials.body
    username = body.get("username") if method == _PASSWORD_METHOD and isinstance(body, dict) else None
    with parts.domain.read() as ctx:
        if isinstance(username, str) and username:
            authenticator_id = ctx.txn.by_unique("authenticators", "username", username)
            authenticator = ctx.txn.get("authenticators", authenticator_id) if authenticator_id else None
            identity = ctx.txn.get("identities", authenticator["identityId"]) if authenticator else None
        policy = auth_policy(ctx.txn, identity)
    return Event(AUTHENTICATION, "fail", {
        "type": method, "authenticator_id": authenticator["id"] if authenticator else None,
        "external_jwt_signer_id": None, "identity_id": identity["id"] if identity else None,
        "auth_policy_id": policy["id"] if policy else None, "remote_address": credentials.ip, "success": False,
        "reason": f"{refused.code}: {refused.message}"})
