"""controller.authentication.external_jwt: choosing a token's signer and verifying it (certPem and JWKS signers).

Keys are made here; JWKS signers fetch from the HTTPS test server of test_jwks. ``now`` is a fixed wall-clock instant
passed to ``verify``; the key cache runs on Trio's ``mock_clock`` (see test_jwks for why not the autojumping one).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import hmac
import json
import socket
from collections.abc import Callable
from typing import Any

import jwt
import pytest
import trio
import trio.testing
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from controller.authentication.external_jwt import (
    CLOCK_LEEWAY_SECONDS,
    Claim,
    ExternalJwtError,
    select_signer,
    verify,
)
from controller.authentication.jwks import JwksCache
from tests.controller.test_jwks import JwksServer, ServerPki, make_pki, start_jwks_server

NOW = 1_750_000_000.0
ISSUER = "https://idp.example/realms/corp"
AUDIENCE = "tollgate"
LEEWAY = CLOCK_LEEWAY_SECONDS

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@functools.cache
def rsa_key(name: str = "main", bits: int = 2048) -> rsa.RSAPrivateKey:
    """One RSA key per name for the whole module: generating them is the slow part."""
    return rsa.generate_private_key(65537, bits)


@functools.cache
def ec_key(curve: str) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key({"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}[curve])


def certificate_pem(key: PrivateKey) -> str:
    """A self-signed certificate for ``key``, as an identity provider's signing certificate."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "idp signing")])
    start = dt.datetime.fromtimestamp(NOW, dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(start - dt.timedelta(days=1))
            .not_valid_after(start + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def cert_signer(key: PrivateKey, **overrides: Any) -> dict[str, Any]:
    """A signer row as external-jwt-signers stores it, verifying with ``key``'s certificate."""
    return {"id": "signer-cert", "name": "corporate idp", "enabled": True, "issuer": ISSUER, "audience": AUDIENCE,
            "certPem": certificate_pem(key), "jwksEndpoint": None, "claimsProperty": "sub", "useExternalId": False,
            "kid": None, "externalAuthUrl": None} | overrides


def claims(**overrides: Any) -> dict[str, Any]:
    """Valid claims at NOW; an override of None removes the claim."""
    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "identity-1", "exp": NOW + 300, "iat": NOW - 10, "nbf": NOW - 10}
    return {name: value for name, value in (base | overrides).items() if value is not None}


def token(key: PrivateKey, algorithm: str = "RS256", kid: str | None = None, **claim_overrides: Any) -> str:
    return jwt.encode(claims(**claim_overrides), key, algorithm=algorithm, headers={"kid": kid} if kid else None)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade_token(header: dict[str, Any], payload: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A token PyJWT would refuse to make (HMAC keyed with a PEM, no alg, a short RSA key)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    return f"{signing_input}.{_b64(sign(signing_input.encode()))}"


@pytest.fixture
def keys() -> JwksCache:
    """A key cache for certPem signers, which never use it."""
    return JwksCache(now=trio.current_time)


async def _refused(raw: str, signer: dict[str, Any], keys: JwksCache, now: float = NOW) -> str:
    with pytest.raises(ExternalJwtError) as caught:
        await verify(raw, signer, keys, now=now)
    return caught.value.reason


# --- choosing the signer ---------------------------------------------------------------------------------------

SIGNERS = [
    {"id": "a", "name": "A", "enabled": True, "issuer": "https://a.example", "kid": "kid-a"},
    {"id": "b", "name": "B", "enabled": True, "issuer": "https://b.example", "kid": None},
    {"id": "c", "name": "C", "enabled": False, "issuer": "https://c.example", "kid": "kid-c"},
]


@pytest.mark.parametrize(("kid", "issuer", "chosen"), [
    ("kid-a", "https://a.example", "a"),
    ("kid-a", "https://b.example", "a"),  # a declared kid wins over the issuer
    (None, "https://a.example", "a"),
    ("unknown-kid", "https://b.example", "b"),
    (None, "https://b.example", "b"),
])
def test_the_signer_is_chosen_by_kid_then_by_issuer(kid: str | None, issuer: str, chosen: str) -> None:
    raw = token(rsa_key(), kid=kid, iss=issuer)
    assert select_signer(raw, SIGNERS)["id"] == chosen


@pytest.mark.parametrize(("raw", "reason"), [
    (token(ec_key("P-256"), "ES256", iss="https://nobody.example"),
     "no external JWT signer has kid None or issuer 'https://nobody.example'"),
    (token(ec_key("P-256"), "ES256", kid="kid-c", iss="https://a.example"),
     "external JWT signer 'c' ('C') is disabled"),
    (token(ec_key("P-256"), "ES256", iss="https://c.example"), "external JWT signer 'c' ('C') is disabled"),
    ("not-a-jwt", "not a JWT: Not enough segments"),
    (handmade_token({"alg": "ES256"}, [1, 2], lambda _: b"x"),  # type: ignore[arg-type]
     "not a JWT: Invalid payload string: must be a json object"),
])
def test_no_enabled_signer_is_refused(raw: str, reason: str) -> None:
    with pytest.raises(ExternalJwtError) as caught:
        select_signer(raw, SIGNERS)
    assert caught.value.reason == reason


# --- certPem signers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("algorithm", "key"), [
    *((name, rsa_key()) for name in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")),
    ("ES256", ec_key("P-256")), ("ES384", ec_key("P-384")), ("ES512", ec_key("P-521")),
])
async def test_a_token_signed_with_the_certificate_key_is_accepted(
        algorithm: str, key: PrivateKey, keys: JwksCache) -> None:
    claim = await verify(token(key, algorithm), cert_signer(key), keys, now=NOW)
    assert claim == Claim(signer_id="signer-cert", subject="identity-1", is_external_id=False,
                          expires_at=NOW + 300)


async def test_the_claims_property_and_external_id_flag_come_from_the_signer(keys: JwksCache) -> None:
    signer = cert_signer(rsa_key(), claimsProperty="email", useExternalId=True)
    claim = await verify(token(rsa_key(), email="ann@corp.example"), signer, keys, now=NOW)
    assert claim == Claim(signer_id="signer-cert", subject="ann@corp.example", is_external_id=True,
                          expires_at=NOW + 300)
    unset = cert_signer(rsa_key(), claimsProperty=None, useExternalId=None)
    assert await verify(token(rsa_key()), unset, keys, now=NOW) == Claim("signer-cert", "identity-1", False, NOW + 300)


@pytest.mark.parametrize(("signer_audience", "token_audience"), [
    (AUDIENCE, ["other", AUDIENCE]),
    (None, None),
    (None, "anything"),
])
async def test_the_audience_is_checked_only_when_the_signer_has_one(
        signer_audience: str | None, token_audience: Any, keys: JwksCache) -> None:
    signer = cert_signer(rsa_key(), audience=signer_audience)
    assert (await verify(token(rsa_key(), aud=token_audience), signer, keys, now=NOW)).subject == "identity-1"


@pytest.mark.parametrize("overrides", [
    {"exp": NOW - LEEWAY + 1},
    {"nbf": NOW + LEEWAY},
    {"iat": NOW + LEEWAY},
    {"nbf": None, "iat": None},
])
async def test_times_within_the_leeway_are_accepted(overrides: dict[str, Any], keys: JwksCache) -> None:
    assert (await verify(token(rsa_key(), **overrides), cert_signer(rsa_key()), keys, now=NOW)).subject == "identity-1"


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"iss": "https://evil.example"}, f"issuer 'https://evil.example' is not the signer's {ISSUER!r}"),
    ({"iss": None}, f"issuer None is not the signer's {ISSUER!r}"),
    ({"aud": "other"}, "audience 'other' does not include 'tollgate'"),
    ({"aud": ["other", "more"]}, "audience ['other', 'more'] does not include 'tollgate'"),
    ({"aud": None}, "audience None does not include 'tollgate'"),
    ({"exp": None}, "exp is missing"),
    ({"exp": NOW - LEEWAY}, f"expired at {NOW - LEEWAY:g}, now is {NOW:g}"),
    ({"exp": "tomorrow"}, "exp is not a number: 'tomorrow'"),
    ({"exp": True}, "exp is not a number: True"),
    ({"exp": 10**400}, f"exp is not a number: {10**400!r}"),
    ({"nbf": NOW + LEEWAY + 1}, f"not valid before {NOW + LEEWAY + 1:g}, now is {NOW:g}"),
    ({"iat": NOW + LEEWAY + 1}, f"issued at {NOW + LEEWAY + 1:g}, in the future (now is {NOW:g})"),
    ({"iat": [NOW]}, f"iat is not a number: [{NOW!r}]"),
    ({"sub": None}, "claim 'sub' is missing or not a non-empty string"),
    ({"sub": ""}, "claim 'sub' is missing or not a non-empty string"),
    ({"sub": "  "}, "claim 'sub' is missing or not a non-empty string"),
    ({"sub": 42}, "claim 'sub' is missing or not a non-empty string"),
])
async def test_a_token_failing_a_claim_check_is_refused(
        overrides: dict[str, Any], reason: str, keys: JwksCache) -> None:
    assert await _refused(token(rsa_key(), **overrides), cert_signer(rsa_key()), keys) == reason


