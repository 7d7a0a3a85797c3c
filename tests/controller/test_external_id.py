"""External ids from client certificates: every location, matcher and parser, indexes, and unusable claims."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controller.certificates.external_id import ExternalIdError, claim_problem, external_id

COMMON_NAME = "id-alice.smith-corp"
EMAILS = ["alice.smith@corp.example", "bob@corp.example"]
URIS = ["spiffe://corp.example/alice.smith", "https://corp.example/bob"]
_KEY = ec.generate_private_key(ec.SECP256R1())


def certificate(common_name: str | None = COMMON_NAME, sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
               .public_key(_KEY.public_key()).serial_number(1).not_valid_before(start)
               .not_valid_after(start + dt.timedelta(days=1)))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(_KEY, hashes.SHA256())


FULL = certificate(sans=[*(x509.RFC822Name(e) for e in EMAILS), *(x509.UniformResourceIdentifier(u) for u in URIS)])


def claim(location: str, matcher: str, matcher_criteria: str = "", parser: str = "NONE",
          parser_criteria: str | None = "", index: int | None = 0) -> dict[str, Any]:
    return {"location": location, "matcher": matcher, "matcherCriteria": matcher_criteria, "parser": parser,
            "parserCriteria": parser_criteria, "index": index}


# (location, matcher, matcherCriteria) -> the values the matcher keeps from FULL, in order.
MATCHED = {
    ("COMMON_NAME", "ALL", ""): [COMMON_NAME],
    ("COMMON_NAME", "PREFIX", "id-"): ["alice.smith-corp"],
    ("COMMON_NAME", "SUFFIX", "-corp"): ["id-alice.smith"],
    ("SAN_EMAIL", "ALL", ""): EMAILS,
    ("SAN_EMAIL", "PREFIX", "alice."): ["smith@corp.example"],
    ("SAN_EMAIL", "SUFFIX", "@corp.example"): ["alice.smith", "bob"],
    ("SAN_URI", "ALL", ""): URIS,
    ("SAN_URI", "PREFIX", "spiffe://corp.example/"): ["alice.smith"],
    ("SAN_URI", "SUFFIX", "/bob"): ["https://corp.example"],
    ("SAN_URI", "SCHEME", "spiffe"): ["spiffe://corp.example/alice.smith"],
}
# parser -> (parserCriteria, what it makes of one value)
PARSERS: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "NONE": ("", lambda value: [value]), "SPLIT": (".", lambda value: value.split("."))}


@pytest.mark.parametrize("parser", sorted(PARSERS))
@pytest.mark.parametrize(("location", "matcher", "criteria"), sorted(MATCHED))
def test_every_claim_index_and_the_first_out_of_range(location: str, matcher: str, criteria: str,
                                                      parser: str) -> None:
    parser_criteria, parse = PARSERS[parser]
    expected = [part for value in MATCHED[location, matcher, criteria] for part in parse(value)]
    assert expected
    for index, value in enumerate(expected):
        assert external_id(FULL, claim(location, matcher, criteria, parser, parser_criteria, index)) == value
    with pytest.raises(ExternalIdError, match=f"no claim found at index {len(expected)} \\({len(expected)} found\\)"):
        external_id(FULL, claim(location, matcher, criteria, parser, parser_criteria, len(expected)))


def test_split_concatenates_the_claims_of_every_value() -> None:
    found = [external_id(FULL, claim("SAN_EMAIL", "ALL", parser="SPLIT", parser_criteria="@", index=i))
             for i in range(4)]
    assert found == ["alice.smith", "corp.example", "bob", "corp.example"]


@pytest.mark.parametrize("location", ["COMMON_NAME", "SAN_EMAIL"])
@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_scheme_matcher_outside_uris_is_refused(location: str, parser: str) -> None:
    with pytest.raises(ExternalIdError, match=r"^scheme matcher can only be used with URI locations$"):
        external_id(FULL, claim(location, "SCHEME", "spiffe", parser, PARSERS[parser][0]))


def test_a_missing_index_means_the_first() -> None:
    assert external_id(FULL, claim("SAN_URI", "ALL", index=None)) == URIS[0]


def test_matchers_that_keep_nothing_find_no_claim() -> None:
    for location, criteria in (("COMMON_NAME", "nobody"), ("SAN_EMAIL", "nobody"), ("SAN_URI", "nobody")):
        with pytest.raises(ExternalIdError, match=r"no claim found at index 0 \(0 found\)"):
            external_id(FULL, claim(location, "PREFIX", criteria))
    with pytest.raises(ExternalIdError, match="no claim found"):
        external_id(FULL, claim("SAN_URI", "SCHEME", "ldap"))


@pytest.mark.parametrize("location", ["COMMON_NAME", "SAN_EMAIL", "SAN_URI"])
def test_a_certificate_without_the_location_finds_no_claim(location: str) -> None:
    with pytest.raises(ExternalIdError, match="no claim found"):
        external_id(certificate(None), claim(location, "ALL"))


@pytest.mark.parametrize(("given", "problem"), [
    (claim("SUBJECT", "ALL"), "location must be one of COMMON_NAME, SAN_URI, SAN_EMAIL, not 'SUBJECT'"),
    ({**claim("SAN_URI", "ALL"), "location": None},
     "location must be one of COMMON_NAME, SAN_URI, SAN_EMAIL, not None"),
    (claim("SAN_URI", "REGEX", "x"), "matcher must be one of ALL, PREFIX, SUFFIX, SCHEME, not 'REGEX'"),
    ({"location": "SAN_URI"}, "matcher must be one of ALL, PREFIX, SUFFIX, SCHEME, not None"),
    (claim("COMMON_NAME", "SCHEME", "spiffe"), "scheme matcher can only be used with URI locations"),
    (claim("SAN_EMAIL", "SCHEME", ""), "scheme matcher can only be used with URI locations"),
    (claim("SAN_URI", "SCHEME", ""), "matcher SCHEME needs matcherCriteria"),
    (claim("COMMON_NAME", "PREFIX", ""), "matcher PREFIX needs matcherCriteria"),
    ({**claim("SAN_EMAIL", "SUFFIX"), "matcherCriteria": None}, "matcher SUFFIX needs matcherCriteria"),
    (claim("SAN_URI", "ALL", parser="JSON"), "parser must be one of NONE, SPLIT, not 'JSON'"),
    ({"location": "SAN_URI", "matcher": "ALL"}, "parser must be one of NONE, SPLIT, not None"),
    (claim("SAN_URI", "ALL", parser="SPLIT"), "parser SPLIT needs parserCriteria"),
    (claim("SAN_URI", "ALL", parser="SPLIT", parser_criteria=None), "parser SPLIT needs parserCriteria"),
])
def test_unusable_claims_are_named_and_refused(given: dict[str, Any], problem: str) -> None:
    assert claim_problem(given) == problem
    with pytest.raises(ExternalIdError) as raised:
        external_id(FULL, given)
    assert str(raised.value) == problem


@pytest.mark.parametrize("given", [
    claim("COMMON_NAME", "ALL"),
    claim("SAN_URI", "SCHEME", "spiffe"),
    claim("SAN_EMAIL", "SUFFIX", "@x", "SPLIT", "."),
    {"location": "SAN_EMAIL", "matcher": "ALL", "parser": "NONE"},
])
def test_usable_claims_have_no_problem(given: dict[str, Any]) -> None:
    assert claim_problem(given) is None
