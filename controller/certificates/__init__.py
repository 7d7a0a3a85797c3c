"""The controller's own PKI and everything made or read with it: its root CA and TLS server certificate, the
certificates it signs for CSRs, JWTs and nonces signed with its server key, the live TLS contexts of its listeners,
which CA vouches for a client certificate, and a CA's external-id claim.

Below the resource kinds and the logins that use it: it imports only ``controller.errors`` and libraries
(cryptography, pyjwt), never a kind, the store or the web layer.

* ``pki`` and ``server_names``: the CA and the server certificate, made on the first start and renewed;
* ``csr`` and ``issuing``: CSRs read (the malformed ones old SDKs send included) and certificates signed for them;
* ``signing``: JWTs, the JWKS that verifies them, and nonce challenges, signed with the server key;
* ``tls_contexts`` and ``client_certificates``: the listeners' TLS contexts and the CAs of client certificates;
* ``external_id``: a client certificate's external id, as a CA's ``externalIdClaim`` says where to find it.
"""

from controller.certificates.issuing import Issuer
from controller.certificates.pki import Pki, PkiError, cacerts_pkcs7_b64, ensure_pki
from controller.certificates.signing import TokenSigner
from controller.certificates.tls_contexts import TlsContexts

__all__ = ["Issuer", "Pki", "PkiError", "TlsContexts", "TokenSigner", "cacerts_pkcs7_b64", "ensure_pki"]
