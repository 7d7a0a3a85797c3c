"""controller.certificates.csr: PEM/DER CSRs, the libziti NULL-parameter repair, and every refusal."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

from controller.certificates.csr import PemBlock, load_csr, pem_blocks
from controller.errors import ApiError

# The subject libziti puts in its CSRs (endpoints.md, enrolment step 4).
LIBZITI_SUBJECT = x509.Name(
    [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "NY"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "OpenZiti"),
        x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "https://127.0.0.1:1280"),
        x509.NameAttribute(NameOID.COMMON_NAME, "identity-id"),
    ]
)
ECDSA_WITH_SHA256 = bytes.fromhex("06082a8648ce3d040302")


def make_csr(key: CertificateIssuerPrivateKeyTypes, subject: x509.Name = LIBZITI_SUBJECT) -> bytes:
    """The DER of a CSR for ``key`` signed with SHA-256 (no hash for Ed25519)."""
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, algorithm)
    return csr.public_bytes(serialization.Encoding.DER)


def pem(der: bytes, label: str = "CERTIFICATE REQUEST", newline: str = "\n") -> str:
    body = base64.b64encode(der).decode()
    lines = [f"-----BEGIN {label}-----", *(body[i : i + 64] for i in range(0, len(body), 64)), f"-----END {label}-----"]
    return newline.join(lines) + newline


# --- a DER editor independent of the one under test: it adds the NULL libziti writes ------------------------------


def _element(der: bytes, offset: int) -> tuple[int, int]:
    """(start of contents, end) of the DER element at ``offset``."""
    first = der[offset + 1]
    if first < 0x80:
        return offset + 2, offset + 2 + first
    count = first & 0x7F
    start = offset + 2 + count
    return start, start + int.from_bytes(der[offset + 2 : start], "big")


def _sequence(contents: bytes) -> bytes:
    size = len(contents)
    if size < 0x80:
        return bytes([0x30, size]) + contents
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([0x30, 0x80 | len(length)]) + length + contents


def libziti_style(der: bytes) -> bytes:
    """``der`` with an explicit NULL parameter added to its outer ecdsa-with-SHA256 AlgorithmIdentifier."""
    start, end = _element(der, 0)
    _, info_end = _element(der, start)
    algorithm_start, algorithm_end = _element(der, info_end)
    assert der[algorithm_start:algorithm_end] == ECDSA_WITH_SHA256
    algorithm = _sequence(ECDSA_WITH_SHA256 + b"\x05\x00")
    return _sequence(der[start:info_end] + algorithm + der[algorithm_end:end])


def outer_length(der: bytes) -> int:
    start, end = _element(der, 0)
    return end - start


# --- accepted ---------------------------------------------------------------------------------------------------


def test_rsa_pem_text(rsa_key: rsa.RSAPrivateKey) -> None:
    der = make_csr(rsa_key)
    csr = load_csr(pem(der), "clientCsr")
    assert csr.is_signature_valid
    assert csr.subject == LIBZITI_SUBJECT
    assert csr.public_key() == rsa_key.public_key()
    assert csr.public_bytes(serialization.Encoding.DER) == der  # an RSA request is never rewritten


@pytest.mark.parametrize("curve", [ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1()], ids=lambda c: c.name)
def test_ec_pem_bytes(curve: ec.EllipticCurve) -> None:
    key = ec.generate_private_key(curve)
    csr = load_csr(pem(make_csr(key)).encode(), "clientCsr")
    assert csr.public_key() == key.public_key()


def test_der_bytes(ec_key: ec.EllipticCurvePrivateKey) -> None:
    der = make_csr(ec_key)
    assert load_csr(der, "clientCsr").public_bytes(serialization.Encoding.DER) == der


def test_crlf_surrounding_whitespace_and_legacy_label(ec_key: ec.EllipticCurvePrivateKey) -> None:
    der = make_csr(ec_key)
    for text in (
        "\r\n  " + pem(der, newline="\r\n") + "\r\n\r\n",
        "\t" + pem(der, label="NEW CERTIFICATE REQUEST") + " ",
        "subject=CN=identity-id\n" + pem(der),  # explanatory text before the block, as `openssl req -text` writes
    ):
        assert load_csr(text, "clientCsr").public_bytes(serialization.Encoding.DER) == der


def test_libziti_null_parameter_is_removed(ec_key: ec.EllipticCurvePrivateKey) -> None:
    der = make_csr(ec_key)
    ziti = libziti_style(der)
    assert len(ziti) == len(der) + 2
    with pytest.raises(ValueError):  # what cryptography itself says about libziti's encoding
        x509.load_der_x509_csr(ziti)

    for data in (ziti, pem(ziti), pem(ziti, newline="\r\n").encode()):
        csr = load_csr(data, "clientCsr")
        assert csr.is_signature_valid
        assert csr.public_key() == ec_key.public_key()
        assert csr.subject == LIBZITI_SUBJECT
        # Exactly the request before the NULL was added: minimal DER lengths, the signed part untouched.
        assert csr.public_bytes(serialization.Encoding.DER) == der


@pytest.mark.parametrize("length", [254, 255])
def test_libziti_repair_across_a_length_field_boundary(length: int) -> None:
    """A request whose outer length fits one length octet only without the NULL (255 + 2 needs two)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pad = 1
    for _ in range(200):
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "c" * pad)])
        der = make_csr(key, subject)
        if outer_length(der) == length:
            break
        pad = max(1, pad + length - outer_length(der))  # ECDSA signatures vary by a byte or two: aim again
    assert outer_length(der) == length
    ziti = libziti_style(der)
    assert der[1] == 0x81 and ziti[1] == 0x82  # the outer length field grows by an octet with the NULL
    csr = load_csr(ziti, "clientCsr")
    assert csr.is_signature_valid
    assert csr.public_bytes(serialization.Encoding.DER) == der


