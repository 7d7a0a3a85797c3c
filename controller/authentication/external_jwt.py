"""Verifying a JWT issued by an external identity provider: which signer vouches for which subject.

Login by ``POST /authenticate?method=ext-jwt`` takes the bearer token, picks its signer with :func:`select_signer`
(signer rows as ``external-jwt-signers`` stores them) and checks it with :func:`verify`. Any failure raises
:class:`ExternalJwtError`, whose reason goes to the log; the client only ever learns 401 INVALID_AUTH.

What :func:`verify` accepts:

* a signature by the signer's certificate key (``certPem``) or by the key of its JWKS (``jwksEndpoint``) that the
  token's ``kid`` names, with one of :data:`ALLOWED_ALGORITHMS`: RSA (PKCS#1 v1.5 or PSS) or ECDSA, never ``none``
  and never HMAC (an HMAC "secret" would be the public key). The key must fit the algorithm (RSA of at least
  2048 bits, or EC on the algorithm's own curve) and, for a JWKS key that declares an ``alg``, be meant for it;
* ``iss`` equal to the signer's issuer, and ``aud`` (a string or a list) containing the signer's audience when the
  signer has one;
* ``exp`` present, and ``nbf`` / ``iat`` when present, compared with the caller's ``now`` (wall-clock epoch seconds)
  allowing :data:`CLOCK_LEEWAY_SECONDS` of clock difference with the identity provider. PyJWT only checks the
  signature: the time checks are done here so they follow the ``now`` passed in, virtual in tests;
* the claim the signer's ``claimsProperty`` names (``sub`` by default) holding a non-empty string: an identity id,
  or an identity's ``externalId`` when the signer has ``useExternalId``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.types import Options

from controller.authentication.jwks import JwksCache, JwksError, PublicKey

__all__ = [
    "ALLOWED_ALGORITHMS",
    "CLOCK_LEEWAY_SECONDS",
    "DEFAULT_CLAIMS_PROPERTY",
    "Claim",
    "ExternalJwtError",
    "select_signer",
    "verify",
]

#: Signature algorithms a token may use; the curve each ECDSA algorithm requires is in ``_EC_CURVES``.
ALLOWED_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"})
#: Seconds by which the identity provider's clock may differ from ours when checking ``exp``, ``nbf`` and ``iat``.
CLOCK_LEEWAY_SECONDS = 30.0
#: The claim naming the subject when a signer does not set ``claimsProperty``.
DEFAULT_CLAIMS_PROPERTY = "sub"

_EC_CURVES = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}

# Signature only, with RSA keys under 2048 bits refused: every claim is checked by _check_claims against `now`.
_SIGNATURE_ONLY: Options = {
    "verify_signature": True,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
    "require": [],
    "enforce_minimum_key_length": True,
}


class ExternalJwtError(Exception):
    """The token is not accepted. The login answers 401 INVALID_AUTH without saying why.

    Attributes:
        reason: Why, for the log.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Claim:
    """What a verified token vouches for.

    Attributes:
        signer_id: Id of the external JWT signer that signed it.
        subject: The value of the signer's ``claimsProperty`` claim.
        is_external_id: True when ``subject`` is an identity's ``externalId``, False when it is an identity id.
        expires_at: the token's ``exp`` (epoch seconds).
    """

    signer_id: str
    subject: str
    is_external_id: bool
    expires_at: float


