"""ZitiQL index hints, sort parsing and row ordering, and the predicate's speed on a large list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import storage.zitiql.parser
from storage.zitiql import (
    FieldType,
    IndexHint,
    SortError,
    SortKey,
    Symbol,
    compile_filter,
    order_rows,
    parse_sort,
)
from tests.storage.test_query import ROWS, SYMBOLS


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ('id = "x"', IndexHint("id", frozenset({"x"}), exact=True)),
        ('id in ["x", "y"]', IndexHint("id", frozenset({"x", "y"}), exact=True)),
        ('name = "x"', IndexHint("name", frozenset({"x"}), exact=True)),
        ('name in ["x"]', IndexHint("name", frozenset({"x"}), exact=True)),
        ('anyOf(roleAttributes) = "x"', IndexHint("roleAttributes", frozenset({"x"}), exact=True)),
        ('anyOf(roleAttributes) in ["x", "y"]', IndexHint("roleAttributes", frozenset({"x", "y"}), exact=True)),
        ('allOf(roleAttributes) = "x"', IndexHint("roleAttributes", frozenset({"x"}))),
        # the first hint-giving top-level conjunct wins, whatever the nesting of `and` and parentheses
        ('isAdmin and name = "x"', IndexHint("name", frozenset({"x"}), exact=True)),
        ('name = "x" and id = "y"', IndexHint("name", frozenset({"x"}), exact=True)),
        ('(id = "y" and isAdmin) and name = "x"', IndexHint("id", frozenset({"y"}), exact=True)),
        ('(id = "x" or isAdmin) and name = "y"', IndexHint("name", frozenset({"y"}), exact=True)),
        ('name = "x" sort by name limit 1', IndexHint("name", frozenset({"x"}), exact=True)),
        # no hint
        ('id = "x" or name = "y"', None),
        ('not id = "x"', None),
        ('id != "x"', None),
        ('id not in ["x"]', None),
        ('name contains "x"', None),
        ('name > "x"', None),
        ("name = null", None),
        ('allOf(roleAttributes) in ["x"]', None),
        ('anyOf(roleAttributes) != "x"', None),
        ('tags.owner = "x"', None),
        ('nameLength = 3 and anyOf(servicePolicies) = "p1"', None),
        ('isEmpty(from servicePolicies where id = "p1")', None),
        ("sort by name", None),
        ("", None),
    ],
)
def test_index_hint(text: str, hint: IndexHint | None) -> None:
    query = compile_filter(text, SYMBOLS)
    assert query.index_hint == hint
    if hint is not None:
        # The hint must select a superset of the matches.
        for row in [*ROWS, {"id": "x", "name": "x", "roleAttributes": ["x"]}]:
            if query.predicate(row):
                value = row.get(hint.field)
                values = value if isinstance(value, list) else [value]
                assert any(v in hint.values for v in values)


def test_computed_symbols_give_no_index_hint() -> None:
    symbols = {"name": Symbol(FieldType.STRING, getter=lambda row: row.get("displayName"))}
    query = compile_filter('name = "x"', symbols)
    assert query.index_hint is None
    assert query.predicate({"displayName": "x"}) is True
    assert query.predicate({"name": "x"}) is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name desc,id", (SortKey("name", True), SortKey("id", False))),
        ("name asc, createdAt", (SortKey("name", False), SortKey("createdAt", False))),
        ("name DESC", (SortKey("name", True),)),
        ("  cost  ", (SortKey("cost", False),)),
        ("tags.owner desc", (SortKey("tags.owner", True),)),
        (
            "name, cost, createdAt, isAdmin, id, tags.owner",
            tuple(SortKey(field, False) for field in ("name", "cost", "createdAt", "isAdmin", "id")),
        ),
        ("", ()),
        ("  ", ()),
    ],
)
def test_parse_sort(text: str, expected: tuple[SortKey, ...]) -> None:
    assert parse_sort(text, SYMBOLS) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo", "unknown symbol 'foo'"),
        ("NAME", "unknown symbol 'NAME'"),
        ("roleAttributes desc", "cannot sort by set field 'roleAttributes'"),
        ("servicePolicies", "cannot sort by set field 'servicePolicies'"),
        ("tags", "cannot sort by map field 'tags'"),
        ("name desc desc", "line 1:10 unexpected input 'desc', expecting one of: ',', end of input"),
        ("name,", "line 1:5 unexpected end of input, expecting one of: identifier"),
        ("name up", "line 1:5 unexpected input 'up', expecting one of: ',', asc, desc, end of input"),
        ("name;id", "line 1:4 unexpected input ';id'"),
    ],
)
def test_parse_sort_errors(text: str, message: str) -> None:
    with pytest.raises(SortError) as info:
        parse_sort(text, SYMBOLS)
    assert info.value.message == message


def ids(rows: list[Mapping[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ((), ["a", "b", "c", "d"]),
        # strings: byte order (upper case first), null first ascending and last descending
        ((SortKey("name", False),), ["c", "b", "a", "d"]),
        ((SortKey("name", True),), ["d", "a", "b", "c"]),
        ((SortKey("cost", False),), ["c", "d", "b", "a"]),
        ((SortKey("cost", True),), ["a", "b", "d", "c"]),
        ((SortKey("createdAt", False),), ["c", "b", "a", "d"]),
        ((SortKey("isAdmin", False),), ["c", "a", "d", "b"]),
        ((SortKey("id", True),), ["d", "c", "b", "a"]),
        # mixed value types under a map key: null < number < string
        ((SortKey("tags.n", False),), ["b", "c", "a", "d"]),
        ((SortKey("nameLength", True),), ["d", "a", "b", "c"]),
    ],
)
def test_order_rows(sort: tuple[SortKey, ...], expected: list[str]) -> None:
    rows = list(reversed(ROWS))
    assert ids(order_rows(rows, sort, SYMBOLS)) == expected
    assert ids(rows) == ["d", "c", "b", "a"]  # the input is left alone


def test_order_rows_breaks_ties_by_id_in_every_direction() -> None:
    rows = [
        {"id": "3", "name": "x", "cost": 1},
        {"id": "1", "name": "x", "cost": 2},
        {"id": "2", "name": "y", "cost": 1},
        {"id": "0", "name": "x", "cost": 1},
    ]
    assert ids(order_rows(rows, [SortKey("name", True)], SYMBOLS)) == ["2", "0", "1", "3"]
    assert ids(order_rows(rows, [SortKey("name", False), SortKey("cost", True)], SYMBOLS)) == ["1", "0", "3", "2"]
    assert ids(order_rows(rows, [SortKey("cost", False), SortKey("id", True)], SYMBOLS)) == ["3", "2", "0", "1"]


def test_order_rows_compares_datetime_instants() -> None:
    rows = [
        {"id": "a", "createdAt": "2024-01-01T10:00:00.000+02:00"},  # 08:00Z
        {"id": "b", "createdAt": "2024-01-01T09:00:00.000Z"},
        {"id": "c", "createdAt": "2024-01-01T08:30:00.000Z"},
    ]
    assert ids(order_rows(rows, [SortKey("createdAt", False)], SYMBOLS)) == ["a", "c", "b"]


def test_order_rows_without_id_symbol_and_with_unknown_field() -> None:
    symbols = {"name": Symbol(FieldType.STRING)}
    rows = [{"id": "b", "name": "n"}, {"id": "a", "name": "n"}]
    assert ids(order_rows(rows, [SortKey("name", False)], symbols)) == ["a", "b"]
    with pytest.raises(SortError, match="unknown symbol 'nope'"):
        order_rows(rows, [SortKey("nope", False)], symbols)
    with pytest.raises(SortError, match="cannot sort by set field 'roleAttributes'"):
        order_rows(rows, [SortKey("roleAttributes", False)], SYMBOLS)


def test_filter_sort_feeds_order_rows() -> None:
    query = compile_filter("cost != null sort by cost desc", SYMBOLS)
    assert ids(order_rows([row for row in ROWS if query.predicate(row)], query.sort, SYMBOLS)) == ["a", "b", "d"]


def test_a_compiled_predicate_never_parses_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter is parsed once, when compiled; evaluating 10k rows only calls the compiled closures. (How fast
    that is belongs to the benchmarks: ``bench/`` measures the filtered list over 10k identities.)"""
    rows = [
        {"id": f"{i:06d}", "name": f"n{i % 100}", "cost": i, "roleAttributes": [f"r{i % 10}"]} for i in range(10_000)
    ]
    predicate = compile_filter('name = "n5" and cost >= 0', SYMBOLS).predicate

    def no_parsing(*_: object, **__: object) -> None:
        raise AssertionError("the filter was parsed while rows were evaluated")

    monkeypatch.setattr(storage.zitiql.parser, "_parse", no_parsing)
    monkeypatch.setattr(storage.zitiql.parser, "_parser", no_parsing)
    hits = [row["id"] for row in rows if predicate(row)]
    assert hits == [f"{i:06d}" for i in range(5, 10_000, 100)]
