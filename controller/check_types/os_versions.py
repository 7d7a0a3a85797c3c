"""Semver range statements of OS posture checks, and the reported versions they are matched against.

Range grammar (the blang/semver grammar the reference controller uses, with its wildcard bugs fixed):

* a *range* is one or more *groups* separated by ``||``; it matches when any group matches;
* a *group* is one or more *comparators* separated by whitespace; it matches when every comparator matches;
* a *comparator* is an optional operator (``<``, ``<=``, ``>``, ``>=``, ``=``, ``==``, ``!=``, ``!``; none means
  equal), optional whitespace, then a version: either a strict semver ``MAJOR.MINOR.PATCH[-pre][+build]`` or a
  wildcard ``M.x``, ``M.x.x`` or ``M.m.x`` (``X`` and ``*`` are accepted for ``x``).

A wildcard stands for the half-open interval it covers (``1.2.x`` is ``[1.2.0, 1.3.0)``), so ``1.2.x`` means
``>=1.2.0 <1.3.0``, ``>1.x`` means ``>=2.0.0``, ``<=1.2.x`` means ``<1.3.0`` and ``!=1.2.x`` means "outside the
interval". Comparison is semver 2.0 precedence: pre-releases sort before their release, build metadata is ignored.

Reported versions (what a client's OS posture response carries) follow Tollgate's rule, see
:func:`reported_version`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from semver import Version

__all__ = ["reported_version", "validate_range", "version_matches"]

# Longest operators first so that "<=" is not read as "<" followed by a version starting with "=".
_COMPARATOR = re.compile(r"(?P<op><=|>=|==|!=|<|>|=|!)?\s*(?P<ver>[^\s<>=!|]+)")
# Operators with two spellings are stored as one, so that _Comparator only knows "<", "<=", ">", ">=", "=", "!=".
_OP_SPELLINGS = {"==": "=", "!": "!="}
_NUMBER = r"(?:0|[1-9]\d*)"
_WILDCARD = re.compile(rf"(?P<major>{_NUMBER})\.(?:[xX*](?:\.[xX*])?|(?P<minor>{_NUMBER})\.[xX*])")
_TWO_PART = re.compile(r"(\d+)\.(\d+)")
_FOUR_PART = re.compile(r"(\d+)\.(\d+)\.(\d+)\.(\d+)")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class _Comparator:
    """One comparator against the half-open interval ``[low, high)``; ``high`` is None for an exact version."""

    op: str
    low: Version
    high: Version | None

    def matches(self, version: Version) -> bool:
        low, high = self.low, self.high
        if high is None:
            if self.op == "<":
                return version < low
            if self.op == "<=":
                return version <= low
            if self.op == ">":
                return version > low
            if self.op == ">=":
                return version >= low
            if self.op == "!=":
                return version != low
            return version == low
        inside = low <= version < high
        if self.op == "<":
            return version < low
        if self.op == "<=":
            return version < high
        if self.op == ">":
            return version >= high
        if self.op == ">=":
            return version >= low
        if self.op == "!=":
            return not inside
        return inside


def _parse_term(text: str) -> tuple[Version, Version | None]:
    """The interval a range's version term stands for; raises ValueError with a reason."""
    wildcard = _WILDCARD.fullmatch(text)
    if wildcard is not None:
        major = int(wildcard["major"])
        if wildcard["minor"] is None:
            return Version(major, 0, 0), Version(major + 1, 0, 0)
        minor = int(wildcard["minor"])
        return Version(major, minor, 0), Version(major, minor + 1, 0)
    try:
        return Version.parse(text), None
    except ValueError:
        raise ValueError(
            f"invalid version {text!r}: expected MAJOR.MINOR.PATCH or a wildcard such as 1.x or 1.2.x"
        ) from None


@lru_cache(maxsize=4096)
def _compile(text: str) -> tuple[tuple[_Comparator, ...], ...]:
    """Parse a range into OR-ed groups of AND-ed comparators; raises ValueError with a reason.

    Cached because the same few ranges are evaluated on every posture event; invalid ranges raise and are not
    cached, which is fine since they are rejected when a check is written.
    """
    if not text.strip():
        raise ValueError("empty version range")
    groups: list[tuple[_Comparator, ...]] = []
    for group_text in text.split("||"):
        comparators: list[_Comparator] = []
        pos, end = 0, len(group_text)
        while True:
            while pos < end and group_text[pos].isspace():
                pos += 1
            if pos == end:
                break
            found = _COMPARATOR.match(group_text, pos)
            if found is None:
                raise ValueError(f"unexpected {group_text[pos:]!r} in version range")
            low, high = _parse_term(found["ver"])
            op = found["op"] or "="
            comparators.append(_Comparator(_OP_SPELLINGS.get(op, op), low, high))
            pos = found.end()
            # A comparator must be followed by whitespace or the end: "1.0.0<2.0.0" is one malformed token.
            if pos < end and not group_text[pos].isspace():
                raise ValueError(f"unexpected {group_text[pos:]!r} in version range")
        if not comparators:
            raise ValueError("empty alternative around '||' in version range")
        groups.append(tuple(comparators))
    return tuple(groups)


def validate_range(text: str) -> None:
    """Return if ``text`` is a valid range statement; otherwise raise ValueError whose message is the reason.

    An empty (or all-blank) string, an empty ``||`` alternative, a version that is neither strict semver nor a
    wildcard (``10.0``, ``01.2.3``, ``1.x.3``) and an operator without a version are all invalid.
    """
    _compile(text)


def reported_version(version: str, build: str | None) -> Version | None:
    """The semver a client's reported OS ``version`` (plus ``build``) stands for, or None when it has none.

    Tollgate's rule (the reference controller only accepts the first form):

    * a strict ``MAJOR.MINOR.PATCH[-pre][+build]`` is used as is (``build`` is ignored);
    * ``MAJOR.MINOR`` uses the reported ``build`` as the patch, which must then be all digits
      (``"10.0"`` + ``"19045"`` is ``10.0.19045``); without a usable build there is no version;
    * a four-part Windows version ``MAJOR.MINOR.BUILD.REVISION`` uses its third part as the patch;
    * anything else has no version.
    """
    try:
        return Version.parse(version)
    except ValueError:
        pass
    two = _TWO_PART.fullmatch(version)
    if two is not None:
        if build is None or _DIGITS.fullmatch(build) is None:
            return None
        return Version(int(two[1]), int(two[2]), int(build))
    four = _FOUR_PART.fullmatch(version)
    if four is not None:
        return Version(int(four[1]), int(four[2]), int(four[3]))
    return None


def version_matches(ranges: Sequence[str], version: str, build: str | None) -> bool:
    """Whether a reported OS version satisfies any of ``ranges``.

    An empty ``ranges`` matches anything, even an unparsable or empty version (an OS entry without versions
    accepts every version of that OS). Otherwise the version is interpreted by :func:`reported_version`; no
    version means no match. A range that fails to parse matches nothing rather than raising, because stored
    checks were validated on write and evaluation must not fail on a row written by an older rule.
    """
    if not ranges:
        return True
    parsed = reported_version(version, build)
    if parsed is None:
        return False
    for text in ranges:
        try:
            groups = _compile(text)
        except ValueError:
            continue
        if any(all(c.matches(parsed) for c in group) for group in groups):
            return True
    return False
