"""controller.certificates.issuing: the certificate profiles, validity clamps, serials, a real mutual-TLS handshake
with an issued client certificate, reading client PEM, and issuer checks."""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import ssl
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.certificates.csr import load_csr
from controller.certificates.issuing import (
    Issuer,
    certificate_pem,
    fingerprint,
    issued_by,
    load_certificates,
)
from controller.certificates.pki import Pki, ensure_pki
from controller.errors import ApiError
from tests.certificates import handshake

CSR_SUBJECT = x509.Name(
    [
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "OpenZiti"),
        x509.NameAttribute(NameOID.COMMON_NAME, "chosen-by-the-client"),
    ]
)
ExtensionT = TypeVar("ExtensionT", bound=x509.ExtensionType)
ROUTER_NAMES: list[x509.GeneralName] = [
    x509.DNSName("router.example"),
    x509.IPAddress(ipaddress.ip_address("10.0.0.9")),
    x509.IPAddress(ipaddress.ip_address("fd00::9")),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure_pki(tmp_path_factory.mktemp("issuing") / "pki")


@pytest.fixture(scope="module")
def issuer(pki: Pki) -> Issuer:
    return Issuer.from_pki(pki)


@pytest.fixture
def now(pki: Pki) -> dt.datetime:
    """A moment well inside the CA's validity, whole seconds (certificates carry no fractions)."""
    return pki.ca_cert.not_valid_before_utc + dt.timedelta(days=10)


def csr_for(key: CertificateIssuerPrivateKeyTypes, names: list[x509.GeneralName] | None = None,
            ) -> x509.CertificateSigningRequest:
    builder = x509.CertificateSigningRequestBuilder().subject_name(CSR_SUBJECT)
    if names is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    der = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
    return load_csr(der, "csr")


def ext(cert: x509.Certificate, kind: type[ExtensionT]) -> x509.Extension[ExtensionT]:
    return cert.extensions.get_extension_for_class(kind)


def assert_leaf_profile(cert: x509.Certificate, pki: Pki, csr: x509.CertificateSigningRequest,
                        common_name: str) -> None:
    """What every issued certificate has, whatever its profile."""
    assert cert.subject == x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tollgate"),
                                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    assert cert.issuer == pki.ca_cert.subject
    assert cert.public_key() == csr.public_key()
    assert 0 < cert.serial_number < 2**159
    assert cert.signature_hash_algorithm is not None and cert.signature_hash_algorithm.name == "sha256"
    basic = ext(cert, x509.BasicConstraints)
    assert basic.critical and basic.value.ca is False
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature
    is_rsa = isinstance(cert.public_key(), rsa.RSAPublicKey)
    assert usage.value.key_encipherment is is_rsa
    assert usage.value.key_agreement is not is_rsa
    assert not (usage.value.key_cert_sign or usage.value.crl_sign or usage.value.content_commitment)
    assert ext(cert, x509.SubjectKeyIdentifier).value == x509.SubjectKeyIdentifier.from_public_key(csr.public_key())
    ca_ski = ext(pki.ca_cert, x509.SubjectKeyIdentifier).value.digest
    assert ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert issued_by(cert, pki.ca_cert)


@pytest.mark.parametrize("key_name", ["rsa_key", "ec_key"])
def test_client_certificate(key_name: str, request: pytest.FixtureRequest, pki: Pki, issuer: Issuer,
                            now: dt.datetime) -> None:
    csr = csr_for(request.getfixturevalue(key_name), ROUTER_NAMES)  # requested names are ignored here
    cert = issuer.client_certificate(csr, "identity-id", now=now)
    assert_leaf_profile(cert, pki, csr, "identity-id")
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        ext(cert, x509.SubjectAlternativeName)
    assert cert.not_valid_before_utc == now - dt.timedelta(minutes=5)
    assert cert.not_valid_after_utc == now + dt.timedelta(days=365)


def test_client_validity_is_configurable_and_capped_by_the_ca(pki: Pki, ec_key: ec.EllipticCurvePrivateKey,
                                                              now: dt.datetime) -> None:
    csr = csr_for(ec_key)
    short = Issuer.from_pki(pki, client_validity=dt.timedelta(days=30))
    assert short.client_certificate(csr, "x", now=now).not_valid_after_utc == now + dt.timedelta(days=30)

    ca_end = pki.ca_cert.not_valid_after_utc
    late = ca_end - dt.timedelta(days=10)
    assert short.client_certificate(csr, "x", now=late).not_valid_after_utc == ca_end

    ca_start = pki.ca_cert.not_valid_before_utc
    early = short.client_certificate(csr, "x", now=ca_start + dt.timedelta(minutes=1))
    assert early.not_valid_before_utc == ca_start  # backdating never reaches before the CA itself

    with pytest.raises(ValueError, match="client_validity"):
        Issuer.from_pki(pki, client_validity=dt.timedelta(0))
    with pytest.raises(ValueError, match="timezone-aware"):
        short.client_certificate(csr, "x", now=now.replace(tzinfo=None))


@pytest.mark.parametrize("key_name", ["rsa_key", "ec_key"])
def test_server_certificate(key_name: str, request: pytest.FixtureRequest, pki: Pki, issuer: Issuer,
                            now: dt.datetime) -> None:
    csr = csr_for(request.getfixturevalue(key_name), ROUTER_NAMES)
    cert = issuer.server_certificate(csr, "router-id", now=now)
    assert_leaf_profile(cert, pki, csr, "router-id")
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH,
                                                            ExtendedKeyUsageOID.CLIENT_AUTH]
    assert list(ext(cert, x509.SubjectAlternativeName).value) == ROUTER_NAMES
    assert cert.not_valid_after_utc == now + dt.timedelta(days=365)


