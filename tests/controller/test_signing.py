"""controller.certificates.signing: JWTs verified against the server certificate, the JWKS, nonce signatures."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from typing import Any

import jwt
import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import NameOID
from jwt.utils import base64url_decode

from controller.certificates.issuing import Issuer, fingerprint, issue_certificate
from controller.certificates.pki import Pki, ServerKey, ensure_pki
from controller.certificates.signing import TokenSigner
from controller.errors import FieldError

EXPIRES = dt.datetime(2031, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
CLAIMS = {"em": "ott", "iss": "https://127.0.0.1:1280", "sub": "identity-id", "jti": str(uuid.UUID(int=7)),
          "aud": [""], "exp": EXPIRES}


@pytest.fixture(scope="module")
def rsa_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure_pki(tmp_path_factory.mktemp("signing-rsa") / "pki")


@pytest.fixture(scope="module")
def ec_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure_pki(tmp_path_factory.mktemp("signing-ec") / "pki", server_key_type="ec")


def _decode(token: str, key: Any, algorithm: str) -> dict[str, object]:
    decoded: dict[str, object] = jwt.decode(token, key, algorithms=[algorithm], options={"verify_aud": False})
    return decoded


def _signer_on(curve: ec.EllipticCurve, pki: Pki) -> TokenSigner:
    """A signer with an EC key on ``curve`` and a certificate for it issued by ``pki``'s CA."""
    key = ec.generate_private_key(curve)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "controller")])
    cert = issue_certificate(pki.load_ca_key(), pki.ca_cert, key.public_key(), subject,
                             now=dt.datetime.now(dt.UTC), validity=dt.timedelta(days=1), server_names=[])
    return TokenSigner(key, cert, (pki.ca_cert,))


def test_rsa_jwt_verifies_against_the_server_certificate(rsa_pki: Pki) -> None:
    signer = TokenSigner.from_pki(rsa_pki)
    assert signer.algorithm == "RS256"
    assert signer.kid == rsa_pki.server_cert_sha1 == fingerprint(rsa_pki.server_cert)
    token = signer.sign(CLAIMS)
    assert jwt.get_unverified_header(token) == {"alg": "RS256", "kid": signer.kid, "typ": "JWT"}
    claims = _decode(token, rsa_pki.server_cert.public_key(), "RS256")
    assert claims == {**CLAIMS, "exp": int(EXPIRES.timestamp())}  # nothing added: no iat, no nbf


def test_ec_jwt_verifies_against_the_server_certificate(ec_pki: Pki) -> None:
    signer = TokenSigner.from_pki(ec_pki)
    assert signer.algorithm == "ES256"
    token = signer.sign({"sub": "x"})
    assert jwt.get_unverified_header(token)["kid"] == ec_pki.server_cert_sha1
    assert _decode(token, ec_pki.server_cert.public_key(), "ES256") == {"sub": "x"}
    with pytest.raises(jwt.InvalidSignatureError):
        _decode(token, ec.generate_private_key(ec.SECP256R1()).public_key(), "ES256")


@pytest.mark.parametrize(("curve", "algorithm", "crv", "size"), [
    (ec.SECP384R1(), "ES384", "P-384", 48),
    (ec.SECP521R1(), "ES512", "P-521", 66),
])
def test_larger_curves(curve: ec.EllipticCurve, algorithm: str, crv: str, size: int, ec_pki: Pki) -> None:
    signer = _signer_on(curve, ec_pki)
    assert signer.algorithm == algorithm
    key = signer.jwks()["keys"][0]
    assert (key["crv"], key["alg"]) == (crv, algorithm)
    assert len(base64url_decode(key["x"])) == len(base64url_decode(key["y"])) == size
    assert _decode(signer.sign({"a": 1}), jwt.PyJWK(key), algorithm) == {"a": 1}


