"""Semver ranges of OS posture checks and Tollgate's rule for reported versions."""

from __future__ import annotations

import pytest
from semver import Version

from controller.check_types.os_versions import reported_version, validate_range, version_matches

# Anchors from the reference unit tests: data "Windows 10.5.19041".
WINDOWS_10_5_19041 = [
    (">=10.5.0 <=10.6.0", True),
    (">=10.5.19041 <=10.6.0", True),
    (">=10.0.0 <=10.5.19041", True),
    (">=10.8.0 <=10.9.0", False),
    (">10.6.0", False),
    (">=10.5.19042", False),
    (">=11.0.0", False),
    (">=1.0.0", True),
]


@pytest.mark.parametrize(("range_text", "expected"), WINDOWS_10_5_19041)
def test_reference_anchors(range_text: str, expected: bool) -> None:
    assert version_matches([range_text], "10.5.19041", None) is expected


@pytest.mark.parametrize("version", ["", "1.2.3", "garbage", "10"])
def test_no_ranges_matches_anything(version: str) -> None:
    assert version_matches([], version, None) is True


@pytest.mark.parametrize(
    ("ranges", "version", "build", "expected"),
    [
        # No patch level: the build is the patch.
        ([">=10.0.19000"], "10.0", "19045", True),
        ([">=10.0.19000"], "10.0", "18363", False),
        ([">=10.0.19000"], "10.0", None, False),
        ([">=10.0.19000"], "10.0", "", False),
        ([">=10.0.19000"], "10.0", "19045.1234", False),
        ([">=10.0.19000"], "10.0", "abc", False),
        (["=10.0.19045"], "10.0", "19045", True),
        # Strict MAJOR.MINOR.PATCH: used as is, build ignored.
        ([">=10.0.19000"], "10.0.100", "19045", False),
        ([">=10.0.19000"], "10.0.19045", None, True),
        # Four-part Windows versions: the third part is the patch.
        ([">=10.0.19000"], "10.0.19045.1234", None, True),
        ([">=10.0.19000"], "10.0.18363.1234", "19045", False),
        (["=10.0.19045"], "10.0.19045.9999", None, True),
        # Anything else is no version, so no match.
        ([">=0.0.0"], "10", "19045", False),
        ([">=0.0.0"], "", None, False),
        ([">=0.0.0"], "10.", None, False),
        ([">=0.0.0"], "10.5.", None, False),
        ([">=0.0.0"], "v10.0.1", None, False),
        ([">=0.0.0"], "1.2.3.4.5", None, False),
        # Any one range is enough.
        ([">=11.0.0", "<10.1.0"], "10.0", "19045", True),
        ([">=11.0.0", ">=12.0.0"], "10.0", "19045", False),
    ],
)
def test_reported_version_rule(ranges: list[str], version: str, build: str | None, expected: bool) -> None:
    assert version_matches(ranges, version, build) is expected


@pytest.mark.parametrize(
    ("version", "build", "expected"),
    [
        ("10.0.19045", "1", Version(10, 0, 19045)),
        ("1.2.3-rc.1+meta", None, Version(1, 2, 3, "rc.1", "meta")),
        ("10.0", "19045", Version(10, 0, 19045)),
        ("10.0.19045.1234", None, Version(10, 0, 19045)),
        ("10.0", None, None),
        ("10", "1", None),
        ("01.2.3", None, None),
    ],
)
def test_reported_version(version: str, build: str | None, expected: Version | None) -> None:
    assert reported_version(version, build) == expected


