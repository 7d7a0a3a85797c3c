"""The controller's own PKI: a self-signed root CA and the TLS server certificate it issues.

Layout of ``pki_dir`` (all PEM)::

    ca.pem      root CA certificate (EC P-256, 10 years)
    ca.key      root CA private key, PKCS#8, mode 0600
    server.pem  server certificate (1 year) followed by ca.pem, i.e. the chain hypercorn serves
    server.key  server private key (RSA 2048, or EC P-256), PKCS#8, mode 0600

The CA key is EC P-256: it is only ever used to sign certificates, P-256 signatures are small and fast, and every
TLS stack and OpenZiti SDK verifies ECDSA chains. The server key also signs the controller's JWTs. It is RSA 2048 by
default because libziti 0.29 (the C SDK in PyPI ``openziti==0.6.0``) verifies only RS256 enrolment JWTs; ``"ec"``
makes it EC P-256 (ES256 JWTs, smaller and faster handshakes) for deployments whose SDKs all accept ES256.

Nothing here is asynchronous; :func:`ensure_pki` runs once at start-up (or in a worker thread). Every file is written
to a temporary name in ``pki_dir`` and moved into place with :func:`os.replace`, so a crash leaves either the old file
or the new one, never half of one. Key files are created with mode 0600 from the start so a key is never readable by
others, not even for an instant.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import functools
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import NameOID

from controller.certificates.issuing import BACKDATE, CaPrivateKey, fingerprint, issue_certificate
from controller.certificates.server_names import San, cert_sans, merge_sans, parse_sans

__all__ = [
    "CA_CERT_NAME",
    "CA_KEY_NAME",
    "DEFAULT_SANS",
    "RENEW_BEFORE",
    "SERVER_KEY_NAME",
    "SERVER_KEY_TYPES",
    "Pki",
    "PkiError",
    "ServerKey",
    "cacerts_pkcs7_b64",
    "ensure_pki",
    "write_private_file",
]

#: Names every server certificate carries, whatever else is asked for.
DEFAULT_SANS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
#: The ``server_key_type`` values :func:`ensure_pki` accepts.
SERVER_KEY_TYPES: tuple[str, ...] = ("rsa", "ec")

ServerKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

CA_CERT_NAME = "ca.pem"
CA_KEY_NAME = "ca.key"
SERVER_CERT_NAME = "server.pem"
SERVER_KEY_NAME = "server.key"

_CA_VALIDITY = dt.timedelta(days=3650)
_SERVER_VALIDITY = dt.timedelta(days=365)
# A server certificate this close to expiry is replaced at start-up, so a controller restarted at least monthly never
# serves an expired certificate.
RENEW_BEFORE = dt.timedelta(days=30)
# The CA subject is fixed: a CA certificate re-made from the same key (see ensure_pki) then still chains the server
# certificates issued before, because issuer name and key both match.
_CA_SUBJECT = x509.Name.from_rfc4514_string("CN=Tollgate Root CA,O=Tollgate")
# The CA key signs certificates and CRLs; digitalSignature is set as well, as in most CA profiles.
_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)
_MIN_RSA_BITS = 2048
# EC server keys this module accepts from disk: the curves the JWT algorithms ES256, ES384 and ES512 use.
_SERVER_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)


class PkiError(Exception):
    """The PKI directory is in a state that cannot be repaired automatically (e.g. a CA certificate without its key)."""


@dataclass(frozen=True)
class Pki:
    """Paths and PEM contents of the controller's PKI, as returned by :func:`ensure_pki`.

    ``ca_pem`` is the root CA certificate. ``server_cert_pem`` is the server (leaf) certificate alone;
    :attr:`server_chain_pem` is what ``server.pem`` holds (leaf then CA). Private keys are not kept in memory here;
    load them on demand with :meth:`load_server_key` / :meth:`load_ca_key`.
    """

    ca_cert_path: Path
    server_cert_path: Path
    server_key_path: Path
    ca_pem: bytes
    server_cert_pem: bytes

    @property
    def ca_key_path(self) -> Path:
        """The CA private key, next to the CA certificate."""
        return self.ca_cert_path.with_name(CA_KEY_NAME)

    @property
    def server_chain_pem(self) -> bytes:
        """Server certificate followed by the CA certificate (the contents of ``server.pem``)."""
        return self.server_cert_pem + self.ca_pem

    @property
    def server_cert(self) -> x509.Certificate:
        """The parsed server certificate."""
        return x509.load_pem_x509_certificate(self.server_cert_pem)

    @property
    def ca_cert(self) -> x509.Certificate:
        """The parsed CA certificate."""
        return x509.load_pem_x509_certificate(self.ca_pem)

    @property
    def server_cert_sha1(self) -> str:
        """Lower-case hex SHA-1 of the server certificate's DER encoding (40 characters, no separators)."""
        return fingerprint(self.server_cert)

    def load_server_key(self) -> ServerKey:
        """Read the server private key (RSA or EC) from disk; it signs the controller's JWTs.

        Raises :class:`PkiError` if the file is unreadable or holds another kind of key.
        """
        key = _load_key(self.server_key_path)
        if not isinstance(key, ServerKey):
            raise PkiError(f"{self.server_key_path} is neither an RSA nor an EC private key")
        return key

    def load_ca_key(self) -> CaPrivateKey:
        """Read the CA private key from disk, for issuing further certificates."""
        return _load_ca_key(self.ca_key_path)