@pytest.mark.parametrize("pki_name", ["rsa_pki", "ec_pki"])
def test_jwks_round_trips_through_pyjwk(pki_name: str, request: pytest.FixtureRequest) -> None:
    pki: Pki = request.getfixturevalue(pki_name)
    signer = TokenSigner.from_pki(pki)
    jwks = signer.jwks()
    assert list(jwks) == ["keys"] and len(jwks["keys"]) == 1
    key = jwks["keys"][0]
    expected = {"kty", "kid", "use", "alg", "x5c"} | ({"n", "e"} if key["kty"] == "RSA" else {"crv", "x", "y"})
    assert set(key) == expected  # public parts only: no "d", no private factors
    assert (key["kid"], key["use"], key["alg"]) == (signer.kid, "sig", signer.algorithm)
    assert [base64.b64decode(c, validate=True) for c in key["x5c"]] == [
        x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
        for pem in (pki.server_cert_pem, pki.ca_pem)
    ]

    parsed = jwt.PyJWK(key)
    assert (parsed.key_id, parsed.algorithm_name) == (signer.kid, signer.algorithm)
    assert parsed.key == pki.server_cert.public_key()
    assert _decode(signer.sign(CLAIMS), parsed, signer.algorithm)["sub"] == "identity-id"
    assert jwt.PyJWKSet.from_dict(jwks)[signer.kid].key_id == signer.kid


@pytest.mark.parametrize("pki_name", ["rsa_pki", "ec_pki"])
def test_nonce_signature_verifies_with_the_jwks_key(pki_name: str, request: pytest.FixtureRequest) -> None:
    pki: Pki = request.getfixturevalue(pki_name)
    signer = TokenSigner.from_pki(pki)
    nonce = str(uuid.uuid4())
    answer = signer.sign_nonce(nonce)
    assert set(answer) == {"signature", "algorithm", "kid", "caPool"}
    assert (answer["algorithm"], answer["kid"], answer["caPool"]) == (
        signer.algorithm, signer.kid, pki.ca_pem.decode())

    # What a client does: the JWKS key with that kid, the JWS algorithm, base64url of the signature.
    jwk = jwt.PyJWKSet.from_dict(signer.jwks())[answer["kid"]]
    signature = base64url_decode(answer["signature"])
    assert jwk.Algorithm.verify(nonce.encode(), jwk.key, signature)
    assert not jwk.Algorithm.verify(str(uuid.uuid4()).encode(), jwk.key, signature)

    # The same check with cryptography alone, from the certificate in the CA pool's chain (x5c).
    public = pki.server_cert.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        public.verify(signature, nonce.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        half = len(signature) // 2
        der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
        public.verify(der, nonce.encode(), ec.ECDSA(hashes.SHA256()))
        with pytest.raises(InvalidSignature):
            public.verify(der, b"other", ec.ECDSA(hashes.SHA256()))


@pytest.mark.parametrize("nonce", ["", "not-a-uuid", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9",
                                   "{12345678-1234-1234-1234-123456789abc}", "123456781234123412341234567890ab",
                                   "12345678-1234-1234-1234-123456789abc\n"])
def test_only_uuid_nonces_are_signed(nonce: str, rsa_pki: Pki) -> None:
    with pytest.raises(FieldError) as caught:
        TokenSigner.from_pki(rsa_pki).sign_nonce(nonce)
    assert (caught.value.field, caught.value.reason) == ("nonce", "nonce must be a UUID")


def test_key_must_match_the_certificate(rsa_pki: Pki, ec_pki: Pki) -> None:
    with pytest.raises(ValueError, match="does not match"):
        TokenSigner(ec_pki.load_server_key(), rsa_pki.server_cert, (rsa_pki.ca_cert,))


def test_curve_without_a_jws_algorithm(ec_pki: Pki) -> None:
    key: ServerKey = ec.generate_private_key(ec.SECP256K1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "controller")])
    issuer = Issuer.from_pki(ec_pki)
    cert = issue_certificate(issuer.ca_key, issuer.ca_cert, key.public_key(), subject,
                             now=dt.datetime.now(dt.UTC), validity=dt.timedelta(days=1))
    with pytest.raises(ValueError, match="no JWS algorithm"):
        TokenSigner(key, cert, (ec_pki.ca_cert,))