def select_signer(token: str, signers: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The signer whose keys must verify ``token``, chosen from its unverified header and payload.

    The signer declaring the header's ``kid`` is chosen when there is one, else the signer whose issuer equals the
    payload's ``iss`` (both are unique among signers). Nothing is verified here: :func:`verify` does that.

    Args:
        token: The compact JWT, without the ``Bearer`` prefix.
        signers: Every external JWT signer row.

    Returns:
        The chosen signer row, which is enabled.

    Raises:
        ExternalJwtError: The token is not a JWT, no signer matches it, or the matching signer is disabled.
    """
    header, payload = _unverified(token)
    kid, issuer = header.get("kid"), payload.get("iss")
    by_kid: Mapping[str, Any] | None = None
    by_issuer: Mapping[str, Any] | None = None
    for signer in signers:
        if kid and signer.get("kid") == kid:
            by_kid = signer
        if isinstance(issuer, str) and signer.get("issuer") == issuer:
            by_issuer = signer
    chosen = by_kid if by_kid is not None else by_issuer
    if chosen is None:
        raise ExternalJwtError(f"no external JWT signer has kid {kid!r} or issuer {issuer!r}")
    _require_enabled(chosen)
    return chosen


async def verify(token: str, signer: Mapping[str, Any], keys: JwksCache, *, now: float) -> Claim:
    """Verify ``token`` as issued by ``signer`` (see the module doc for every check).

    Args:
        token: The compact JWT, without the ``Bearer`` prefix.
        signer: An external JWT signer row, usually from :func:`select_signer`.
        keys: Where the keys of JWKS signers come from; a fetch may happen here, bounded by the cache's timeout.
        now: Current wall-clock time, epoch seconds.

    Returns:
        The signer's id and the subject the token names.

    Raises:
        ExternalJwtError: The signer is disabled, its key is unavailable, or the token fails any check.
    """
    _require_enabled(signer)
    header, _ = _unverified(token)
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in ALLOWED_ALGORITHMS:
        raise ExternalJwtError(f"algorithm {algorithm!r} is not allowed")
    key = await _verification_key(signer, header, algorithm, keys)
    _check_key_fits(key, algorithm)
    try:
        payload = jwt.decode(token, key, algorithms=[algorithm], options=_SIGNATURE_ONLY)
    except jwt.PyJWTError as error:
        raise ExternalJwtError(f"signature not accepted: {error}") from error
    _check_claims(payload, signer, now)
    claims_property = signer.get("claimsProperty") or DEFAULT_CLAIMS_PROPERTY
    subject = payload.get(claims_property)
    if not isinstance(subject, str) or not subject.strip():
        raise ExternalJwtError(f"claim {claims_property!r} is missing or not a non-empty string")
    return Claim(signer_id=signer["id"], subject=subject, is_external_id=bool(signer.get("useExternalId")),
                 expires_at=float(payload["exp"]))


def _require_enabled(signer: Mapping[str, Any]) -> None:
    if not signer.get("enabled"):
        raise ExternalJwtError(f"external JWT signer {signer.get('id')!r} ({signer.get('name')!r}) is disabled")


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and payload of ``token`` as written, signature unchecked."""
    try:
        decoded = jwt.decode_complete(token, options={"verify_signature": False})
    except jwt.PyJWTError as error:
        raise ExternalJwtError(f"not a JWT: {error}") from error
    # PyJWT has refused a header or payload that is not a JSON object, and a kid that is not a string.
    return decoded["header"], decoded["payload"]


async def _verification_key(signer: Mapping[str, Any], header: Mapping[str, Any], algorithm: str,
                            keys: JwksCache) -> PublicKey:
    cert_pem, endpoint = signer.get("certPem"), signer.get("jwksEndpoint")
    if cert_pem:
        return _certificate_key(cert_pem)
    if not endpoint:
        raise ExternalJwtError(f"external JWT signer {signer.get('id')!r} has neither certPem nor jwksEndpoint")
    kid = header.get("kid")
    try:
        jwk = await keys.key(endpoint, kid)
    except JwksError as error:
        raise ExternalJwtError(error.reason) from error
    if jwk.algorithm is not None and jwk.algorithm != algorithm:
        raise ExternalJwtError(f"key {kid!r} is for {jwk.algorithm}, the token uses {algorithm}")
    return jwk.key


@functools.lru_cache(maxsize=64)
def _certificate_key(cert_pem: str) -> PublicKey:
    """The public key of a signer's certificate; a handful of signers, so parsed once each."""
    try:
        key = x509.load_pem_x509_certificate(cert_pem.encode()).public_key()
    except ValueError as error:
        raise ExternalJwtError(f"signer certificate unreadable: {error}") from error
    if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        raise ExternalJwtError(f"signer certificate holds a {type(key).__name__}, not an RSA or EC key")
    return key


def _check_key_fits(key: PublicKey, algorithm: str) -> None:
    if algorithm in _EC_CURVES:
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != _EC_CURVES[algorithm]:
            raise ExternalJwtError(f"{algorithm} needs an EC key on {_EC_CURVES[algorithm]}")
    elif not isinstance(key, rsa.RSAPublicKey):
        raise ExternalJwtError(f"{algorithm} needs an RSA key")


def _check_claims(payload: Mapping[str, Any], signer: Mapping[str, Any], now: float) -> None:
    if payload.get("iss") != signer["issuer"]:
        raise ExternalJwtError(f"issuer {payload.get('iss')!r} is not the signer's {signer['issuer']!r}")
    audience = signer.get("audience")
    if audience:
        token_audience = payload.get("aud")
        audiences = [token_audience] if isinstance(token_audience, str) else token_audience
        if not isinstance(audiences, list) or audience not in audiences:
            raise ExternalJwtError(f"audience {token_audience!r} does not include {audience!r}")
    expires = _instant(payload, "exp")
    if expires is None:
        raise ExternalJwtError("exp is missing")
    if now >= expires + CLOCK_LEEWAY_SECONDS:
        raise ExternalJwtError(f"expired at {expires:g}, now is {now:g}")
    not_before = _instant(payload, "nbf")
    if not_before is not None and now + CLOCK_LEEWAY_SECONDS < not_before:
        raise ExternalJwtError(f"not valid before {not_before:g}, now is {now:g}")
    issued = _instant(payload, "iat")
    if issued is not None and issued > now + CLOCK_LEEWAY_SECONDS:
        raise ExternalJwtError(f"issued at {issued:g}, in the future (now is {now:g})")


def _instant(payload: Mapping[str, Any], name: str) -> float | None:
    """A NumericDate claim, or None when absent; anything but a finite number is refused."""
    value = payload.get(name)
    if value is None:
        return None
    try:
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer too large for a float
        number = math.nan
    if not math.isfinite(number):
        raise ExternalJwtError(f"{name} is not a number: {value!r}")
    return number
