"""controller.authentication.password_hashing: scrypt hashing, verification, parsing and the dummy verification."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from controller.authentication import password_hashing as passwords
from controller.authentication.password_hashing import (
    DEFAULT_PARAMS,
    ScryptParams,
    dummy_verify,
    hash_password,
    needs_rehash,
    parse_stored,
    verify_password,
)

# Cheap parameters for tests that do not care about cost.
FAST = ScryptParams(n=2**4, r=8, p=1)


def test_round_trip_with_default_params() -> None:
    stored = hash_password("correct horse battery staple")
    assert verify_password("correct horse battery staple", stored)
    assert not verify_password("correct horse battery stapl", stored)
    assert not verify_password("", stored)


def test_stored_format() -> None:
    stored = hash_password("pw")
    scheme, n, r, p, salt, key = stored.split("$")
    assert (scheme, n, r, p) == ("scrypt", "16384", "8", "1")
    assert len(base64.b64decode(salt, validate=True)) == 16
    assert len(base64.b64decode(key, validate=True)) == 32
    assert parse_stored(stored) == DEFAULT_PARAMS
    assert not needs_rehash(stored)


def test_unique_salts() -> None:
    hashes = {hash_password("same", FAST) for _ in range(20)}
    assert len(hashes) == 20
    salts = {h.split("$")[4] for h in hashes}
    assert len(salts) == 20


def test_parameters_read_from_stored_string() -> None:
    custom = ScryptParams(n=2**5, r=4, p=2, dklen=24)
    stored = hash_password("pw", custom)
    assert stored.startswith("scrypt$32$4$2$")
    assert parse_stored(stored) == custom
    assert verify_password("pw", stored)  # verified with the stored params, not the defaults
    assert not verify_password("px", stored)
    assert needs_rehash(stored)
    assert not needs_rehash(stored, custom)


@pytest.mark.parametrize("password", ["", "ünïcødé ✓", "a" * 1000, "\ud800 lone surrogate", "nul\x00byte"])
def test_unusual_passwords(password: str) -> None:
    stored = hash_password(password, FAST)
    assert verify_password(password, stored)
    assert not verify_password(password + "x", stored)


def _valid() -> list[str]:
    return hash_password("pw", FAST).split("$")


def _with(index: int, value: str) -> str:
    parts = _valid()
    parts[index] = value
    return "$".join(parts)


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "plaintext",
        "scrypt",
        "scrypt$$$$$",
        "$".join(_valid()[:5]),
        "$".join([*_valid(), "extra"]),
        _with(0, "bcrypt"),
        _with(1, "15"),  # n not a power of two
        _with(1, "1"),
        _with(1, "0"),
        _with(1, "-16"),
        _with(1, "+16"),
        _with(1, "016"),
        _with(1, str(2**40)),  # absurd cost must not be attempted
        _with(2, "0"),
        _with(2, "x"),
        _with(3, "0"),
        _with(3, "1000"),
        _with(4, "not base64!"),
        _with(4, ""),
        _with(4, "AAAA"),  # salt too short
        _with(5, "AAAA"),  # key too short
        _with(5, "%%%%"),
        _with(5, base64.b64encode(b"\x00" * 32).decode() + "\n"),
        "scrypt$16$8$1$é$é",
    ],
    # Salts are random: name the cases, so that every run (and every xdist worker) collects the same ids.
    ids=["empty", "plaintext", "scheme-only", "empty-parts", "no-key", "extra-part", "other-scheme", "n-15", "n-1",
         "n-0", "n-negative", "n-plus-sign", "n-leading-zero", "n-absurd", "r-0", "r-not-number", "p-0", "p-1000",
         "salt-not-base64", "salt-empty", "salt-short", "key-short", "key-not-base64", "key-trailing-newline",
         "non-ascii"],
)
def test_malformed_stored_values(stored: str) -> None:
    assert verify_password("pw", stored) is False
    assert parse_stored(stored) is None
    assert needs_rehash(stored)


def test_non_string_stored_value_is_false() -> None:
    assert verify_password("pw", None) is False  # type: ignore[arg-type]
    assert verify_password("pw", b"scrypt$16$8$1$AAAA$AAAA") is False  # type: ignore[arg-type]


def test_tampered_hash_is_rejected() -> None:
    parts = _valid()
    key = bytearray(base64.b64decode(parts[5]))
    key[0] ^= 1
    parts[5] = base64.b64encode(bytes(key)).decode()
    assert not verify_password("pw", "$".join(parts))


def test_dummy_verify_is_false() -> None:
    assert dummy_verify("anything") is False
    assert dummy_verify("\ud800") is False


@pytest.fixture(autouse=True)
def real_password_cost() -> Iterator[None]:
    """These tests measure the production hashing cost, not the suite's cheap one."""
    previous = passwords.use_params(passwords.DEFAULT_PARAMS)
    yield
    passwords.use_params(previous)