@pytest.mark.parametrize(
    ("range_text", "version", "expected"),
    [
        # Operators.
        ("<1.2.3", "1.2.2", True),
        ("<1.2.3", "1.2.3", False),
        ("<=1.2.3", "1.2.3", True),
        ("<=1.2.3", "1.2.4", False),
        (">1.2.3", "1.2.3", False),
        (">1.2.3", "1.2.4", True),
        (">=1.2.3", "1.2.3", True),
        (">=1.2.3", "1.2.2", False),
        ("=1.2.3", "1.2.3", True),
        ("==1.2.3", "1.2.3", True),
        ("1.2.3", "1.2.3", True),
        ("1.2.3", "1.2.4", False),
        ("!=1.2.3", "1.2.3", False),
        ("!=1.2.3", "1.2.4", True),
        ("!1.2.3", "1.2.3", False),
        ("!1.2.3", "1.2.4", True),
        # Whitespace after an operator and around comparators.
        (">= 1.2.3", "1.2.3", True),
        ("  >=1.0.0    <2.0.0  ", "1.5.0", True),
        # AND within a group, OR across groups.
        (">=1.0.0 <2.0.0", "2.0.0", False),
        (">=1.0.0 <2.0.0", "1.9.9", True),
        (">=1.0.0 <2.0.0 || >=3.0.0", "2.5.0", False),
        (">=1.0.0 <2.0.0 || >=3.0.0", "3.1.0", True),
        (">=1.0.0 <2.0.0||>=3.0.0", "3.1.0", True),
        ("1.0.0 || 2.0.0 || 3.0.0", "2.0.0", True),
        ("1.0.0 || 2.0.0 || 3.0.0", "2.0.1", False),
        # Wildcards stand for the interval they cover.
        ("1.2.x", "1.2.0", True),
        ("1.2.x", "1.2.99", True),
        ("1.2.x", "1.3.0", False),
        ("1.2.x", "1.1.9", False),
        ("=1.2.x", "1.2.5", True),
        ("1.x", "1.99.99", True),
        ("1.x", "2.0.0", False),
        ("1.x.x", "1.5.0", True),
        ("1.x.x", "2.0.0", False),
        ("1.2.X", "1.2.7", True),
        ("1.2.*", "1.2.7", True),
        (">1.x", "2.0.0", True),
        (">1.x", "1.99.0", False),
        (">1.2.x", "1.3.0", True),
        (">1.2.x", "1.2.9", False),
        (">=1.2.x", "1.2.0", True),
        (">=1.2.x", "1.1.9", False),
        ("<1.2.x", "1.1.9", True),
        ("<1.2.x", "1.2.0", False),
        ("<=1.2.x", "1.2.9", True),
        ("<=1.2.x", "1.3.0", False),
        ("!=1.2.x", "1.2.5", False),
        ("!=1.2.x", "1.1.0", True),
        ("!=1.2.x", "1.3.0", True),
        ("!1.x", "1.5.0", False),
        ("!1.x", "2.0.0", True),
        # Semver precedence: pre-releases sort before the release, build metadata is ignored.
        ("<1.0.0", "1.0.0-rc.1", True),
        (">=1.0.0", "1.0.0-rc.1", False),
        ("=1.0.0", "1.0.0+build.5", True),
        (">=1.0.0-alpha <1.0.0", "1.0.0-beta", True),
        # Numeric, not lexical, comparison.
        (">=10.0.0", "9.99.99", False),
        ("<1.10.0", "1.9.0", True),
    ],
)
def test_range_grammar(range_text: str, version: str, expected: bool) -> None:
    assert version_matches([range_text], version, None) is expected


@pytest.mark.parametrize(
    "range_text",
    [
        ">=1.0.0",
        "1.2.3",
        "1.x",
        "1.x.x",
        "1.2.x",
        "!1.2.3",
        ">= 1.2.3",
        ">=1.0.0 <2.0.0 || 3.x",
        ">=1.0.0-rc.1+b",
    ],
)
def test_valid_ranges(range_text: str) -> None:
    validate_range(range_text)


@pytest.mark.parametrize(
    ("range_text", "reason"),
    [
        ("", "empty version range"),
        ("   ", "empty version range"),
        ("||", "empty alternative around '||' in version range"),
        ("|| 1.0.0", "empty alternative around '||' in version range"),
        ("1.0.0 ||", "empty alternative around '||' in version range"),
        ("1.0.0 || || 2.0.0", "empty alternative around '||' in version range"),
        (">=10.0", "invalid version '10.0': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        ("10", "invalid version '10': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        ("01.2.3", "invalid version '01.2.3': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        ("1.2.3.4", "invalid version '1.2.3.4': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        ("x", "invalid version 'x': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        ("1.x.3", "invalid version '1.x.3': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        ("abc", "invalid version 'abc': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
        (">=", "unexpected '>=' in version range"),
        ("=>1.0.0", "unexpected '=>1.0.0' in version range"),
        ("1.0.0<2.0.0", "unexpected '<2.0.0' in version range"),
        (">=1.0.0|2.0.0", "unexpected '|2.0.0' in version range"),
        ("~1.2.3", "invalid version '~1.2.3': expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"),
    ],
)
def test_invalid_ranges(range_text: str, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_range(range_text)
    assert str(caught.value) == reason


def test_invalid_stored_range_matches_nothing_but_others_still_count() -> None:
    assert version_matches([">=10.0"], "10.0.5", None) is False
    assert version_matches([">=10.0", ">=10.0.0"], "10.0.5", None) is True