def ensure_pki(
    pki_dir: Path, sans: Sequence[str] = (), *, server_key_type: str = "rsa", now: dt.datetime | None = None
) -> Pki:
    """Create or load the PKI in ``pki_dir`` and return it; idempotent.

    * Missing directory or CA: a new CA and server certificate are made. ``ca.key`` without ``ca.pem`` (a first run
      interrupted between the two writes) gets a fresh CA certificate for the existing key.
    * ``ca.pem`` without a usable ``ca.key``, or a key that does not match the certificate: :class:`PkiError`; the
      CA is never replaced silently, since enrolled clients trust it.
    * The server certificate is (re-)issued from the existing CA when it is missing or unreadable, does not chain to
      the CA, lacks any of :data:`DEFAULT_SANS` or ``sans``, or expires within 30 days.
    * ``server_key_type`` ``"rsa"`` (the default) wants an RSA server key, ``"ec"`` an EC one. An existing key of the
      wanted type is kept (RSA of at least 2048 bits; EC on P-256, P-384 or P-521), so JWTs it signed stay valid;
      otherwise (including a switch of type) a new RSA 2048 or EC P-256 key and a new certificate are made. The CA is
      never touched by a server key change.

    ``sans`` entries that parse as IP addresses (``[::1]`` brackets allowed) become IP SANs, anything else a DNS SAN
    (compared case-insensitively). Raises :class:`ValueError` for an empty entry or a ``server_key_type`` outside
    :data:`SERVER_KEY_TYPES`. ``now`` overrides the current time (tests only).
    """
    if server_key_type not in SERVER_KEY_TYPES:
        raise ValueError(f"server_key_type must be one of {', '.join(SERVER_KEY_TYPES)}, not {server_key_type!r}")
    moment = now if now is not None else dt.datetime.now(dt.UTC)
    wanted = parse_sans([*DEFAULT_SANS, *sans])
    # Private (0700): the CA and server keys are 0600 already; the directory keeps their names out of sight too.
    pki_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(pki_dir, 0o700)
    ca_cert_path = pki_dir / CA_CERT_NAME
    ca_key_path = pki_dir / CA_KEY_NAME
    server_cert_path = pki_dir / SERVER_CERT_NAME
    server_key_path = pki_dir / SERVER_KEY_NAME

    ca_key, ca_cert = _ensure_ca(ca_cert_path, ca_key_path, moment)

    server_key = _usable_server_key(server_key_path, server_key_type)
    server_cert = _current_server_cert(server_cert_path, ca_cert)
    if server_key is None or server_cert is None or not _server_cert_ok(server_cert, server_key, wanted, moment):
        if server_key is None:
            server_key = _new_server_key(server_key_type)
            _write_atomic(server_key_path, _key_pem(server_key), 0o600)
        names = merge_sans(wanted, cert_sans(server_cert) if server_cert is not None else [])
        server_cert = _issue_server_cert(ca_key, ca_cert, server_key, names, moment)
        chain = server_cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
        _write_atomic(server_cert_path, chain, 0o644)

    return Pki(
        ca_cert_path=ca_cert_path,
        server_cert_path=server_cert_path,
        server_key_path=server_key_path,
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        server_cert_pem=server_cert.public_bytes(serialization.Encoding.PEM),
    )


def cacerts_pkcs7_b64(pki: Pki) -> str:
    """The CA certificates as a degenerate (certificates-only) PKCS#7 in DER, base64-encoded.

    This is the body of ``GET /.well-known/est/cacerts`` (RFC 7030 4.1.3, ``application/pkcs7-mime``). RFC 7030
    servers usually wrap the base64 at 64 columns; this returns standard base64 on a single line with no trailing
    newline, which the OpenZiti SDKs and any RFC 4648 decoder accept.
    """
    der = pkcs7.serialize_certificates([pki.ca_cert], serialization.Encoding.DER)
    return base64.b64encode(der).decode("ascii")


# --- CA ---------------------------------------------------------------------------------------------------------


