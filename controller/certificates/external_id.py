"""A client certificate's external id, as a CA's ``externalIdClaim`` says where to find it.

``location`` picks candidate values from the certificate (its subject common name, its SAN e-mail addresses or its
SAN URIs); ``matcher`` keeps some of them (``ALL``; ``PREFIX``/``SUFFIX`` keep those with ``matcherCriteria`` at
that end and strip it; ``SCHEME`` keeps the URIs of that scheme, whole); ``parser`` turns each into claims
(``NONE``: the value itself; ``SPLIT``: the value split on ``parserCriteria``); the claims of every candidate are
concatenated and ``index`` picks one. Pure: no storage, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["ExternalIdError", "claim_problem", "external_id"]


class ExternalIdError(ValueError):
    """The claim is configured in a way that cannot work, or the certificate does not carry the id."""


def _candidates(certificate: x509.Certificate, location: str) -> list[str]:
    if location == "COMMON_NAME":
        return [str(a.value) for a in certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    if location == "SAN_EMAIL":
        return list(names.get_values_for_type(x509.RFC822Name))
    if location == "SAN_URI":
        return list(names.get_values_for_type(x509.UniformResourceIdentifier))
    raise ExternalIdError(f"unknown location {location!r}")


def claim_problem(claim: Mapping[str, Any]) -> str | None:
    """Why a claim configuration can never yield an id (None when it can): an unknown location, matcher or parser,
    a matcher or parser without the criteria it needs, or ``SCHEME`` on anything but ``SAN_URI``."""
    location, matcher, parser = claim.get("location"), claim.get("matcher"), claim.get("parser")
    if location not in ("COMMON_NAME", "SAN_URI", "SAN_EMAIL"):
        return f"location must be one of COMMON_NAME, SAN_URI, SAN_EMAIL, not {location!r}"
    if matcher not in ("ALL", "PREFIX", "SUFFIX", "SCHEME"):
        return f"matcher must be one of ALL, PREFIX, SUFFIX, SCHEME, not {matcher!r}"
    if matcher == "SCHEME" and location != "SAN_URI":
        return "scheme matcher can only be used with URI locations"
    if matcher != "ALL" and not claim.get("matcherCriteria"):
        return f"matcher {matcher} needs matcherCriteria"
    if parser not in ("NONE", "SPLIT"):
        return f"parser must be one of NONE, SPLIT, not {parser!r}"
    if parser == "SPLIT" and not claim.get("parserCriteria"):
        return "parser SPLIT needs parserCriteria"
    return None


def _matched(values: list[str], matcher: str, criteria: str) -> list[str]:
    if matcher == "ALL":
        return values
    if matcher == "PREFIX":
        return [v[len(criteria):] for v in values if v.startswith(criteria)]
    if matcher == "SUFFIX":
        return [v[:len(v) - len(criteria)] for v in values if v.endswith(criteria)]
    return [v for v in values if urlsplit(v).scheme == criteria]


def external_id(certificate: x509.Certificate, claim: Mapping[str, Any]) -> str:
    """The external id ``claim`` finds in ``certificate``.

    Raises:
        ExternalIdError: the claim is unusable (:func:`claim_problem`) or yields no claim at ``index``.
    """
    problem = claim_problem(claim)
    if problem is not None:
        raise ExternalIdError(problem)
    values = _matched(_candidates(certificate, str(claim["location"])), str(claim["matcher"]),
                      str(claim.get("matcherCriteria") or ""))
    splitter = str(claim.get("parserCriteria") or "")
    claims = [part for value in values for part in (value.split(splitter) if claim["parser"] == "SPLIT"
                                                     else [value])]
    index = claim.get("index") or 0
    if not 0 <= index < len(claims):
        raise ExternalIdError(f"no claim found at index {index} ({len(claims)} found)")
    return claims[index]
