"""``TlsContexts``: the live TLS contexts of the listeners, what client certificates they trust, and the server
certificate they present.

TLS only decides whether a presented client certificate chains to a known CA; whether that certificate may
authenticate (its CA deleted, unverified or with authentication disabled, the certificate expired under the
identity's auth policy) is the application's decision, made per request. So trust only ever grows at run time: a CA
added here is loaded into every live TLS context, and nothing is removed from a context (OpenSSL offers no way to).
"""

from __future__ import annotations

import ssl
import weakref
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

__all__ = ["TlsContexts"]


class TlsContexts:
    """The controller's own CA plus the third-party CAs added since start, and the TLS contexts that trust them
    (and present the server certificate, which :meth:`load_server_certificate` replaces in each at run time).

    Args:
        own_ca_pem: the controller's CA certificate (PEM); it is always trusted.

    Raises:
        ValueError: ``own_ca_pem`` holds no PEM certificate.
    """

    def __init__(self, own_ca_pem: str) -> None:
        self._pems: list[str] = []
        self._known: set[bytes] = set()  # DER of every trusted CA, so adding one twice changes nothing
        # Weak: a context dropped by a stopped server is neither kept alive nor updated any more.
        self._contexts: weakref.WeakSet[ssl.SSLContext] = weakref.WeakSet()
        self._server_certificate: str | None = None
        self.add_ca(own_ca_pem)

    @property
    def server_certificate(self) -> str | None:
        """The leaf certificate (PEM) the contexts present since the last :meth:`load_server_certificate`."""
        return self._server_certificate

    @property
    def certificates(self) -> tuple[str, ...]:
        """Every trusted CA as a PEM string, the controller's own first, then in the order they were added."""
        return tuple(self._pems)

    def attach(self, context: ssl.SSLContext) -> None:
        """Load every trusted CA into ``context`` and keep it up to date with the CAs :meth:`add_ca` brings later.

        Only the trust store is touched: the caller chooses ``verify_mode`` and the verification flags.
        """
        for pem in self._pems:
            context.load_verify_locations(cadata=pem)
        self._contexts.add(context)

    def add_ca(self, pem: str) -> None:
        """Trust the CA certificate(s) in ``pem`` from the next TLS handshake on, in every attached context.

        A certificate already trusted is skipped. The certificate is not checked to be a CA, nor to be valid now:
        the chain check at handshake and the application's own rules decide what it may sign for.

        Raises:
            ValueError: ``pem`` holds no PEM certificate.
        """
        for certificate in x509.load_pem_x509_certificates(pem.encode("ascii")):
            der = certificate.public_bytes(serialization.Encoding.DER)
            if der in self._known:
                continue
            one = certificate.public_bytes(serialization.Encoding.PEM).decode("ascii")
            for context in self._contexts:
                context.load_verify_locations(cadata=one)
            self._known.add(der)
            self._pems.append(one)

    def load_server_certificate(self, certfile: Path, keyfile: Path) -> None:
        """Present the certificate chain of ``certfile`` (with ``keyfile``'s key) from the next handshake on, in
        every attached context: a renewed server certificate takes effect without a restart."""
        for context in self._contexts:
            context.load_cert_chain(certfile, keyfile)
        leaf = x509.load_pem_x509_certificates(certfile.read_bytes())[0]
        self._server_certificate = leaf.public_bytes(serialization.Encoding.PEM).decode("ascii")
