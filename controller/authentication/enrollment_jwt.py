"""The JWTs clients enrol with, signed with the controller's server key.

An enrollment's JWT is derived from its stored row when the row is shown (identity detail, enrollment list, edge
router detail): the claims are a function of the row and of the controller's address, so nothing signed is stored
and a refreshed enrollment shows its new JWT at once. Signatures are remembered per claims, so a row shown again
costs no new signature (and an RS256 signature, deterministic anyway, is the same every time).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from controller.authentication.signing import TokenSigner
from controller.resources.enrollments import enrollment_claims

__all__ = ["EnrollmentJwts"]

_REMEMBERED = 4096


class EnrollmentJwts:
    """Signs enrollment JWTs and the CA enrolment JWT for one controller.

    Args:
        signer: the server key's signer.
        address: the controller's URL as endpoints reach it (``https://host:port``, no trailing slash); it becomes
            the ``iss`` claim, which OpenZiti SDKs connect to. It may be changed once the real port is known.
    """

    def __init__(self, signer: TokenSigner, address: str) -> None:
        self.signer = signer
        self.address = address.rstrip("/")
        self._sign = functools.lru_cache(maxsize=_REMEMBERED)(self._sign_claims)

    def enrollment(self, row: Mapping[str, Any]) -> str:
        """The JWT of a stored enrollment row: ``em`` its method, ``sub`` its identity or router, ``jti`` its
        token, ``exp`` its expiry, ``iss`` the controller's address."""
        claims = enrollment_claims(row, self.address)
        return self._sign(tuple(sorted((k, _frozen(v)) for k, v in claims.items())))

    def ca(self, ca_id: str) -> str:
        """The JWT with which a client enrols through a CA (``em: ca``): no expiry, ``sub`` and ``jti`` the CA's
        id, and the issuer with a trailing slash, as the reference writes it."""
        return self.signer.sign({"em": "ca", "ctrls": None, "iss": f"{self.address}/", "sub": ca_id, "jti": ca_id})

    def _sign_claims(self, claims: tuple[tuple[str, Any], ...]) -> str:
        return self.signer.sign({k: list(v) if isinstance(v, tuple) else v for k, v in claims})


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
