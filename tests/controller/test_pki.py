"""controller.certificates.pki: CA and server certificate creation, reuse, re-issue, EST cacerts, a real handshake."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import shutil
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID

from controller.certificates.pki import Pki, PkiError, cacerts_pkcs7_b64, ensure_pki
from tests.certificates import handshake

EXTRA_SANS = ("Tollgate.Example.com", "10.1.2.3", "[fd00::7]")


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PKI made once per module; tests that change it work on a copy (RSA key generation is slow-ish)."""
    pki_dir = tmp_path_factory.mktemp("pki-base") / "pki"
    ensure_pki(pki_dir, EXTRA_SANS)
    return pki_dir


@pytest.fixture
def pki_dir(base_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "pki"
    shutil.copytree(base_dir, target)
    return target


def _sans(cert: x509.Certificate) -> tuple[list[str], list[object]]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return ext.get_values_for_type(x509.DNSName), list(ext.get_values_for_type(x509.IPAddress))


def test_creates_files_with_private_key_modes(tmp_path: Path) -> None:
    pki_dir = tmp_path / "nested" / "pki"
    pki = ensure_pki(pki_dir)
    names = sorted(p.name for p in pki_dir.iterdir())
    assert names == ["ca.key", "ca.pem", "server.key", "server.pem"]  # no temporary files left behind
    for key in ("ca.key", "server.key"):
        assert stat.S_IMODE((pki_dir / key).stat().st_mode) == 0o600
    assert pki.ca_cert_path == pki_dir / "ca.pem"
    assert pki.server_cert_path == pki_dir / "server.pem"
    assert pki.server_key_path == pki_dir / "server.key"
    assert pki.ca_key_path == pki_dir / "ca.key"


def test_ca_certificate(base_dir: Path) -> None:
    pki = ensure_pki(base_dir, EXTRA_SANS)
    ca = pki.ca_cert
    assert ca.subject == ca.issuer
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert dt.timedelta(days=3649) < lifetime < dt.timedelta(days=3651)
    ca.verify_directly_issued_by(ca)
    assert (base_dir / "ca.pem").read_bytes() == pki.ca_pem


def test_server_certificate(base_dir: Path) -> None:
    pki = ensure_pki(base_dir, EXTRA_SANS)
    cert = pki.server_cert
    public = cert.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    assert public.key_size == 2048
    cert.verify_directly_issued_by(pki.ca_cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku and ExtendedKeyUsageOID.CLIENT_AUTH in eku
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=364) < lifetime < dt.timedelta(days=366)

    dns, ips = _sans(cert)
    assert {"localhost", "tollgate.example.com"} <= set(dns)
    assert {ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.1.2.3", "fd00::7")} <= set(ips)

    # server.pem is the chain: leaf then CA.
    chain = x509.load_pem_x509_certificates((base_dir / "server.pem").read_bytes())
    assert chain == [cert, pki.ca_cert]
    assert pki.server_chain_pem == (base_dir / "server.pem").read_bytes()


def test_server_key_and_fingerprint(base_dir: Path) -> None:
    pki = ensure_pki(base_dir, EXTRA_SANS)
    key = pki.load_server_key()
    assert key.public_key() == pki.server_cert.public_key()
    der = pki.server_cert.public_bytes(serialization.Encoding.DER)
    assert pki.server_cert_sha1 == hashlib.sha1(der).hexdigest()
    assert len(pki.server_cert_sha1) == 40 and pki.server_cert_sha1 == pki.server_cert_sha1.lower()
    assert pki.load_ca_key().public_key() == pki.ca_cert.public_key()


def test_second_call_is_idempotent(pki_dir: Path) -> None:
    before = {p.name: p.read_bytes() for p in pki_dir.iterdir()}
    first = ensure_pki(pki_dir, EXTRA_SANS)
    second = ensure_pki(pki_dir, ["10.1.2.3", "tollgate.example.com"])  # a subset, other case: nothing to do
    third = ensure_pki(pki_dir)
    assert first == second == third
    assert {p.name: p.read_bytes() for p in pki_dir.iterdir()} == before


def test_new_san_reissues_server_cert_and_keeps_ca(pki_dir: Path) -> None:
    old = ensure_pki(pki_dir, EXTRA_SANS)
    ca_key_before = (pki_dir / "ca.key").read_bytes()
    new = ensure_pki(pki_dir, ["ziti.internal", "192.168.7.7"])
    assert new.ca_pem == old.ca_pem
    assert (pki_dir / "ca.key").read_bytes() == ca_key_before
    assert new.server_cert_pem != old.server_cert_pem
    new.server_cert.verify_directly_issued_by(new.ca_cert)
    dns, ips = _sans(new.server_cert)
    # New names added, and the earlier extras kept so existing clients keep working.
    assert {"localhost", "ziti.internal", "tollgate.example.com"} <= set(dns)
    assert {ipaddress.ip_address("192.168.7.7"), ipaddress.ip_address("10.1.2.3")} <= set(ips)
    # The server key survives a re-issue, so JWTs signed with it stay verifiable.
    assert new.server_cert.public_key() == old.server_cert.public_key()
    assert stat.S_IMODE((pki_dir / "server.key").stat().st_mode) == 0o600
    assert ensure_pki(pki_dir, ["ziti.internal"]) == new


def test_near_expiry_reissues_server_cert(pki_dir: Path) -> None:
    old = ensure_pki(pki_dir, EXTRA_SANS)
    expiry = old.server_cert.not_valid_after_utc
    assert ensure_pki(pki_dir, EXTRA_SANS, now=expiry - dt.timedelta(days=31)) == old
    new = ensure_pki(pki_dir, EXTRA_SANS, now=expiry - dt.timedelta(days=29))
    assert new.ca_pem == old.ca_pem
    assert new.server_cert.not_valid_after_utc > expiry
    new.server_cert.verify_directly_issued_by(new.ca_cert)


def test_mismatched_server_key_is_replaced(pki_dir: Path, tmp_path: Path) -> None:
    old = ensure_pki(pki_dir, EXTRA_SANS)
    (pki_dir / "server.key").write_bytes(b"not a key")
    new = ensure_pki(pki_dir, EXTRA_SANS)
    assert new.server_cert.public_key() != old.server_cert.public_key()
    assert new.load_server_key().public_key() == new.server_cert.public_key()
    assert stat.S_IMODE((pki_dir / "server.key").stat().st_mode) == 0o600


def test_server_cert_from_other_ca_is_replaced(pki_dir: Path, tmp_path: Path) -> None:
    other = ensure_pki(tmp_path / "other")
    shutil.copy(other.server_cert_path, pki_dir / "server.pem")
    shutil.copy(other.server_key_path, pki_dir / "server.key")
    fixed = ensure_pki(pki_dir)
    fixed.server_cert.verify_directly_issued_by(fixed.ca_cert)


def test_ca_cert_without_key_is_an_error(pki_dir: Path) -> None:
    (pki_dir / "ca.key").unlink()
    with pytest.raises(PkiError):
        ensure_pki(pki_dir)


def test_ca_key_without_cert_is_recovered(pki_dir: Path) -> None:
    old = ensure_pki(pki_dir, EXTRA_SANS)
    (pki_dir / "ca.pem").unlink()
    new = ensure_pki(pki_dir, EXTRA_SANS)
    assert new.ca_cert.public_key() == old.ca_cert.public_key()
    # Same subject and key: the existing server certificate still chains, so it is kept.
    assert new.server_cert_pem == old.server_cert_pem
    new.server_cert.verify_directly_issued_by(new.ca_cert)


def test_empty_san_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ensure_pki(tmp_path / "pki", ["  "])


def test_cacerts_pkcs7_round_trip(base_dir: Path) -> None:
    pki = ensure_pki(base_dir, EXTRA_SANS)
    text = cacerts_pkcs7_b64(pki)
    assert "\n" not in text
    certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(text, validate=True))
    assert certs == [pki.ca_cert]


def _handshake(pki: Pki, hostname: str) -> str | None:
    """A TLS handshake with the PKI's server certificate; the client's error text, or None on success."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(pki.server_cert_path, pki.server_key_path)
    client_ctx = ssl.create_default_context(cafile=str(pki.ca_cert_path))
    client_ctx.verify_flags |= ssl.VERIFY_X509_STRICT  # RFC 5280 conformance checks (AKI/SKI, critical bits)
    result = handshake(server_ctx, client_ctx, hostname)
    if result.client_error is not None:
        return str(result.client_error)
    assert result.server_error is None
    assert result.server_certificate is not None
    assert hashlib.sha1(result.server_certificate).hexdigest() == pki.server_cert_sha1
    return None


@pytest.mark.parametrize("hostname", ["localhost", "127.0.0.1", "::1", "tollgate.example.com", "10.1.2.3"])
def test_tls_handshake(base_dir: Path, hostname: str) -> None:
    assert _handshake(ensure_pki(base_dir, EXTRA_SANS), hostname) is None


def test_tls_handshake_rejects_unknown_name(base_dir: Path) -> None:
    error = _handshake(ensure_pki(base_dir, EXTRA_SANS), "elsewhere.example")
    assert error is not None and "match" in error.lower()


# --- server key type ----------------------------------------------------------------------------------------------


def _key_usage(cert: x509.Certificate) -> x509.KeyUsage:
    extension = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert extension.critical
    return extension.value


def test_rsa_server_certificate_key_usage(base_dir: Path) -> None:
    usage = _key_usage(ensure_pki(base_dir, EXTRA_SANS).server_cert)
    assert usage.digital_signature and usage.key_encipherment and not usage.key_agreement


def test_ec_server_key(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", EXTRA_SANS, server_key_type="ec")
    key = pki.load_server_key()
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    assert key.public_key() == pki.server_cert.public_key()
    assert stat.S_IMODE(pki.server_key_path.stat().st_mode) == 0o600
    pki.server_cert.verify_directly_issued_by(pki.ca_cert)
    usage = _key_usage(pki.server_cert)
    assert usage.digital_signature and usage.key_agreement and not usage.key_encipherment
    assert _handshake(pki, "tollgate.example.com") is None
    assert ensure_pki(tmp_path / "pki", EXTRA_SANS, server_key_type="ec") == pki


def test_switching_the_server_key_type_keeps_the_ca(pki_dir: Path) -> None:
    rsa_pki = ensure_pki(pki_dir, EXTRA_SANS)
    ca_key = (pki_dir / "ca.key").read_bytes()

    ec_pki = ensure_pki(pki_dir, server_key_type="ec")
    assert isinstance(ec_pki.load_server_key(), ec.EllipticCurvePrivateKey)
    assert ec_pki.server_cert.public_key() == ec_pki.load_server_key().public_key()
    assert ec_pki.ca_pem == rsa_pki.ca_pem and (pki_dir / "ca.key").read_bytes() == ca_key
    ec_pki.server_cert.verify_directly_issued_by(ec_pki.ca_cert)
    dns, _ = _sans(ec_pki.server_cert)
    assert "tollgate.example.com" in dns  # names asked for earlier survive the switch
    assert ensure_pki(pki_dir, server_key_type="ec") == ec_pki

    back = ensure_pki(pki_dir, server_key_type="rsa")
    assert isinstance(back.load_server_key(), rsa.RSAPrivateKey)
    assert back.server_cert.public_key() != rsa_pki.server_cert.public_key()  # a new key, not the first one
    assert back.ca_pem == rsa_pki.ca_pem and (pki_dir / "ca.key").read_bytes() == ca_key
    assert _handshake(back, "localhost") is None


def test_an_existing_ec_key_on_another_supported_curve_is_kept(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", server_key_type="ec")
    p384 = ec.generate_private_key(ec.SECP384R1())
    pki.server_key_path.write_bytes(p384.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    again = ensure_pki(tmp_path / "pki", server_key_type="ec")
    assert again.server_cert.public_key() == p384.public_key()  # re-issued for the key on disk
    again.server_cert.verify_directly_issued_by(again.ca_cert)


def test_unknown_server_key_type(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="server_key_type"):
        ensure_pki(tmp_path / "pki", server_key_type="dsa")
    assert not (tmp_path / "pki").exists()


def test_load_server_key_refuses_other_key_types(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", server_key_type="ec")
    other = ed25519.Ed25519PrivateKey.generate()
    pki.server_key_path.write_bytes(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    with pytest.raises(PkiError, match="neither an RSA nor an EC private key"):
        pki.load_server_key()
