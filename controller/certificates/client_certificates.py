"""Which CA vouches for a client certificate.

The controller's own CA issued every certificate of an ``ott`` enrolment and of router enrolment; a third-party CA
(a row of ``cas``) may vouch for certificates in ``ottca`` enrolment, automatic CA enrolment and login, each with its
own conditions on the CA. Only the direct issuer is considered: TLS hands the application the leaf alone, and the
TLS layer has already checked the chain against the trusted CAs (``trust.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from cryptography import x509

from controller.certificates.issuing import issued_by
from storage.store import ReadTxn

__all__ = ["ca_certificate", "issuing_ca", "login_ca", "network_issued", "verified_ca", "within_validity"]

CaRow = Mapping[str, Any]


@functools.lru_cache(maxsize=256)
def _first_certificate(pem: str) -> x509.Certificate | None:
    certificates = x509.load_pem_x509_certificates(pem.encode())
    return certificates[0] if certificates else None


def ca_certificate(ca: CaRow) -> x509.Certificate | None:
    """The certificate of a stored CA (its first, when its PEM holds several); parsed once per PEM."""
    try:
        return _first_certificate(str(ca.get("certPem") or ""))
    except ValueError:
        return None


def network_issued(certificate: x509.Certificate, network_ca_pem: bytes) -> bool:
    """Whether the controller's own CA issued ``certificate``."""
    network_ca = _first_certificate(network_ca_pem.decode("ascii"))
    return network_ca is not None and issued_by(certificate, network_ca)


def issuing_ca(txn: ReadTxn, certificate: x509.Certificate, accept: Callable[[CaRow], bool]) -> dict[str, Any] | None:
    """The first stored CA that ``accept`` admits and that issued ``certificate``; None when there is none."""
    for ca in txn.scan("cas"):
        if not accept(ca):
            continue
        ca_cert = ca_certificate(ca)
        if ca_cert is not None and issued_by(certificate, ca_cert):
            return ca
    return None


def within_validity(certificate: x509.Certificate, now: float) -> bool:
    """Whether ``now`` (epoch seconds) lies within the certificate's validity dates."""
    return certificate.not_valid_before_utc.timestamp() <= now <= certificate.not_valid_after_utc.timestamp()


def verified_ca(ca: CaRow) -> bool:
    """A CA whose owner proved control of its key: the least any use of a third-party CA asks."""
    return bool(ca.get("isVerified"))


def login_ca(ca: CaRow) -> bool:
    """A CA whose certificates may log in: verified, with authentication enabled."""
    return bool(ca.get("isVerified") and ca.get("isAuthEnabled"))
