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
from controller.errors import ApiError

__all__ = ["Credentials", "login"]


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
    of ``method`` (``parts.login_failures``).

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
        raise
    session = parts.sessions.get(row["id"])
    if session is not None and session.ext_jwt_owed and credentials.bearer_tokens:
        await satisfy_ext_jwt_factor(parts, session, credentials.bearer_tokens)
    return row