def _ensure_ca(cert_path: Path, key_path: Path, moment: dt.datetime) -> tuple[CaPrivateKey, x509.Certificate]:
    if cert_path.exists():
        if not key_path.exists():
            raise PkiError(f"{cert_path} exists but its key {key_path} is missing; cannot issue certificates")
        cert = _load_cert(cert_path)
        key = _load_ca_key(key_path)
        if cert.public_key() != key.public_key():
            raise PkiError(f"{key_path} does not match the certificate in {cert_path}")
        return key, cert
    if key_path.exists():
        key = _load_ca_key(key_path)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
        _write_atomic(key_path, _key_pem(key), 0o600)
    cert = _make_ca_cert(key, moment)
    _write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return key, cert


def _make_ca_cert(key: CaPrivateKey, moment: dt.datetime) -> x509.Certificate:
    public = key.public_key()
    ski = x509.SubjectKeyIdentifier.from_public_key(public)
    return (
        x509.CertificateBuilder()
        .subject_name(_CA_SUBJECT)
        .issuer_name(_CA_SUBJECT)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(moment - BACKDATE)
        .not_valid_after(moment + _CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )


def _load_ca_key(path: Path) -> CaPrivateKey:
    key = _load_key(path)
    if not isinstance(key, CaPrivateKey):
        raise PkiError(f"{path} holds an unsupported key type for a CA")
    return key


# --- server certificate -----------------------------------------------------------------------------------------


def _usable_server_key(path: Path, key_type: str) -> ServerKey | None:
    """The existing server key if it is of ``key_type`` and strong enough; None means make a new one."""
    if not path.exists():
        return None
    try:
        key = _load_key(path)
    except (PkiError, ValueError):
        return None
    if key_type == "rsa" and isinstance(key, rsa.RSAPrivateKey) and key.key_size >= _MIN_RSA_BITS:
        return key
    if key_type == "ec" and isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, _SERVER_CURVES):
        return key
    return None


def _new_server_key(key_type: str) -> ServerKey:
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=_MIN_RSA_BITS)


def _current_server_cert(path: Path, ca_cert: x509.Certificate) -> x509.Certificate | None:
    """The leaf of ``server.pem`` if it parses and was signed by ``ca_cert``; None means issue a new one."""
    try:
        certs = x509.load_pem_x509_certificates(path.read_bytes())
    except (OSError, ValueError):
        return None
    leaf = certs[0]
    try:
        leaf.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError):  # wrong issuer, bad signature, or an unexpected key type
        return None
    return leaf


def _server_cert_ok(cert: x509.Certificate, key: ServerKey, wanted: Sequence[San], moment: dt.datetime) -> bool:
    if cert.public_key() != key.public_key():
        return False
    if cert.not_valid_after_utc - moment < RENEW_BEFORE or cert.not_valid_before_utc > moment:
        return False
    present = set(cert_sans(cert))
    return all(name in present for name in wanted)


def _issue_server_cert(
    ca_key: CaPrivateKey,
    ca_cert: x509.Certificate,
    key: ServerKey,
    names: Sequence[San],
    moment: dt.datetime,
) -> x509.Certificate:
    dns = [n for n in names if isinstance(n, str) and n != "localhost"]
    # The CN is informational only (clients match SANs); the first configured DNS name reads best in `openssl x509`.
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tollgate"),
            x509.NameAttribute(NameOID.COMMON_NAME, dns[0] if dns else "localhost"),
        ]
    )
    general: list[x509.GeneralName] = [x509.DNSName(n) if isinstance(n, str) else x509.IPAddress(n) for n in names]
    return issue_certificate(
        ca_key, ca_cert, key.public_key(), subject, now=moment, validity=_SERVER_VALIDITY, server_names=general
    )


# --- files ------------------------------------------------------------------------------------------------------


def _key_pem(key: CaPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_key(path: Path) -> PrivateKeyTypes:
    try:
        return _parse_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise PkiError(f"cannot load private key {path}: {exc}") from exc


@functools.lru_cache(maxsize=8)
def _parse_key(pem: bytes) -> PrivateKeyTypes:
    """The key ``pem`` holds, fully validated. Validating an RSA key costs ~40 ms here, and a start loads the server
    key twice (checking it, then for signing): the same bytes always make the same immutable key, so each distinct
    PEM is parsed once per process. The check is never skipped: a signing key that fails it could leak itself."""
    return serialization.load_pem_private_key(pem, password=None)


def _load_cert(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise PkiError(f"cannot load certificate {path}: {exc}") from exc


def write_private_file(path: Path, data: bytes) -> None:
    """Write a secret (mode 0600) atomically and durably: a crash leaves the old file or the new one."""
    _write_atomic(path, data, 0o600)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` via a temporary file created with ``mode`` and :func:`os.replace`.

    The temporary file gets ``mode`` at creation (``O_CREAT`` with ``O_EXCL``), so key material is never
    world-readable. Data and directory entry are fsynced so the replacement survives a power cut.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
