"""The tokens and JWTs clients enrol with.

An enrollment's token is never stored. The row keeps a random nonce and the SHA-256 of the token; the token is the
HMAC-SHA-256 of the nonce under the controller's token key (``data/pki/enrollment-tokens.key``, mode 0600, made on
the first start), shaped as a UUID (as OpenZiti clients expect). So a copy of the store alone enrols nobody, while
an admin still sees every outstanding token and JWT, as the reference shows them.

An enrollment's JWT is derived from its row when the row is shown (identity detail, enrollment list, edge router
detail): the claims are a function of the row and of the controller's address, so nothing signed is stored and a
refreshed enrollment shows its new JWT at once. Signatures are remembered per claims, so a row shown again costs no
new signature (and an RS256 signature, deterministic anyway, is the same every time).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.certificates.pki import write_private_file
from controller.certificates.signing import TokenSigner
from controller.resources.enrollments import TOKEN_DIGEST, TOKEN_NONCE, enrollment_claims

__all__ = ["EnrollmentJwts", "load_token_key"]

_REMEMBERED = 4096
_KEY_BYTES = 32


def load_token_key(path: Path) -> bytes:
    """The controller's enrollment token key at ``path``, made (32 random bytes, mode 0600) when missing."""
    if not path.exists():
        write_private_file(path, secrets.token_bytes(_KEY_BYTES))
    key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} does not hold a {_KEY_BYTES}-byte key")
    return key


class EnrollmentJwts:
    """Signs enrollment JWTs and the CA enrolment JWT for one controller.

    Args:
        signer: the server key's signer.
        address: the controller's URL as endpoints reach it (``https://host:port``, no trailing slash); it becomes
            the ``iss`` claim, which OpenZiti SDKs connect to. It may be changed once the real port is known.
        token_key: the key enrollment tokens are derived with (:func:`load_token_key`).
    """

    def __init__(self, signer: TokenSigner, address: str, token_key: bytes) -> None:
        self._signer = signer
        self.address = address.rstrip("/")
        self._token_key = token_key
        self._sign = functools.lru_cache(maxsize=_REMEMBERED)(self._sign_claims)

    @property
    def signer(self) -> TokenSigner:
        """The server key's signer."""
        return self._signer

    @signer.setter
    def signer(self, signer: TokenSigner) -> None:
        """Sign with ``signer`` from now on (a renewed server certificate): JWTs signed earlier are forgotten, so
        every JWT handed out from now on names the new certificate."""
        self._signer = signer
        self._sign.cache_clear()

    def new_token(self) -> dict[str, str]:
        """The row fields of a fresh token: its nonce and its digest."""
        nonce = secrets.token_hex(16)
        return {TOKEN_NONCE: nonce, TOKEN_DIGEST: self.digest(self._derive(nonce))}

    def token(self, row: Mapping[str, Any]) -> str:
        """The token of a stored enrollment row."""
        return self._derive(str(row[TOKEN_NONCE]))

    @staticmethod
    def digest(token: str) -> str:
        """The lower-case hex SHA-256 of a token, by which its row is found."""
        return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()

    def _derive(self, nonce: str) -> str:
        mac = hmac.digest(self._token_key, nonce.encode("ascii"), "sha256")
        return str(uuid.UUID(bytes=mac[:16], version=4))

    def enrollment(self, row: Mapping[str, Any]) -> str:
        """The JWT of a stored enrollment row: ``em`` its method, ``sub`` its identity or router, ``jti`` its
        token, ``exp`` its expiry, ``iss`` the controller's address."""
        claims = enrollment_claims(row, self.token(row), self.address)
        return self._sign(tuple(sorted((k, _frozen(v)) for k, v in claims.items())))

    def ca(self, ca_id: str) -> str:
        """The JWT with which a client enrols through a CA (``em: ca``): no expiry, ``sub`` and ``jti`` the CA's
        id, and the issuer with a trailing slash, as the reference writes it."""
        return self.signer.sign({"em": "ca", "ctrls": None, "iss": f"{self.address}/", "sub": ca_id, "jti": ca_id})

    def _sign_claims(self, claims: tuple[tuple[str, Any], ...]) -> str:
        return self.signer.sign({k: list(v) if isinstance(v, tuple) else v for k, v in claims})


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
