"""``Query.fields`` and ``stored_fields``: which stored fields a filter or sort reads, so that a list can hand the
predicate partial rows (``storage.rows.projection``) without changing a single answer."""

from __future__ import annotations

from typing import Any

import pytest

from storage.rows import decode_row, encode, projection
from storage.zitiql import FieldType, Symbol, compile_filter, order_rows, parse_sort, stored_fields
from tests.storage.test_query import MATCH_CASES, ROWS, SYMBOLS


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        (None, frozenset()),
        ("sort by name limit none", frozenset({"name"})),
        ('name contains "a" and anyOf(roleAttributes) = "x"', frozenset({"name", "roleAttributes"})),
        ('tags.owner = "bob" sort by cost desc', frozenset({"tags", "cost"})),
        ("isAdmin or createdAt > datetime(2024-01-01T00:00:00Z)", frozenset({"isAdmin", "createdAt"})),
        ('id = "a"', frozenset({"id"})),
        # a symbol with its own getter, or related rows: the predicate needs whole rows
        ("nameLength > 3", None),
        ('name = "alpha" and nameLength > 3', None),
        ('anyOf(servicePolicies.name) = "dial"', None),
        ('isEmpty(from servicePolicies where name = "dial")', None),
        ("count(servicePolicies) > 0", None),
    ],
)
def test_query_fields(text: str | None, fields: frozenset[str] | None) -> None:
    assert compile_filter(text, SYMBOLS).fields == fields


def test_stored_fields_follow_the_symbol_lookup() -> None:
    symbols = {**SYMBOLS, "type.name": Symbol(FieldType.STRING, getter=lambda row: row.get("typeName")),
               "type": Symbol(FieldType.STRING)}
    assert stored_fields(["name", "tags.owner.first", "type"], symbols) == {"name", "tags", "type"}
    # A dotted symbol of its own wins over the prefix, as in the compiler; here it has a getter.
    assert stored_fields(["type.name"], symbols) is None
    # `id` is read for the tie-break even where a kind does not declare it.
    assert stored_fields(["id"], {}) == {"id"}
    assert stored_fields(["unknown"], symbols) is None


def _partial(row: dict[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    return projection(fields | {"id"})(encode(row))


# The match cases whose filters read stored fields only (the rest read whole rows, as before).
PARTIAL_CASES = [(text, expected) for text, expected in MATCH_CASES if compile_filter(text, SYMBOLS).fields is not None]


def test_most_match_cases_read_stored_fields_only() -> None:
    assert len(PARTIAL_CASES) > len(MATCH_CASES) * 3 // 4


@pytest.mark.parametrize(("text", "expected"), PARTIAL_CASES)
def test_partial_rows_give_the_same_matches(text: str | None, expected: list[str]) -> None:
    query = compile_filter(text, SYMBOLS)
    assert query.fields is not None
    assert [row["id"] for row in ROWS if query.predicate(_partial(row, query.fields))] == expected


@pytest.mark.parametrize("sort", ["name desc", "cost, createdAt desc", "tags.owner, isAdmin desc", "id desc"])
def test_partial_rows_give_the_same_order(sort: str) -> None:
    keys = parse_sort(sort, SYMBOLS)
    fields = stored_fields((key.field for key in keys), SYMBOLS)
    assert fields is not None
    whole = [row["id"] for row in order_rows(ROWS, keys, SYMBOLS)]
    assert [row["id"] for row in order_rows([_partial(r, fields) for r in ROWS], keys, SYMBOLS)] == whole


def test_a_projection_keeps_only_its_fields_and_fills_missing_ones_with_none() -> None:
    data = encode({"id": "x", "name": "n", "other": {"deep": [1, 2]}, "cost": None})
    assert projection(frozenset({"id", "name", "cost", "absent"}))(data) == {
        "id": "x", "name": "n", "cost": None, "absent": None}
    # A name that cannot be a struct attribute gets the whole row.
    assert projection(frozenset({"id", "not-an-identifier"})) is decode_row
