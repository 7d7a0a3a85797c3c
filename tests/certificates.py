"""Test support: keys, CSRs and certificates made the way clients and third-party CAs make them."""

from __future__ import annotations

import datetime as dt
import hashlib
import socket
import ssl
import threading
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_CA_USAGE = x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def csr_pem(key: ec.EllipticCurvePrivateKey, common_name: str = "client",
            sans: tuple[x509.GeneralName, ...] = ()) -> str:
    """A PEM CSR for ``key`` (what an SDK sends to enrol)."""
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Authority:
    """A certificate and its key: a third-party CA (:meth:`create`), or a certificate it signed (:meth:`sign`)."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(cls, name: str = "Third-party CA", *, not_before: dt.datetime | None = None,
               not_after: dt.datetime | None = None, is_ca: bool | None = True) -> Authority:
        """A self-signed certificate named ``name``: a CA unless ``is_ca`` says otherwise (None: no basic
        constraints at all). Valid from a day ago for a year unless told otherwise."""
        key = new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(not_before or _now() - dt.timedelta(days=1))
                   .not_valid_after(not_after or _now() + dt.timedelta(days=365)))
        if is_ca is not None:
            builder = builder.add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        if is_ca:
            builder = builder.add_extension(_CA_USAGE, critical=True)
        return cls(key, builder.sign(key, hashes.SHA256()))

    @property
    def pem(self) -> str:
        return pem(self.certificate)

    @property
    def fingerprint(self) -> str:
        return hashlib.sha1(self.certificate.public_bytes(serialization.Encoding.DER)).hexdigest()

    def sign(self, common_name: str, *, key: ec.EllipticCurvePrivateKey | None = None,
             not_before: dt.datetime | None = None, not_after: dt.datetime | None = None,
             sans: tuple[x509.GeneralName, ...] = ()) -> Authority:
        """A client certificate (EKU clientAuth, not a CA) for ``key`` (a new one by default), signed by this
        authority; valid from a minute ago for a day unless told otherwise."""
        key = key or new_key()
        start = not_before or _now() - dt.timedelta(minutes=1)
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
                   .issuer_name(self.certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(not_after or start + dt.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        return Authority(key, builder.sign(self.key, hashes.SHA256()))

    def issue(self, common_name: str, key: ec.EllipticCurvePrivateKey | None = None,
              sans: tuple[x509.GeneralName, ...] = ()) -> x509.Certificate:
        """The certificate of :meth:`sign`, alone."""
        return self.sign(common_name, key=key, sans=sans).certificate


@dataclass
class Handshake:
    """What a TLS handshake over a socket pair came to: each side's error (None when it succeeded), the client
    certificate as the server saw it and the server certificate as the client saw it (DER, None when absent)."""

    client_error: BaseException | None = None
    server_error: BaseException | None = None
    client_certificate: bytes | None = None
    server_certificate: bytes | None = None


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> Handshake:
    """Run one TLS handshake (and a byte each way) between the two contexts over a socket pair."""
    left, right = socket.socketpair()
    left.settimeout(10)
    right.settimeout(10)
    result = Handshake()

    def serve() -> None:
        try:
            with server.wrap_socket(right, server_side=True) as tls:
                result.client_certificate = tls.getpeercert(binary_form=True)
                tls.recv(1)
                tls.sendall(b"!")
        except (OSError, ssl.SSLError) as exc:
            result.server_error = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(left, server_hostname=hostname) as tls:
            result.server_certificate = tls.getpeercert(binary_form=True)
            tls.sendall(b"?")
            tls.recv(1)
    except (OSError, ssl.SSLError) as exc:
        result.client_error = exc
    finally:
        left.close()
        thread.join(10)
        right.close()
    return result