def test_server_certificate_without_requested_names(issuer: Issuer, ec_key: ec.EllipticCurvePrivateKey,
                                                    now: dt.datetime) -> None:
    cert = issuer.server_certificate(csr_for(ec_key), "router-id", now=now)
    with pytest.raises(x509.ExtensionNotFound):
        ext(cert, x509.SubjectAlternativeName)


@pytest.mark.parametrize("name", [
    x509.UniformResourceIdentifier("spiffe://example/router"),
    x509.RFC822Name("router@example.com"),
    x509.IPAddress(ipaddress.ip_network("10.0.0.0/8")),
], ids=["uri", "email", "network"])
def test_server_certificate_refuses_other_names(name: x509.GeneralName, issuer: Issuer,
                                                ec_key: ec.EllipticCurvePrivateKey, now: dt.datetime) -> None:
    csr = csr_for(ec_key, [x509.DNSName("router.example"), name])
    with pytest.raises(ApiError) as caught:
        issuer.server_certificate(csr, "router-id", now=now)
    assert caught.value.code == "COULD_NOT_PROCESS_CSR"
    assert caught.value.cause is not None and caught.value.cause["field"] == "serverCertCsr"
    assert caught.value.cause["reason"].startswith("only DNS names and IP addresses may be requested")
    with pytest.raises(ApiError) as caught:
        issuer.server_certificate(csr, "router-id", now=now, field="csr")
    assert caught.value.cause is not None and caught.value.cause["field"] == "csr"


def test_session_certificate(pki: Pki, issuer: Issuer, ec_key: ec.EllipticCurvePrivateKey, now: dt.datetime) -> None:
    csr = csr_for(ec_key)
    cert = issuer.session_certificate(csr, "api-session-id", now=now, validity=dt.timedelta(hours=12))
    assert_leaf_profile(cert, pki, csr, "api-session-id")
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.not_valid_after_utc == now + dt.timedelta(hours=12)
    with pytest.raises(ValueError, match="validity"):
        issuer.session_certificate(csr, "api-session-id", now=now, validity=dt.timedelta(0))


def test_serials_are_unique(issuer: Issuer, ec_key: ec.EllipticCurvePrivateKey, now: dt.datetime) -> None:
    csr = csr_for(ec_key)
    serials = {issuer.client_certificate(csr, "same", now=now).serial_number for _ in range(64)}
    assert len(serials) == 64
    assert all(0 < s < 2**159 for s in serials)


def test_issuer_repr_hides_the_key(issuer: Issuer) -> None:
    assert "ca_key" not in repr(issuer)


# --- mutual TLS ------------------------------------------------------------------------------------------------


