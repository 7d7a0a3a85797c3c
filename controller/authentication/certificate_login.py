"""Certificate login: ``POST /authenticate?method=cert`` with the client certificate of the TLS connection.

The certificate must have been issued by the controller's CA or by a stored CA that is verified and has
authentication enabled (TLS has already checked the chain; a CA deleted, unverified or with authentication
disabled since is refused here). It then names its identity in one of two ways: when its CA has an
``externalIdClaim``, the identity whose ``externalId`` the claim finds in the certificate; otherwise the identity
whose cert authenticator holds exactly this certificate (by SHA-1 fingerprint). The identity's auth policy must
allow certificate login, and a certificate outside its validity dates logs in only where the policy allows expired
certificates. Every failure is 401 INVALID_AUTH, without saying which rule refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from controller.authentication.parts import LoginParts
from controller.authentication.session_start import auth_policy, start_session
from controller.certificates.client_certificates import issuing_ca, login_ca, network_issued, within_validity
from controller.certificates.external_id import ExternalIdError, external_id
from controller.certificates.issuing import fingerprint
from controller.errors import ApiError

__all__ = ["EXTERNAL_ID_AUTHENTICATOR", "login_certificate"]

log = logging.getLogger("tollgate.auth")

EXTERNAL_ID_AUTHENTICATOR = "internal"
"""The ``authenticatorId`` of a session whose certificate named its identity through a CA's external id claim
(no stored authenticator vouched for it; the reference uses the same word)."""


def _expired_allowed(policy: Mapping[str, Any] | None) -> bool:
    return bool(((policy or {}).get("primary") or {}).get("cert", {}).get("allowExpiredCerts", True))


async def login_certificate(parts: LoginParts, certificate: x509.Certificate | None, body: Any,
                            ip: str) -> dict[str, Any]:
    """Authenticate by client certificate and start an API session; returns the stored session row.

    Raises:
        ApiError: 401 INVALID_AUTH when there is no certificate, no trusted CA issued it, it names no identity,
            or the identity or its auth policy refuses it (:func:`start_session`).
    """
    if certificate is None:
        raise ApiError("INVALID_AUTH")
    with parts.domain.read() as ctx:
        ca = None
        if not network_issued(certificate, parts.pki.ca_pem):
            ca = issuing_ca(ctx.txn, certificate, login_ca)
            if ca is None:
                raise ApiError("INVALID_AUTH")
        claimed = _external_id(certificate, ca)
        if claimed is not None:
            identity_id = ctx.txn.by_unique("identities", "externalId", claimed)
            authenticator_id = EXTERNAL_ID_AUTHENTICATOR
        else:
            authenticator_id = ctx.txn.by_unique("authenticators", "fingerprint", fingerprint(certificate)) or ""
            authenticator = ctx.txn.get("authenticators", authenticator_id) if authenticator_id else None
            identity_id = authenticator["identityId"] if authenticator else None
        identity = ctx.txn.get("identities", identity_id) if identity_id else None
        policy = auth_policy(ctx.txn, identity)
    if identity is None:
        raise ApiError("INVALID_AUTH")
    if not within_validity(certificate, parts.clock.now()) and not _expired_allowed(policy):
        raise ApiError("INVALID_AUTH")
    return await start_session(parts, identity, authenticator_id, policy, "cert", body, ip, certificate)


def _external_id(certificate: x509.Certificate, ca: Mapping[str, Any] | None) -> str | None:
    """The external id the CA's claim finds in the certificate; None when the CA has no claim or the certificate
    does not carry one (then the certificate itself must be an authenticator's, as the reference falls back)."""
    claim = (ca or {}).get("externalIdClaim")
    if not claim:
        return None
    try:
        return external_id(certificate, claim)
    except ExternalIdError as exc:
        log.info("certificate carries no external id", extra={"caId": (ca or {}).get("id"), "reason": str(exc)})
        return None
