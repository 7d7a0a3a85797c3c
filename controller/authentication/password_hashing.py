"""Slow, salted password hashing for updb authenticators, with stdlib :func:`hashlib.scrypt`.

Stored form (self-describing, so the cost can be raised later without breaking existing hashes)::

    scrypt$<n>$<r>$<p>$<salt, standard base64>$<derived key, standard base64>

New hashes use n=2**14, r=8, p=1 (16 MiB of memory), a 16-byte random salt and a 32-byte key. Verification reads the
parameters from the stored string, within sane bounds so a corrupted or hostile row cannot make the controller
allocate gigabytes. Passwords are encoded as UTF-8 without Unicode normalisation (what a client sends is what is
hashed); lone surrogates, which JSON allows, are encoded with ``surrogatepass`` so they hash instead of raising.

Each call takes tens of milliseconds of CPU: call from a worker thread, not from the Trio event loop.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PARAMS",
    "ScryptParams",
    "dummy_verify",
    "hash_password",
    "needs_rehash",
    "parse_stored",
    "use_params",
    "verify_password",
]

_SCHEME = "scrypt"
_SALT_BYTES = 16


@dataclass(frozen=True, slots=True)
class ScryptParams:
    """scrypt cost parameters and derived-key length."""

    n: int
    r: int
    p: int
    dklen: int = 32

    @property
    def maxmem(self) -> int:
        """Memory limit for :func:`hashlib.scrypt`: scrypt needs ~128*r*(n+p) bytes; allow headroom over that."""
        return 128 * self.r * (self.n + self.p) + 2 * 1024 * 1024


DEFAULT_PARAMS = ScryptParams(n=2**14, r=8, p=1, dklen=32)

# Bounds accepted when parsing a stored hash. Generous enough for future cost increases, tight enough that a bad row
# cannot cost more than ~1 GiB of memory or a very long computation.
_MAX_N = 2**20
_MAX_R = 64
_MAX_P = 16
_DKLEN_RANGE = range(16, 65)
_SALT_RANGE = range(8, 65)

# Fixed input for dummy_verify; its value is irrelevant, only that deriving with it costs the same as a real check.
_DUMMY_SALT = b"\x00" * _SALT_BYTES
_DUMMY_KEY = b"\x00" * DEFAULT_PARAMS.dklen


@dataclass(frozen=True, slots=True)
class _Stored:
    params: ScryptParams
    salt: bytes
    key: bytes


_active = DEFAULT_PARAMS


def use_params(params: ScryptParams) -> ScryptParams:
    """Make ``params`` the cost of new hashes and of :func:`dummy_verify`; returns the previous parameters.

    Only the test suite lowers it (it hashes thousands of passwords); stored hashes carry their own parameters, so
    verification is unaffected.
    """
    global _active
    previous, _active = _active, params
    return previous


def hash_password(password: str, params: ScryptParams | None = None) -> str:
    """Hash ``password`` with a fresh random salt (the active parameters unless given); returns the stored string."""
    params = params or _active
    salt = os.urandom(_SALT_BYTES)
    key = _derive(password, salt, params)
    return "$".join(
        (_SCHEME, str(params.n), str(params.r), str(params.p), _b64(salt), _b64(key)),
    )


def verify_password(password: str, stored: str) -> bool:
    """True iff ``password`` matches ``stored``. Never raises: a malformed ``stored`` value is simply False.

    The key comparison is constant-time (:func:`hmac.compare_digest`). A malformed ``stored`` value returns after a
    :func:`dummy_verify`, so even a corrupt row does not answer faster than a real one.
    """
    parsed = _parse(stored)
    if parsed is None:
        return dummy_verify(password)
    try:
        candidate = _derive(password, parsed.salt, parsed.params)
    except (ValueError, MemoryError, TypeError):
        return False
    return hmac.compare_digest(candidate, parsed.key)


def dummy_verify(password: str) -> bool:
    """Spend the time of a real :func:`verify_password` with the default parameters, then return False.

    Call it when the username is unknown, so response time does not reveal which usernames exist.
    """
    try:
        candidate = _derive(password, _DUMMY_SALT, _active)
    except (ValueError, TypeError):
        return False
    hmac.compare_digest(candidate, _DUMMY_KEY[: len(candidate)])
    return False


def parse_stored(stored: str) -> ScryptParams | None:
    """The parameters a stored hash was made with, or None if ``stored`` is not a valid hash string."""
    parsed = _parse(stored)
    return None if parsed is None else parsed.params


def needs_rehash(stored: str, params: ScryptParams = DEFAULT_PARAMS) -> bool:
    """True if ``stored`` is malformed or was made with parameters other than ``params`` (re-hash on next login)."""
    parsed = _parse(stored)
    return parsed is None or parsed.params != params


def _derive(password: str, salt: bytes, params: ScryptParams) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8", "surrogatepass"),
        salt=salt,
        n=params.n,
        r=params.r,
        p=params.p,
        maxmem=params.maxmem,
        dklen=params.dklen,
    )


def _parse(stored: object) -> _Stored | None:
    if not isinstance(stored, str) or not stored.isascii():
        return None
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != _SCHEME:
        return None
    try:
        n, r, p = (_int(part) for part in parts[1:4])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        return None
    # n must be a power of two greater than 1 (scrypt's own requirement).
    if not (1 < n <= _MAX_N and n & (n - 1) == 0 and 1 <= r <= _MAX_R and 1 <= p <= _MAX_P):
        return None
    if len(key) not in _DKLEN_RANGE or len(salt) not in _SALT_RANGE:
        return None
    return _Stored(ScryptParams(n=n, r=r, p=p, dklen=len(key)), salt, key)


def _int(text: str) -> int:
    # int() accepts "+5", " 5" and "5_0"; a stored hash we wrote only ever has plain decimal digits.
    if not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise ValueError(text)
    return int(text)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