def _write_identity(directory: Path, cert: x509.Certificate, key: CertificateIssuerPrivateKeyTypes) -> tuple[str, str]:
    cert_path, key_path = directory / f"{fingerprint(cert)}.pem", directory / f"{fingerprint(cert)}.key"
    cert_path.write_text(certificate_pem(cert))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def _mutual_tls(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> bytes | BaseException:
    """The client certificate's DER as the server saw it, or the server's error."""
    result = handshake(server, client, hostname)
    if result.server_error is not None:
        return result.server_error
    assert result.client_certificate is not None
    return result.client_certificate


def _server_context(cert_path: str | Path, key_path: str | Path, ca_path: str | Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=str(ca_path))
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    return context


@pytest.mark.parametrize("key_name", ["rsa_key", "ec_key"])
def test_tls_accepts_an_issued_client_certificate(key_name: str, request: pytest.FixtureRequest, pki: Pki,
                                                  issuer: Issuer, tmp_path: Path) -> None:
    key = request.getfixturevalue(key_name)
    cert = issuer.client_certificate(csr_for(key), "identity-id", now=dt.datetime.now(dt.UTC))
    server = _server_context(pki.server_cert_path, pki.server_key_path, pki.ca_cert_path)
    client = ssl.create_default_context(cafile=str(pki.ca_cert_path))
    client.load_cert_chain(*_write_identity(tmp_path, cert, key))
    peer = _mutual_tls(server, client, "localhost")
    assert isinstance(peer, bytes) and hashlib.sha1(peer).hexdigest() == fingerprint(cert)


def test_tls_refuses_a_client_certificate_from_another_ca(pki: Pki, ec_key: ec.EllipticCurvePrivateKey,
                                                          tmp_path: Path) -> None:
    other = Issuer.from_pki(ensure_pki(tmp_path / "other"))  # same CA subject, another key
    cert = other.client_certificate(csr_for(ec_key), "identity-id", now=dt.datetime.now(dt.UTC))
    assert not issued_by(cert, pki.ca_cert)
    server = _server_context(pki.server_cert_path, pki.server_key_path, pki.ca_cert_path)
    client = ssl.create_default_context(cafile=str(pki.ca_cert_path))
    client.load_cert_chain(*_write_identity(tmp_path, cert, ec_key))
    assert isinstance(_mutual_tls(server, client, "localhost"), ssl.SSLError)


def test_tls_accepts_an_issued_router_server_certificate(pki: Pki, issuer: Issuer, ec_key: ec.EllipticCurvePrivateKey,
                                                         tmp_path: Path) -> None:
    """An edge router serving its issued certificate to a client that trusts the CA and checks the host name."""
    cert = issuer.server_certificate(csr_for(ec_key, ROUTER_NAMES), "router-id", now=dt.datetime.now(dt.UTC))
    cert_path, key_path = _write_identity(tmp_path, cert, ec_key)
    client_cert = issuer.client_certificate(csr_for(ec_key), "identity-id", now=dt.datetime.now(dt.UTC))
    client = ssl.create_default_context(cafile=str(pki.ca_cert_path))
    client.verify_flags |= ssl.VERIFY_X509_STRICT
    client.load_cert_chain(*_write_identity(tmp_path, client_cert, ec_key))
    for hostname in ("router.example", "10.0.0.9", "fd00::9"):
        peer = _mutual_tls(_server_context(cert_path, key_path, pki.ca_cert_path), client, hostname)
        assert isinstance(peer, bytes) and hashlib.sha1(peer).hexdigest() == fingerprint(client_cert)
    refused = _mutual_tls(_server_context(cert_path, key_path, pki.ca_cert_path), client, "elsewhere.example")
    assert isinstance(refused, ssl.SSLError)  # the client checked the name and gave up


# --- fingerprints, PEM ------------------------------------------------------------------------------------------


def test_fingerprint_and_pem(pki: Pki) -> None:
    cert = pki.ca_cert
    value = fingerprint(cert)
    assert value == hashlib.sha1(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    assert len(value) == 40 and value == value.lower()
    text = certificate_pem(cert)
    assert text.startswith("-----BEGIN CERTIFICATE-----\n") and text.endswith("-----END CERTIFICATE-----\n")
    assert x509.load_pem_x509_certificate(text.encode()) == cert


def test_load_certificates(pki: Pki) -> None:
    ca, server = certificate_pem(pki.ca_cert), certificate_pem(pki.server_cert)
    assert load_certificates(ca, "certPem") == [pki.ca_cert]
    chain = "leaf:\r\n" + server.replace("\n", "\r\n") + "\r\nissuer:\n" + ca + "\n\n"
    assert load_certificates(chain, "certPem") == [pki.server_cert, pki.ca_cert]


def _load_error(text: str) -> ApiError:
    with pytest.raises(ApiError) as caught:
        load_certificates(text, "certPem")
    assert caught.value.cause is not None and caught.value.cause["field"] == "certPem"
    return caught.value


def test_load_certificates_errors(pki: Pki, ec_key: ec.EllipticCurvePrivateKey) -> None:
    for text in ("", "  \n", "not pem at all", "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"):
        assert _load_error(text).code == "COULD_NOT_PARSE_BODY"

    key_pem = ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()).decode()
    error = _load_error(key_pem)
    assert (error.code, error.status) == ("EXPECTED_PEM_CERTIFICATE", 400)
    assert error.cause == {"field": "certPem", "reason": "encountered PEM block type PRIVATE KEY",
                           "value": "PRIVATE KEY"}
    assert _load_error(certificate_pem(pki.ca_cert) + key_pem).code == "EXPECTED_PEM_CERTIFICATE"

    garbage = "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"
    assert _load_error(garbage).code == "COULD_NOT_PARSE_DER_BLOCK"


# --- issued_by --------------------------------------------------------------------------------------------------


def _self_signed_ca(key: CertificateIssuerPrivateKeyTypes, name: str) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(start).not_valid_after(start + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, algorithm))


def test_issued_by_any_key_type(pki: Pki, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey,
                                now: dt.datetime) -> None:
    rsa_ca = _self_signed_ca(rsa_key, "RSA CA")
    rsa_issuer = Issuer(ca_cert=rsa_ca, ca_key=rsa_key)
    leaf = rsa_issuer.client_certificate(csr_for(ec_key), "x", now=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
    assert issued_by(leaf, rsa_ca)
    assert issued_by(rsa_ca, rsa_ca)
    assert not issued_by(leaf, pki.ca_cert)

    ed_key = ed25519.Ed25519PrivateKey.generate()
    ed_ca = _self_signed_ca(ed_key, "Ed25519 CA")
    assert issued_by(ed_ca, ed_ca)
    assert not issued_by(ed_ca, rsa_ca)

    issued = Issuer.from_pki(pki).client_certificate(csr_for(ec_key), "x", now=now)
    assert issued_by(issued, pki.ca_cert)
    assert not issued_by(issued, rsa_ca)
    assert not issued_by(pki.ca_cert, issued)
