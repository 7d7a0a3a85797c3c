"""Reading certificate signing requests from clients, including the malformed ones old OpenZiti SDKs send.

libziti 0.29 encodes the outer ``signatureAlgorithm`` of its ECDSA CSRs with an explicit NULL parameter, which RFC 5758
forbids and ``cryptography`` 49+ refuses to parse. The signature covers only the ``CertificationRequestInfo``, not that
AlgorithmIdentifier, so :func:`load_csr` drops the NULL (re-encoding the enclosing DER with its new lengths) before
parsing, and the request's self-signature still verifies. Nothing else in a request is ever rewritten.

Also here: :func:`pem_blocks`, the PEM reader shared with ``issuing``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from controller.errors import ApiError, field_cause

__all__ = ["CSR_VALUE", "PemBlock", "load_csr", "pem_blocks"]

#: The ``value`` of every CSR error cause: the request itself is never echoed back.
CSR_VALUE = "<csr>"

_CSR_LABELS = frozenset({"CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST"})
_MIN_RSA_BITS = 2048
_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)
_UNSUPPORTED_KEY = "unsupported public key: only RSA keys of at least 2048 bits and EC keys on P-256, P-384 or P-521"

# RFC 7468 textual encoding; the label must match at both ends. Anything between blocks is ignored, as Go's pem does.
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_WHITESPACE = re.compile(rb"\s+")

_SEQUENCE = 0x30
_DER_NULL = b"\x05\x00"
# The complete DER encodings (tag, length, value) of ecdsa-with-SHA1, -SHA224, -SHA256, -SHA384 and -SHA512
# (1.2.840.10045.4.1 and 1.2.840.10045.4.3.1-4): RFC 5758 says their parameters must be absent.
_ECDSA_SIGNATURE_OIDS = frozenset(
    bytes.fromhex(h)
    for h in (
        "06072a8648ce3d0401",
        "06082a8648ce3d040301",
        "06082a8648ce3d040302",
        "06082a8648ce3d040303",
        "06082a8648ce3d040304",
    )
)


@dataclass(frozen=True, slots=True)
class PemBlock:
    """One decoded PEM block: its label (``CERTIFICATE``, ``CERTIFICATE REQUEST``...) and the DER it holds."""

    label: str
    der: bytes


def pem_blocks(data: bytes) -> list[PemBlock]:
    """Every PEM block in ``data``, in order.

    Line endings (LF or CRLF) and whitespace inside the base64 are ignored, and so is any text outside the blocks.

    Returns:
        The blocks; an empty list when ``data`` holds none.

    Raises:
        ValueError: a block's body is not valid base64 (RFC 1421 headers such as ``Proc-Type`` included).
    """
    blocks = []
    for match in _PEM_BLOCK.finditer(data):
        body = _WHITESPACE.sub(b"", match.group(2))
        try:
            der = base64.b64decode(body, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"invalid base64 in PEM block {match.group(1).decode()}") from exc
        blocks.append(PemBlock(match.group(1).decode("ascii"), der))
    return blocks


def load_csr(data: str | bytes, field: str) -> x509.CertificateSigningRequest:
    """Parse and check a certificate signing request sent by a client.

    Args:
        data: one PEM ``CERTIFICATE REQUEST`` block (LF or CRLF line endings, surrounding whitespace or text
            allowed), or the raw DER as bytes.
        field: the request field the CSR came in, named in the error cause.

    Returns:
        The parsed request. Its self-signature has been verified and its public key is RSA of at least 2048 bits
        or EC on P-256, P-384 or P-521. A libziti-style NULL signature-algorithm parameter has been removed.

    Raises:
        ApiError: ``COULD_NOT_PROCESS_CSR`` with ``{field, reason, "<csr>"}`` when ``data`` is neither PEM nor DER,
            holds no or several requests or a block of another type, does not parse as a CSR, carries an
            unsupported key, or its signature does not verify.
    """
    der = _csr_der(data, field)
    try:
        csr = x509.load_der_x509_csr(_without_ecdsa_null_parameter(der))
    except ValueError as exc:
        raise _refused(field, f"not a valid certificate signing request: {exc}", CSR_VALUE) from None
    try:
        public_key = csr.public_key()
    except (ValueError, UnsupportedAlgorithm):  # a key algorithm cryptography does not know
        raise _refused(field, _UNSUPPORTED_KEY, CSR_VALUE) from None
    if not _supported_key(public_key):
        raise _refused(field, _UNSUPPORTED_KEY, CSR_VALUE)
    try:
        valid = csr.is_signature_valid
    except (ValueError, UnsupportedAlgorithm) as exc:  # e.g. a signature algorithm that does not fit the key
        raise _refused(field, f"the certificate signing request's signature cannot be checked: {exc}",
                         CSR_VALUE) from None
    if not valid:
        raise _refused(field, "the certificate signing request's signature is invalid", CSR_VALUE)
    return csr


def _refused(field: str, reason: str, value: str) -> ApiError:
    """Why a CSR cannot be used, as the reference answers every such case: 400 COULD_NOT_PROCESS_CSR."""
    return ApiError("COULD_NOT_PROCESS_CSR", field_cause(field, reason, value))


def _csr_der(data: str | bytes, field: str) -> bytes:
    if isinstance(data, bytes) and data[:1] == bytes([_SEQUENCE]):
        return data  # binary DER: a PEM text starts with "-----" (or whitespace)
    try:
        blocks = pem_blocks(data.encode("utf-8") if isinstance(data, str) else data)
    except ValueError as exc:
        raise _refused(field, f"not PEM: {exc}", CSR_VALUE) from None
    if not blocks:
        raise _refused(field, "not a PEM or DER encoded certificate signing request", CSR_VALUE)
    if len(blocks) != 1:
        raise _refused(field, f"expected one PEM block, found {len(blocks)}", CSR_VALUE)
    if blocks[0].label not in _CSR_LABELS:
        raise _refused(field, f"expected PEM block type CERTIFICATE REQUEST, found {blocks[0].label}", CSR_VALUE)
    return blocks[0].der


def _supported_key(public_key: object) -> bool:
    if isinstance(public_key, rsa.RSAPublicKey):
        return public_key.key_size >= _MIN_RSA_BITS
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        return isinstance(public_key.curve, _CURVES)
    return False


# --- the libziti repair -----------------------------------------------------------------------------------------


def _without_ecdsa_null_parameter(der: bytes) -> bytes:
    """``der`` with the NULL parameter of an ECDSA outer signatureAlgorithm removed; otherwise ``der`` unchanged.

    CertificationRequest ::= SEQUENCE { certificationRequestInfo, signatureAlgorithm, signature }. Only the
    AlgorithmIdentifier and the outer SEQUENCE are re-encoded (their lengths shrink by two bytes, which may also
    shorten a length field); the CertificationRequestInfo and the signature are copied byte for byte. Anything that
    does not have exactly this shape is returned as is, for ``cryptography`` to judge.
    """
    try:
        tag, start, end = _tlv(der, 0)
        if tag != _SEQUENCE or end != len(der):
            return der
        _, _, info_end = _tlv(der, start)
        algorithm_tag, algorithm_start, algorithm_end = _tlv(der, info_end)
        if algorithm_tag != _SEQUENCE:
            return der
        _, _, oid_end = _tlv(der, algorithm_start)
    except ValueError:
        return der
    if der[algorithm_start:oid_end] not in _ECDSA_SIGNATURE_OIDS or der[oid_end:algorithm_end] != _DER_NULL:
        return der
    algorithm = _encode(_SEQUENCE, der[algorithm_start:oid_end])
    return _encode(_SEQUENCE, der[start:info_end] + algorithm + der[algorithm_end:end])


def _tlv(der: bytes, offset: int) -> tuple[int, int, int]:
    """The DER element at ``offset``: (tag, offset of its contents, offset just past it).

    Raises ValueError for truncated input, indefinite lengths and multi-byte tags (none occur in a CSR's frame).
    """
    if offset + 2 > len(der):
        raise ValueError("truncated")
    tag, first = der[offset], der[offset + 1]
    if tag & 0x1F == 0x1F:
        raise ValueError("multi-byte tag")
    if first < 0x80:
        start, length = offset + 2, first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or offset + 2 + count > len(der):
            raise ValueError("unsupported length")
        start, length = offset + 2 + count, int.from_bytes(der[offset + 2 : offset + 2 + count], "big")
    if start + length > len(der):
        raise ValueError("truncated")
    return tag, start, start + length


def _encode(tag: int, contents: bytes) -> bytes:
    """One DER element, its length in the shortest form (DER requires it)."""
    size = len(contents)
    if size < 0x80:
        return bytes([tag, size]) + contents
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + contents