# --- refused ----------------------------------------------------------------------------------------------------


def _refusal(data: str | bytes, field: str = "clientCsr") -> str:
    with pytest.raises(ApiError) as caught:
        load_csr(data, field)
    error = caught.value
    assert (error.code, error.status) == ("COULD_NOT_PROCESS_CSR", 400)
    assert error.cause is not None
    assert (error.cause["field"], error.cause["value"]) == (field, "<csr>")
    return str(error.cause["reason"])


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("", "not a PEM or DER encoded certificate signing request"),
        ("  \r\n", "not a PEM or DER encoded certificate signing request"),
        ("hello", "not a PEM or DER encoded certificate signing request"),
        (b"\x00\x01binary", "not a PEM or DER encoded certificate signing request"),
        ("-----BEGIN CERTIFICATE REQUEST-----\nnot base64!\n-----END CERTIFICATE REQUEST-----\n", "not PEM"),
        ("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE-----\n", "not a PEM or DER"),
        (pem(b"\x30\x03abc"), "not a valid certificate signing request"),
        (b"\x30\x03abc", "not a valid certificate signing request"),
        (b"\x30\x82\x01", "not a valid certificate signing request"),
    ],
    ids=["empty", "blank", "text", "binary", "bad-base64", "unmatched-labels", "pem-garbage", "der-garbage",
         "truncated"],
)
def test_not_a_csr(data: str | bytes, reason: str) -> None:
    assert reason in _refusal(data)


def test_wrong_block_type_and_several_blocks(ec_key: ec.EllipticCurvePrivateKey) -> None:
    der = make_csr(ec_key)
    assert _refusal(pem(der, label="CERTIFICATE"), "csr") == (
        "expected PEM block type CERTIFICATE REQUEST, found CERTIFICATE")
    assert _refusal(pem(der) + pem(der)) == "expected one PEM block, found 2"


def test_bad_signature(rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> None:
    der = bytearray(make_csr(rsa_key))
    der[-1] ^= 0x01  # last octet of the RSA signature
    assert _refusal(bytes(der)) == "the certificate signing request's signature is invalid"

    ziti = bytearray(libziti_style(make_csr(ec_key)))
    ziti[ziti.index(b"identity-id")] ^= 0x20  # one letter of the signed subject: "Identity-id"
    assert _refusal(pem(bytes(ziti))) == "the certificate signing request's signature is invalid"


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(lambda: rsa.generate_private_key(public_exponent=65537, key_size=1024), id="rsa-1024"),
        pytest.param(lambda: ec.generate_private_key(ec.SECP256K1()), id="secp256k1"),
        pytest.param(ed25519.Ed25519PrivateKey.generate, id="ed25519"),
    ],
)
def test_unsupported_keys(key: Callable[[], CertificateIssuerPrivateKeyTypes]) -> None:
    reason = _refusal(make_csr(key()))
    assert reason.startswith("unsupported public key: only RSA keys of at least 2048 bits and EC keys on P-256")


# --- PEM blocks -------------------------------------------------------------------------------------------------


def test_pem_blocks_in_order_ignoring_text_between() -> None:
    text = b"preamble\n" + pem(b"\x01\x02", "ONE").encode() + b"between\r\n" + pem(b"\x03", "TWO", "\r\n").encode()
    assert pem_blocks(text) == [PemBlock("ONE", b"\x01\x02"), PemBlock("TWO", b"\x03")]
    assert pem_blocks(b"no blocks here") == []
    with pytest.raises(ValueError, match="invalid base64 in PEM block ONE"):
        pem_blocks(b"-----BEGIN ONE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END ONE-----\n")
