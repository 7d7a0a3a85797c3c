"""Certificates the controller's CA signs, and reading the certificates clients send.

One profile covers every leaf the CA issues (:func:`issue_certificate`): the controller's own TLS server certificate
(``pki``), identity and router client certificates, edge-router server certificates and short-lived API-session
certificates (:class:`Issuer`). The subject is always chosen by the controller; from a CSR only the public key (and,
for server certificates, the DNS and IP names it asks for) is used.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import ipaddress
from collections.abc import Sequence
from typing import Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.certificates.csr import CSR_VALUE, pem_blocks
from controller.errors import ApiError, field_cause

__all__ = [
    "BACKDATE",
    "DEFAULT_CLIENT_VALIDITY",
    "ISSUED_ORGANIZATION",
    "CaPrivateKey",
    "CertificateAuthority",
    "Issuer",
    "certificate_pem",
    "fingerprint",
    "issue_certificate",
    "issued_by",
    "load_certificates",
]

CaPrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

#: notBefore lies this far before the moment of issue, so peers whose clocks run slightly behind accept a
#: certificate issued a moment ago.
BACKDATE = dt.timedelta(minutes=5)
#: Lifetime of identity and router certificates unless the Issuer is told otherwise.
DEFAULT_CLIENT_VALIDITY = dt.timedelta(days=365)
#: The organisation of every certificate issued for a CSR.
ISSUED_ORGANIZATION = "Tollgate"

_CERTIFICATE_LABEL = "CERTIFICATE"
_PEM_VALUE = "<pem>"


class CertificateAuthority(Protocol):
    """A CA an :class:`Issuer` signs with (:class:`controller.certificates.pki.Pki` is one)."""

    @property
    def ca_cert(self) -> x509.Certificate: ...

    def load_ca_key(self) -> CaPrivateKey:
        """The CA's private key, read from where it is kept."""


@dataclasses.dataclass(frozen=True)
class Issuer:
    """Signs certificates for CSRs with the controller's CA key.

    Build it with :meth:`from_pki`, which reads the CA key once; every certificate it issues chains to
    ``ca_cert``. All methods take ``now`` explicitly (timezone-aware) and are pure apart from the random serial.
    ``csr`` arguments are expected to come from :func:`controller.certificates.csr.load_csr`, which has checked
    the key type and the self-signature.
    """

    ca_cert: x509.Certificate
    ca_key: CaPrivateKey = dataclasses.field(repr=False)
    client_validity: dt.timedelta = DEFAULT_CLIENT_VALIDITY

    def __post_init__(self) -> None:
        if self.client_validity <= dt.timedelta(0):
            raise ValueError("client_validity must be positive")

    @classmethod
    def from_pki(cls, pki: CertificateAuthority, *, client_validity: dt.timedelta = DEFAULT_CLIENT_VALIDITY) -> Issuer:
        """An Issuer for ``pki``'s CA. Raises :class:`~controller.certificates.pki.PkiError` if the key is
        unreadable, and ValueError for a non-positive ``client_validity``."""
        return cls(ca_cert=pki.ca_cert, ca_key=pki.load_ca_key(), client_validity=client_validity)

    def client_certificate(
        self, csr: x509.CertificateSigningRequest, common_name: str, *, now: dt.datetime
    ) -> x509.Certificate:
        """A client certificate (EKU clientAuth) for an identity or a router, valid ``client_validity`` from ``now``
        (never past the CA's own notAfter), subject ``CN=common_name, O=Tollgate``. CSR extensions are ignored."""
        return self._issue(csr, common_name, now=now, validity=self.client_validity, server_names=None)

    def server_certificate(
        self,
        csr: x509.CertificateSigningRequest,
        common_name: str,
        *,
        now: dt.datetime,
        field: str = "serverCertCsr",
    ) -> x509.Certificate:
        """A server certificate for an edge router: as :meth:`client_certificate`, plus EKU serverAuth and the
        DNS and IP subject alternative names the CSR requests (copied as requested, in order).

        Raises:
            ApiError: COULD_NOT_PROCESS_CSR on ``field`` when the CSR's extensions do not parse or its
                SubjectAlternativeName asks for anything other than DNS names and IP addresses.
        """
        names = _requested_server_names(csr, field)
        return self._issue(csr, common_name, now=now, validity=self.client_validity, server_names=names)

    def session_certificate(
        self, csr: x509.CertificateSigningRequest, common_name: str, *, now: dt.datetime, validity: dt.timedelta
    ) -> x509.Certificate:
        """A short-lived client certificate for an API session, valid ``validity`` (positive) from ``now``."""
        if validity <= dt.timedelta(0):
            raise ValueError("validity must be positive")
        return self._issue(csr, common_name, now=now, validity=validity, server_names=None)

    def _issue(
        self,
        csr: x509.CertificateSigningRequest,
        common_name: str,
        *,
        now: dt.datetime,
        validity: dt.timedelta,
        server_names: Sequence[x509.GeneralName] | None,
    ) -> x509.Certificate:
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, ISSUED_ORGANIZATION),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )
        return issue_certificate(
            self.ca_key, self.ca_cert, csr.public_key(), subject, now=now, validity=validity, server_names=server_names
        )


