"""Subject alternative names of the server certificate (``pki.py``): parsing what was asked for, reading what a
certificate has, and merging the two so that a re-issue never drops a name."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from cryptography import x509

__all__ = ["San", "cert_sans", "merge_sans", "parse_sans"]

San = str | ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_sans(raw: Sequence[str]) -> list[San]:
    """Normalise requested names: IPs to address objects, DNS names lower-cased; duplicates dropped, order kept."""
    out: list[San] = []
    for entry in raw:
        text = entry.strip()
        if not text:
            raise ValueError("empty subject alternative name")
        candidate = text[1:-1] if text.startswith("[") and text.endswith("]") else text
        name: San
        try:
            name = ipaddress.ip_address(candidate)
        except ValueError:
            name = text.lower()
        if name not in out:
            out.append(name)
    return out


def cert_sans(cert: x509.Certificate) -> list[San]:
    """The DNS names (lower-cased) and IP addresses ``cert`` carries."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names: list[San] = [n.lower() for n in ext.get_values_for_type(x509.DNSName)]
    for ip in ext.get_values_for_type(x509.IPAddress):
        if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address):
            names.append(ip)
    return names


def merge_sans(wanted: Sequence[San], previous: Sequence[San]) -> list[San]:
    """Requested names first, then any the old certificate had, so a re-issue never drops a name clients use."""
    merged = list(wanted)
    merged.extend(n for n in previous if n not in merged)
    return merged