def _hmac_with_public_pem(signing_input: bytes) -> bytes:
    # The classic confusion attack: the verifier's public key used as an HMAC secret.
    secret = rsa_key().public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
    return hmac.new(secret, signing_input, hashlib.sha256).digest()


def rs256(key: rsa.RSAPrivateKey) -> Callable[[bytes], bytes]:
    return lambda signing_input: key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())


def _tampered(raw: str) -> str:
    header, _, signature = raw.split(".")
    return f"{header}.{_b64(json.dumps(claims(sub='admin')).encode())}.{signature}"


@pytest.mark.parametrize(("make_token", "signer_key", "reason"), [
    (lambda: token(rsa_key("other")), rsa_key(), "signature not accepted: Signature verification failed"),
    (lambda: _tampered(token(rsa_key())), rsa_key(), "signature not accepted: Signature verification failed"),
    (lambda: jwt.encode(claims(), None, algorithm="none"), rsa_key(), "algorithm 'none' is not allowed"),
    (lambda: handmade_token({"alg": "HS256", "typ": "JWT"}, claims(), _hmac_with_public_pem), rsa_key(),
     "algorithm 'HS256' is not allowed"),
    (lambda: handmade_token({"typ": "JWT"}, claims(), lambda _: b"sig"), rsa_key(), "algorithm None is not allowed"),
    (lambda: token(ec_key("P-256"), "ES256"), rsa_key(), "ES256 needs an EC key on secp256r1"),
    (lambda: token(ec_key("P-384"), "ES384"), ec_key("P-256"), "ES384 needs an EC key on secp384r1"),
    (lambda: token(rsa_key(), "PS256"), ec_key("P-256"), "PS256 needs an RSA key"),
    (lambda: handmade_token({"alg": "RS256"}, claims(), rs256(rsa_key("short", 1024))), rsa_key("short", 1024),
     "signature not accepted: The RSA key is 1024 bits long, which is below the minimum recommended size of 2048 "
     "bits. See NIST SP 800-131A."),
])
async def test_a_token_not_signed_by_the_signer_with_an_allowed_algorithm_is_refused(
        make_token: Callable[[], str], signer_key: PrivateKey, reason: str, keys: JwksCache) -> None:
    assert await _refused(make_token(), cert_signer(signer_key), keys) == reason


