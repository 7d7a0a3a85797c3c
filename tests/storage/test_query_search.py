"""``Query.search`` and ``TextColumn``: a top-level ``contains`` conjunct answered by one substring search of a
column, which must find exactly the rows the conjunct's own test passes."""

from __future__ import annotations

from typing import Any

import pytest

from storage.zitiql import TextColumn, TextSearch, compile_filter
from tests.storage.test_query import MATCH_CASES, ROWS, SYMBOLS


@pytest.mark.parametrize(
    ("text", "search"),
    [
        ('name contains "lp"', TextSearch("name", "lp")),
        ('anyOf(roleAttributes) = "x" and name contains "a"', TextSearch("name", "a")),
        ('name contains "a" and (isAdmin or name contains "b") and name contains "c"', TextSearch("name", "a")),
        ('isAdmin and name contains "q\\"t"', TextSearch("name", 'q"t')),
        ('name contains "" sort by name', TextSearch("name", "")),
        # not a top-level conjunct, or not this test: the predicate alone decides
        ('not (name contains "a")', None),
        ('name not contains "a"', None),
        ('name contains "a" or isAdmin', None),
        ('name icontains "a"', None),
        ('tags.owner contains "b"', None),
        ('id = "a"', None),
        ("sort by name", None),
        (None, None),
    ],
)
def test_a_top_level_contains_on_a_stored_string_field_is_a_search(text: str | None,
                                                                    search: TextSearch | None) -> None:
    assert compile_filter(text, SYMBOLS).search == search


def _holding(rows: list[dict[str, Any]], field: str, text: str) -> list[int]:
    """The rows ``field contains text`` passes, tested one by one."""
    return [n for n, row in enumerate(rows) if isinstance(value := row.get(field), str) and text in value]


VALUES: list[Any] = ["abc", None, "xabcx", 7, "", "abc", "cab", "abcabc", "ba", "a", "ca", "b", "", "bcx"]


def test_a_column_finds_exactly_the_rows_holding_every_text() -> None:
    rows = [{"id": str(n), "name": value} for n, value in enumerate(VALUES)]
    column = TextColumn(rows, "name")
    strings = [value for value in VALUES if isinstance(value, str)]
    texts = {value[start:end] for value in strings for start in range(len(value))
             for end in range(start + 1, len(value) + 1)} | {"zz", "abcd", "cab", "bb", "xabcxa"}
    texts -= {text for text in texts if TextColumn.SEPARATOR in text}
    assert len(texts) > 20
    for text in sorted(texts):
        assert column.holding(text) == _holding(rows, "name", text), text
    # Neighbouring rows are not joined: "ba", "a", "ca" in a row hold neither "aa" nor "ac".
    assert column.holding("aa") == column.holding("ac") == []
    assert column.holding("ca") == [6, 7, 10]
    assert column.holding("x") == [2, 13]  # the last row


def test_a_text_a_column_cannot_search_is_left_to_the_row_test() -> None:
    column = TextColumn([{"name": "ab"}, {"name": "b"}], "name")
    assert column.holding("b") == [0, 1]
    assert column.holding("") is None  # every string holds it
    assert column.holding("b\x00b") is None  # the separator: a match could span two rows
    assert column.holding("\x00") is None
    # A value holding the separator: rows could not be told apart by counting separators.
    assert TextColumn([{"name": "a\x00b"}, {"name": "ab"}], "name").holding("ab") is None


def test_an_empty_or_stringless_column_finds_nothing() -> None:
    assert TextColumn([], "name").holding("a") == []
    assert TextColumn([{"name": None}, {"other": "a"}, {"name": ["a"]}], "name").holding("a") == []


def test_every_search_of_the_match_cases_finds_a_superset_of_their_matches() -> None:
    """On the shared rows, the rows a search finds, tested by the predicate, are exactly the matches."""
    searched = 0
    for text, expected in MATCH_CASES:
        query = compile_filter(text, SYMBOLS)
        if query.search is None:
            continue
        positions = TextColumn(ROWS, query.search.field).holding(query.search.text)
        found = ROWS if positions is None else [ROWS[n] for n in positions]
        assert [row["id"] for row in found if query.predicate(row)] == expected, text
        searched += 1
    assert searched >= 2
