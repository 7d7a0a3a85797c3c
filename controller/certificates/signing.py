"""Signatures made with the controller's server key: JWTs, the JWKS that verifies them, and nonce challenges.

The server key is the one in the TLS server certificate, so an OpenZiti SDK can check an enrolment JWT against the
certificate the controller presents. RSA keys sign RS256; EC keys sign ES256, ES384 or ES512 by curve size. Every
signature names its key with ``kid``, the lower-case hex SHA-1 of the server certificate's DER, as the reference
controller does.

Nonce challenges (``POST /enroll/challenge``): the answer's ``signature`` is the base64url (no padding) signature
over the UTF-8 bytes of the nonce, made exactly as the signature part of a JWS with ``algorithm`` (RSASSA-PKCS1-v1_5
with SHA-256 for RS256; the fixed-length ``r || s`` of RFC 7518 3.4 for ES*). A client verifies it with the JWKS key
whose ``kid`` matches, e.g. in Python::

    jwk = jwt.PyJWK(key_from_jwks)
    jwk.Algorithm.verify(nonce.encode(), jwk.key, jwt.utils.base64url_decode(answer["signature"]))

Only UUIDs are signed: a UUID contains no ``.``, so no nonce can ever be the signing input of a JWS
(``header.payload``), and the challenge cannot be used to obtain a token signed by the controller.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.utils import base64url_encode, to_base64url_uint

from controller.certificates.issuing import fingerprint
from controller.certificates.pki import Pki, ServerKey
from controller.errors import FieldError

__all__ = ["TokenSigner"]

# JWS algorithm and JWK curve name for each curve an EC server key may use (RFC 7518 3.4 and 6.2.1.1).
_EC_ALGORITHMS: dict[str, tuple[str, str]] = {
    ec.SECP256R1.name: ("ES256", "P-256"),
    ec.SECP384R1.name: ("ES384", "P-384"),
    ec.SECP521R1.name: ("ES512", "P-521"),
}
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class TokenSigner:
    """Signs with the server key and publishes its public half.

    Holds the key in memory (loaded once) and never changes after construction, so one signer may be shared by
    every task and thread.
    """

    __slots__ = ("_ca_pem", "_chain", "_key", "_retired", "algorithm", "kid")

    algorithm: str
    kid: str

    def __init__(
        self, key: ServerKey, certificate: x509.Certificate, ca_certificates: tuple[x509.Certificate, ...],
        *, retired: x509.Certificate | None = None,
    ) -> None:
        """Use ``key`` to sign, presenting ``certificate`` (its public half) and the CA chain above it.

        ``retired`` is the certificate of the same key that ``certificate`` renewed: JWTs signed before the renewal
        name it as their ``kid``, so it is still published (:meth:`jwks`) and accepted (:attr:`kids`).

        Raises:
            ValueError: ``key`` does not match ``certificate`` (or ``retired``), or is an EC key on a curve without
                a JWS algorithm.
        """
        if key.public_key() != certificate.public_key() or (
                retired is not None and key.public_key() != retired.public_key()):
            raise ValueError("the server key does not match the server certificate")
        self._key = key
        self._ca_pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in ca_certificates)
        self._chain = (certificate, *ca_certificates)
        self._retired = retired if retired is not None and retired != certificate else None
        self.algorithm = _algorithm(key)
        self.kid = fingerprint(certificate)

    @classmethod
    def from_pki(cls, pki: Pki, *, renewing: TokenSigner | None = None) -> TokenSigner:
        """A signer with ``pki``'s server key and certificate; ``renewing``: the signer whose certificate this one
        renews (its certificate is kept as the retired one). Raises PkiError when the key cannot be read."""
        retired = renewing._chain[0] if renewing is not None else None
        return cls(pki.load_server_key(), pki.server_cert, (pki.ca_cert,), retired=retired)

    @property
    def kids(self) -> frozenset[str]:
        """The key ids this signer answers to: its certificate's, and the retired certificate's."""
        return frozenset({self.kid} | ({fingerprint(self._retired)} if self._retired is not None else set()))

    def sign(self, claims: Mapping[str, Any]) -> str:
        """A compact JWT of ``claims`` with header ``{"alg": algorithm, "kid": kid, "typ": "JWT"}``.

        Claims are written as given: nothing (``iat``, ``exp``...) is added. ``datetime`` values of ``exp``, ``iat``
        and ``nbf`` become NumericDates.
        """
        return jwt.encode(dict(claims), self._key, algorithm=self.algorithm, headers={"kid": self.kid})

    def jwks(self) -> dict[str, Any]:
        """The public key as a JWK Set: one signing key for the certificate, then one for the retired certificate.

        ``{"keys": [{kty, kid, use: "sig", alg, n, e}]}`` for RSA or ``{kty, kid, use, alg, crv, x, y}`` for EC,
        plus ``x5c``: the server certificate then its CA, each as standard base64 of the DER (RFC 7517 4.7).
        """
        certificates = (self._chain[0], *((self._retired,) if self._retired is not None else ()))
        return {"keys": [self._jwk(certificate) for certificate in certificates]}

    def _jwk(self, certificate: x509.Certificate) -> dict[str, Any]:
        """The public key as the JWK of ``certificate``."""
        public = self._key.public_key()
        key: dict[str, Any] = {"kid": fingerprint(certificate), "use": "sig", "alg": self.algorithm}
        if isinstance(public, rsa.RSAPublicKey):
            numbers = public.public_numbers()
            key |= {"kty": "RSA", "n": _b64url_uint(numbers.n), "e": _b64url_uint(numbers.e)}
        else:
            point = public.public_numbers()
            size = (public.curve.key_size + 7) // 8  # fixed width, RFC 7518 6.2.1.2
            key |= {
                "kty": "EC",
                "crv": _EC_ALGORITHMS[public.curve.name][1],
                "x": base64url_encode(point.x.to_bytes(size, "big")).decode("ascii"),
                "y": base64url_encode(point.y.to_bytes(size, "big")).decode("ascii"),
            }
        chain = (certificate, *self._chain[1:])
        key["x5c"] = [base64.b64encode(c.public_bytes(serialization.Encoding.DER)).decode("ascii") for c in chain]
        return key

    def sign_nonce(self, nonce: str) -> dict[str, str]:
        """Answer a nonce challenge: ``{"signature", "algorithm", "kid", "caPool"}``.

        ``signature`` is described in the module docstring; ``caPool`` is the PEM of the CA certificates that the
        server certificate chains to.

        Raises:
            FieldError: ``nonce`` is not a UUID in its hyphenated form.
        """
        if not _UUID.fullmatch(nonce):
            raise FieldError("nonce", "nonce must be a UUID", nonce)
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        signature = algorithm.sign(nonce.encode("utf-8"), self._key)
        return {
            "signature": base64url_encode(signature).decode("ascii"),
            "algorithm": self.algorithm,
            "kid": self.kid,
            "caPool": self._ca_pem,
        }


def _algorithm(key: ServerKey) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    try:
        return _EC_ALGORITHMS[key.curve.name][0]
    except KeyError:
        raise ValueError(f"no JWS algorithm for an EC key on {key.curve.name}") from None


def _b64url_uint(value: int) -> str:
    return to_base64url_uint(value).decode("ascii")