async def test_a_disabled_or_broken_signer_verifies_nothing(keys: JwksCache) -> None:
    raw = token(rsa_key())
    assert await _refused(raw, cert_signer(rsa_key(), enabled=False), keys) == (
        "external JWT signer 'signer-cert' ('corporate idp') is disabled")
    reason = await _refused(raw, cert_signer(rsa_key(), certPem="-----BEGIN CERTIFICATE-----\nAAAA\n"), keys)
    assert reason.startswith("signer certificate unreadable: ")
    assert await _refused(raw, cert_signer(rsa_key(), certPem=None), keys) == (
        "external JWT signer 'signer-cert' has neither certPem nor jwksEndpoint")


# --- JWKS signers ----------------------------------------------------------------------------------------------

INTERVAL = 30.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ServerPki:
    return make_pki(tmp_path_factory.mktemp("ext-jwt-pki"))


@pytest.fixture
def server() -> JwksServer:
    server = JwksServer()
    rsa_jwk = RSAAlgorithm.to_jwk(rsa_key().public_key(), as_dict=True) | {"kid": "r1", "use": "sig"}
    ec_jwk = ECAlgorithm.to_jwk(ec_key("P-256").public_key(), as_dict=True) | {"kid": "e1", "alg": "ES256"}
    server.publish("/jwks", rsa_jwk, ec_jwk)
    return server


