"""ZitiQL: parsing, type checking, evaluation, sorting and index hints of ``storage.zitiql``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from storage.zitiql import (
    FieldType,
    QueryError,
    SortKey,
    Symbol,
    compile_filter,
)

POLICIES: dict[str, dict[str, Any]] = {
    "p1": {"id": "p1", "name": "dial", "type": 1},
    "p2": {"id": "p2", "name": "bind", "type": 2},
}
POLICY_SYMBOLS = {
    "id": Symbol(FieldType.STRING),
    "name": Symbol(FieldType.STRING),
    "type": Symbol(FieldType.NUMBER),
}


def _policies(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [POLICIES[pid] for pid in row.get("policyIds", [])]


SYMBOLS: dict[str, Symbol] = {
    "id": Symbol(FieldType.STRING),
    "name": Symbol(FieldType.STRING),
    "createdAt": Symbol(FieldType.DATETIME),
    "roleAttributes": Symbol(FieldType.SET),
    "tags": Symbol(FieldType.MAP),
    "isAdmin": Symbol(FieldType.BOOL),
    "cost": Symbol(FieldType.NUMBER),
    "nameLength": Symbol(FieldType.NUMBER, getter=lambda row: len(row.get("name") or "")),
    "servicePolicies": Symbol(FieldType.SUBQUERY, related=_policies, related_symbols=POLICY_SYMBOLS),
}

ROWS: list[dict[str, Any]] = [
    {
        "id": "a",
        "name": "alpha",
        "createdAt": "2024-01-02T03:04:05.678Z",
        "roleAttributes": ["x", "y"],
        "tags": {"owner": "bob", "n": 3, "flag": True},
        "isAdmin": False,
        "cost": 3,
        "policyIds": ["p1"],
    },
    {
        "id": "b",
        "name": "Beta",
        "createdAt": "2023-01-02T03:04:05.678Z",
        "roleAttributes": [],
        "tags": {},
        "isAdmin": True,
        "cost": 1.5,
        "policyIds": [],
    },
    # No name, no createdAt: comparisons other than `= null` must not match it.
    {
        "id": "c",
        "roleAttributes": ["y"],
        "tags": {"owner": "Alice"},
        "isAdmin": None,
        "cost": None,
        "policyIds": ["p1", "p2"],
    },
    {
        "id": "d",
        "name": 'gamma "quoted"',
        "createdAt": "2024-01-02T03:04:05.679Z",
        "roleAttributes": ["z"],
        "tags": {"n": "3"},
        "isAdmin": False,
        "cost": 0,
        "policyIds": ["p2"],
    },
]


def matching(text: str | None, rows: list[dict[str, Any]] = ROWS) -> list[str]:
    predicate = compile_filter(text, SYMBOLS).predicate
    return [row["id"] for row in rows if predicate(row)]


def error_of(text: str) -> str:
    with pytest.raises(QueryError) as info:
        compile_filter(text, SYMBOLS)
    assert str(info.value) == info.value.message
    return info.value.message


# (filter, ids of ROWS it matches); tests/storage/test_query_fields.py evaluates them on partial rows too.
MATCH_CASES: list[tuple[str | None, list[str]]] = [
    # strings: case-sensitive, byte-wise ordering, substring tests
    ('name = "alpha"', ["a"]),
    ('name = "ALPHA"', []),
    ('name != "alpha"', ["b", "d"]),
    ('name < "alpha"', ["b"]),
    ('name <= "alpha"', ["a", "b"]),
    ('name > "alpha"', ["d"]),
    ('name >= "alpha"', ["a", "d"]),
    ('name in ["alpha", "Beta", "zzz"]', ["a", "b"]),
    ('name not in ["alpha"]', ["b", "d"]),
    ('name contains "et"', ["b"]),
    ('name contains "ET"', []),
    ('name not contains "ph"', ["b", "d"]),
    ('name icontains "ET"', ["b"]),
    ('name not icontains "AL"', ["b", "d"]),
    ('name = "gamma \\"quoted\\""', ["d"]),
    ("name = null", ["c"]),
    ("name != null", ["a", "b", "d"]),
    # numbers: int/float mix, exponents, negatives, half-open between
    ("cost = 3", ["a"]),
    ("cost = 3.0", ["a"]),
    ("cost = 1.5e0", ["b"]),
    ("cost != 3", ["b", "d"]),
    ("cost < 2", ["b", "d"]),
    ("cost <= 1.5", ["b", "d"]),
    ("cost > 1.5", ["a"]),
    ("cost >= 1.5", ["a", "b"]),
    ("cost > -1e1", ["a", "b", "d"]),
    ("cost = -1", []),
    ("cost in [0, 3]", ["a", "d"]),
    ("cost not in [0]", ["a", "b"]),
    ("cost between 0 and 3", ["b", "d"]),
    ("cost not between 1 and 3", ["a", "d"]),
    ("cost = null", ["c"]),
    # computed symbol
    ("nameLength = 5", ["a"]),
    ("nameLength = 0", ["c"]),
    # booleans
    ("isAdmin", ["b"]),
    ("isAdmin = true", ["b"]),
    ("isAdmin = false", ["a", "d"]),
    ("isAdmin != true", ["a", "d"]),
    ("not isAdmin", ["a", "c", "d"]),
    ("isAdmin = null", ["c"]),
    ("true", ["a", "b", "c", "d"]),
    ("false", []),
    # datetimes: instants are compared, whatever the offset or precision
    ("createdAt > datetime(2023-06-01T00:00:00Z)", ["a", "d"]),
    ("createdAt = datetime(2024-01-02T03:04:05.678Z)", ["a"]),
    ("createdAt = datetime(2024-01-02T04:04:05.678+01:00)", ["a"]),
    ("createdAt != datetime(2024-01-02T03:04:05.678Z)", ["b", "d"]),
    ("createdAt < datetime(2024-01-02T03:04:05.679Z)", ["a", "b"]),
    ("createdAt <= datetime(2024-01-02T03:04:05.679Z)", ["a", "b", "d"]),
    ("createdAt >= datetime( 2024-01-02T03:04:05.6789Z )", ["d"]),
    ("createdAt between datetime(2024-01-01T00:00:00Z) and datetime(2024-01-02T03:04:05.679Z)", ["a"]),
    ("createdAt in [datetime(2023-01-02T03:04:05.678Z), datetime(2024-01-02T03:04:05.679Z)]", ["b", "d"]),
    ("createdAt = null", ["c"]),
    # set functions
    ('anyOf(roleAttributes) = "y"', ["a", "c"]),
    ('anyOf(roleAttributes) in ["x", "z"]', ["a", "d"]),
    ('anyOf(roleAttributes) != "y"', ["a", "d"]),
    ('anyOf(roleAttributes) contains "z"', ["d"]),
    ('allOf(roleAttributes) = "y"', ["c"]),
    ('allOf(roleAttributes) in ["x", "y"]', ["a", "c"]),
    ('allOf(roleAttributes) != "x"', ["c", "d"]),
    ("count(roleAttributes) = 0", ["b"]),
    ("count(roleAttributes) > 1", ["a"]),
    ("count(roleAttributes) between 1 and 2", ["c", "d"]),
    ("isEmpty(roleAttributes)", ["b"]),
    ("not isEmpty(roleAttributes)", ["a", "c", "d"]),
    # map keys: typed at run time, a value of another type does not match
    ('tags.owner = "bob"', ["a"]),
    ('tags.owner icontains "ALI"', ["c"]),
    ("tags.owner = null", ["b", "d"]),
    ("tags.n = 3", ["a"]),
    ('tags.n = "3"', ["d"]),
    ("tags.n > 2", ["a"]),
    ("tags.flag", ["a"]),
    ("tags.flag = true", ["a"]),
    ("tags.missing.deep = null", ["a", "b", "c", "d"]),
    # sub-queries and related kinds
    ("isEmpty(from servicePolicies where type = 2)", ["a", "b"]),
    ('not isEmpty(from servicePolicies where name = "dial")', ["a", "c"]),
    ("count(from servicePolicies where type >= 1) = 2", ["c"]),
    ("count(from servicePolicies where type > 0 limit 1) = 1", ["a", "c", "d"]),
    ("count(from servicePolicies where type > 0 skip 1) = 1", ["c"]),
    ("count(servicePolicies) = 1", ["a", "d"]),
    ("isEmpty(servicePolicies)", ["b"]),
    ('anyOf(servicePolicies) = "p2"', ["c", "d"]),
    ('anyOf(servicePolicies.name) = "dial"', ["a", "c"]),
    ("allOf(servicePolicies.type) = 2", ["d"]),
    # precedence: not > and > or; parentheses
    ('name = "alpha" or name = "Beta" and cost < 2', ["a", "b"]),
    ('name = "Beta" and cost < 2 or name = "alpha"', ["a", "b"]),
    ('(name = "alpha" or name = "Beta") and cost < 2', ["b"]),
    ("not isAdmin and cost = 3", ["a"]),
    ("not (isAdmin or cost = 3)", ["c", "d"]),
    ("not not isAdmin", ["b"]),
    ("cost between 0 and 3 and isAdmin", ["b"]),
    ('name = "alpha" and cost = 3 and isAdmin = false and anyOf(roleAttributes) = "x"', ["a"]),
    ('name = "x" or name = "alpha" or name = "Beta"', ["a", "b"]),
    ('((name = "alpha"))', ["a"]),
    # keywords are case-insensitive; whitespace is space, tab, CR, LF
    ('name = "alpha" OR isAdmin', ["a", "b"]),
    ("NOT isAdmin AnD cost = 3", ["a"]),
    ('ANYOF(roleAttributes) = "y"', ["a", "c"]),
    ('AllOf(roleAttributes) = "y"', ["c"]),
    ("COUNT(roleAttributes) = 0", ["b"]),
    ("ISEMPTY(roleAttributes)", ["b"]),
    ("isAdmin = TRUE", ["b"]),
    ("name = NULL", ["c"]),
    ('name NOT IN ["alpha"]', ["b", "d"]),
    ("cost BETWEEN 0 AND 3", ["b", "d"]),
    ('name ICONTAINS "et"', ["b"]),
    ('name Not Contains "ph"', ["b", "d"]),
    ("isEmpty(FROM servicePolicies WHERE type = 2)", ["a", "b"]),
    ('name = "alpha"\n\tor\r\nisAdmin', ["a", "b"]),
    ('name="alpha"', ["a"]),
    # empty filters and filters without a boolean expression match everything
    (None, ["a", "b", "c", "d"]),
    ("", ["a", "b", "c", "d"]),
    (" \t\n", ["a", "b", "c", "d"]),
    ("sort by name", ["a", "b", "c", "d"]),
    ("limit none", ["a", "b", "c", "d"]),
]


@pytest.mark.parametrize(("text", "expected"), MATCH_CASES)
def test_filter_matches(text: str | None, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ('"a\\tb"', "a\tb"),
        ('"a\\nb"', "a\nb"),
        ('"a\\rb"', "a\rb"),
        ('"a\\fb"', "a\fb"),
        ('"a\\\\b"', "a\\b"),
        ('"a\\"b"', 'a"b'),
        ('"üñí"', "üñí"),
        ('""', ""),
    ],
)
def test_string_escapes(literal: str, value: str) -> None:
    rows = [{"id": "hit", "name": value}, {"id": "miss", "name": value + "!"}]
    assert matching(f"name = {literal}", rows) == ["hit"]


@pytest.mark.parametrize(
    ("text", "sort", "skip", "limit"),
    [
        ("name != null sort by name desc, cost skip 2 limit 10", (("name", True), ("cost", False)), 2, 10),
        ("sort by name", (("name", False),), None, None),
        ("sort by name ASC, id DESC", (("name", False), ("id", True)), None, None),
        ("sort by tags.owner", (("tags.owner", False),), None, None),
        ("skip 5", (), 5, None),
        ("limit none", (), None, -1),
        ("limit 0", (), None, 0),
        ("skip 3 limit 7", (), 3, 7),
        ("isAdmin limit 1", (), None, 1),
        ("SORT BY name SKIP 1 LIMIT NONE", (("name", False),), 1, -1),
        # more than five sort fields: the rest are ignored
        (
            "sort by name, cost, createdAt, isAdmin, tags.owner, id",
            (("name", False), ("cost", False), ("createdAt", False), ("isAdmin", False), ("tags.owner", False)),
            None,
            None,
        ),
        ("", (), None, None),
    ],
)
def test_sort_skip_limit_in_filter(
    text: str, sort: tuple[tuple[str, bool], ...], skip: int | None, limit: int | None
) -> None:
    query = compile_filter(text, SYMBOLS)
    assert query.sort == tuple(SortKey(field, desc) for field, desc in sort)
    assert (query.skip, query.limit) == (skip, limit)


def test_filter_clauses_do_not_change_the_predicate() -> None:
    query = compile_filter('name != "alpha" sort by name desc skip 1 limit 1', SYMBOLS)
    assert [row["id"] for row in ROWS if query.predicate(row)] == ["b", "d"]