def issue_certificate(
    ca_key: CaPrivateKey,
    ca_cert: x509.Certificate,
    public_key: CertificatePublicKeyTypes,
    subject: x509.Name,
    *,
    now: dt.datetime,
    validity: dt.timedelta,
    server_names: Sequence[x509.GeneralName] | None = None,
) -> x509.Certificate:
    """Sign a leaf certificate for ``public_key`` with the CA; the one profile of every certificate Tollgate issues.

    Args:
        ca_key, ca_cert: the issuing CA (the key must match the certificate).
        public_key: the subject's key.
        subject: the subject name.
        now: the moment of issue, timezone-aware.
        validity: how long after ``now`` the certificate stays valid.
        server_names: None for a client certificate (EKU clientAuth); a sequence, possibly empty, for a server
            certificate (EKU serverAuth and clientAuth, and a SubjectAlternativeName with these names when any).

    Returns:
        A certificate with a random 159-bit serial; notBefore ``now`` minus :data:`BACKDATE` and notAfter
        ``now + validity``, both clamped into the CA's own validity; critical BasicConstraints CA=false; critical
        KeyUsage digitalSignature, plus keyEncipherment for an RSA key or keyAgreement for an EC key; the subject key
        identifier of ``public_key`` and an authority key identifier equal to the CA's subject key identifier.

    Raises:
        ValueError: ``now`` is naive.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    not_before = max(now - BACKDATE, ca_cert.not_valid_before_utc)
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if server_names is None else [
        ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())  # 159 random bits: positive, at most 20 octets (RFC 5280)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(public_key), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(_ski(ca_cert)), critical=False)
    )
    if server_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(server_names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def fingerprint(cert: x509.Certificate) -> str:
    """Lower-case hex SHA-1 of the certificate's DER encoding, 40 characters without separators."""
    return hashlib.sha1(cert.public_bytes(serialization.Encoding.DER), usedforsecurity=False).hexdigest()


def certificate_pem(cert: x509.Certificate) -> str:
    """The certificate as one PEM block (ending with a newline)."""
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def load_certificates(pem: str, field: str) -> list[x509.Certificate]:
    """Every certificate of a PEM text sent by a client, in order (at least one).

    Text outside the PEM blocks is ignored. Error causes are ``{field, reason, value}``.

    Raises:
        ApiError: ``COULD_NOT_PARSE_BODY`` when ``pem`` is empty or holds no readable PEM block;
            ``EXPECTED_PEM_CERTIFICATE`` when a block is not a ``CERTIFICATE`` (the value names its type);
            ``COULD_NOT_PARSE_DER_BLOCK`` when a block's DER is not a certificate.
    """
    try:
        blocks = pem_blocks(pem.encode("utf-8"))
    except ValueError as exc:
        raise ApiError("COULD_NOT_PARSE_BODY", field_cause(field, str(exc), _PEM_VALUE)) from None
    if not blocks:
        reason = "no certificate given" if not pem.strip() else "no PEM block found"
        raise ApiError("COULD_NOT_PARSE_BODY", field_cause(field, reason, _PEM_VALUE))
    certificates = []
    for block in blocks:
        if block.label != _CERTIFICATE_LABEL:
            raise ApiError("EXPECTED_PEM_CERTIFICATE",
                           field_cause(field, f"encountered PEM block type {block.label}", block.label))
        try:
            certificates.append(x509.load_der_x509_certificate(block.der))
        except ValueError as exc:
            raise ApiError("COULD_NOT_PARSE_DER_BLOCK", field_cause(field, str(exc), _PEM_VALUE)) from None
    return certificates


def issued_by(cert: x509.Certificate, ca_cert: x509.Certificate) -> bool:
    """Whether ``cert`` names ``ca_cert``'s subject as its issuer and carries a valid signature by its key.

    Any signing key type works (RSA PKCS#1 v1.5 or PSS, ECDSA, Ed25519, Ed448, DSA). Validity periods, CA flags and
    key usages are not checked.
    """
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError, UnsupportedAlgorithm):
        return False
    return True


def _requested_server_names(csr: x509.CertificateSigningRequest, field: str) -> list[x509.GeneralName]:
    try:
        requested = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    except ValueError as exc:  # duplicate or malformed extensions
        reason = f"the certificate signing request's extensions are invalid: {exc}"
        raise ApiError("COULD_NOT_PROCESS_CSR", field_cause(field, reason, CSR_VALUE)) from None
    names: list[x509.GeneralName] = []
    for name in requested:
        if not _server_name(name):
            reason = f"only DNS names and IP addresses may be requested, not {name}"
            raise ApiError("COULD_NOT_PROCESS_CSR", field_cause(field, reason, CSR_VALUE))
        names.append(name)
    return names


def _server_name(name: x509.GeneralName) -> bool:
    """A name a server certificate may carry: a non-empty DNS name or a single IP address (not a network)."""
    if isinstance(name, x509.DNSName):
        return bool(name.value)
    return isinstance(name, x509.IPAddress) and isinstance(name.value, ipaddress.IPv4Address | ipaddress.IPv6Address)


def _ski(ca_cert: x509.Certificate) -> x509.SubjectKeyIdentifier:
    """The CA's own subject key identifier, however it was computed; derived from its key when absent."""
    try:
        return ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.SubjectKeyIdentifier.from_public_key(ca_cert.public_key())


def _key_usage(public_key: CertificatePublicKeyTypes) -> x509.KeyUsage:
    """TLS signatures always; RSA key transport for RSA keys, (EC)DH key agreement for EC keys."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=isinstance(public_key, rsa.RSAPublicKey),
        data_encipherment=False,
        key_agreement=isinstance(public_key, ec.EllipticCurvePublicKey),
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