@pytest.fixture
async def jwks_signer(nursery: trio.Nursery, server: JwksServer, pki: ServerPki,
                      monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    url = await start_jwks_server(nursery, server, pki)
    return cert_signer(rsa_key(), id="signer-jwks", certPem=None, jwksEndpoint=url + "/jwks")


@pytest.fixture
def jwks_keys(pki: ServerPki) -> JwksCache:
    return JwksCache(now=trio.current_time, timeout=2, min_refetch_interval=INTERVAL, verify=pki.client_context())


async def test_jwks_signer_verifies_with_the_key_the_kid_names(
        mock_clock: trio.testing.MockClock, server: JwksServer, jwks_signer: dict[str, Any],
        jwks_keys: JwksCache) -> None:
    for raw in (token(rsa_key(), "RS256", kid="r1"), token(rsa_key(), "PS512", kid="r1"),
                token(ec_key("P-256"), "ES256", kid="e1")):
        expected = Claim("signer-jwks", "identity-1", False, NOW + 300)
        assert await verify(raw, jwks_signer, jwks_keys, now=NOW) == expected
    assert server.requests == {"/jwks": 1}


async def test_jwks_signer_refuses_unknown_kids_misused_keys_and_forgeries(
        server: JwksServer, jwks_signer: dict[str, Any], jwks_keys: JwksCache) -> None:
    endpoint = jwks_signer["jwksEndpoint"]
    assert await _refused(token(rsa_key(), kid="r9"), jwks_signer, jwks_keys) == (
        f"JWKS {endpoint} holds no key with kid 'r9'")
    assert await _refused(token(rsa_key(), kid=None), jwks_signer, jwks_keys) == (
        f"token has no kid and JWKS {endpoint} holds 2 keys")
    raw = handmade_token({"alg": "RS256", "kid": 5}, claims(), rs256(rsa_key()))
    assert await _refused(raw, jwks_signer, jwks_keys) == "not a JWT: Key ID header parameter must be a string"
    assert await _refused(token(ec_key("P-384"), "ES384", kid="e1"), jwks_signer, jwks_keys) == (
        "key 'e1' is for ES256, the token uses ES384")
    assert await _refused(token(rsa_key("other"), kid="r1"), jwks_signer, jwks_keys) == (
        "signature not accepted: Signature verification failed")
    assert await _refused(token(rsa_key(), kid="r1", iss="https://evil.example"), jwks_signer, jwks_keys) == (
        f"issuer 'https://evil.example' is not the signer's {ISSUER!r}")
    assert server.requests == {"/jwks": 1}


async def test_jwks_signer_whose_endpoint_is_down_refuses_at_once() -> None:
    """A refused connection ends the fetch with its own error, not after the fetch's timeout (a long one here, so
    that a slow machine cannot reach it and only a fetch that waited for it would)."""
    keys = JwksCache(now=trio.current_time, timeout=60)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    signer = cert_signer(rsa_key(), certPem=None, jwksEndpoint=f"https://127.0.0.1:{port}/jwks")
    started = trio.current_time()
    reason = await _refused(token(rsa_key(), kid="r1"), signer, keys)
    assert reason.startswith(f"JWKS https://127.0.0.1:{port}/jwks could not be fetched: ConnectError")
    assert trio.current_time() - started < 60
