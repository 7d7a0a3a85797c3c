"""ZitiQL limits: filter text length and nesting depth are refused as QueryError, without deep recursion, never
RecursionError.

A filter can come from any session, so neither the parser, the compiler nor the compiled predicate may recurse as
deep as the text asks.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from storage.zitiql import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_LENGTH,
    FieldType,
    QueryError,
    SortError,
    Symbol,
    compile_filter,
    parse_sort,
)


def _self_related(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [row]


# Short names, so that deep filters fit in the length limit; a kind related to itself, so that subqueries nest.
SYMBOLS: dict[str, Symbol] = {"x": Symbol(FieldType.BOOL), "n": Symbol(FieldType.NUMBER)}
SYMBOLS["me"] = Symbol(FieldType.SUBQUERY, related=_self_related, related_symbols=SYMBOLS)
ROWS = [{"x": True, "n": 1}, {"x": False, "n": 1}, {"x": False, "n": 0}]

TOO_DEEP = f"filter is nested deeper than {MAX_FILTER_DEPTH} levels"


def error_of(text: str) -> str:
    with pytest.raises(QueryError) as info:
        compile_filter(text, SYMBOLS)
    return info.value.message


def matches(text: str) -> list[bool]:
    predicate = compile_filter(text, SYMBOLS).predicate
    return [predicate(row) for row in ROWS]


# Nested k times: the filter text and what it matches in ROWS.
SHAPES: dict[str, tuple[Callable[[int], str], Callable[[int], list[bool]]]] = {
    "not": (lambda k: "not " * k + "x", lambda k: [k % 2 == 0, k % 2 == 1, k % 2 == 1]),
    "or": (lambda k: "(x or " * k + "x" + ")" * k, lambda k: [True, False, False]),
    "and": (lambda k: "(n = 1 and " * k + "x" + ")" * k, lambda k: [True, False, False]),
    "or/and": (lambda k: "(x or (n = 1 and " * k + "x" + "))" * k, lambda k: [True, False, False]),
    "not/or": (lambda k: "not (x or " * k + "x" + ")" * k, lambda k: [False, k % 2 == 1, k % 2 == 1]),
    "subquery": (lambda k: "count(from me where " * k + "x" + ") = 1" * k, lambda k: [True, False, False]),
}


@pytest.mark.parametrize("text", [
    "not " * 3000 + "x",
    "(x or " * 1500 + "x" + ")" * 1500,
    "(x and " * 1500 + "x" + ")" * 1500,
    "(not (x or " * 1000 + "x" + "))" * 1000,
    "n = 1 and (" * 1000 + "x" + ")" * 1000,
    "count(from me where " * 500 + "x" + ") = 1" * 500,
])
def test_deep_nesting_is_refused_without_deep_recursion(text: str) -> None:
    """Refused with the same few frames a shallow filter needs: with the recursion limit just above the caller's
    depth, a parser or compiler that followed the nesting would fail with RecursionError instead."""
    assert len(text) <= MAX_FILTER_LENGTH
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 150)
    try:
        assert error_of(text) == TOO_DEEP
    finally:
        sys.setrecursionlimit(limit)


def _deepest(make: Callable[[int], str]) -> int:
    for k in range(MAX_FILTER_DEPTH, 0, -1):
        try:
            compile_filter(make(k), SYMBOLS)
        except QueryError as exc:
            assert exc.message == TOO_DEEP
        else:
            return k
    raise AssertionError("no nesting fits")


@pytest.mark.parametrize("shape", SHAPES)
def test_nesting_up_to_the_limit_compiles_and_evaluates(shape: str) -> None:
    make, expected = SHAPES[shape]
    deepest = _deepest(make)
    assert deepest >= MAX_FILTER_DEPTH // 5  # a subquery level is four levels of the tree
    assert matches(make(deepest)) == expected(deepest)
    assert error_of(make(deepest + 1)) == TOO_DEEP


def test_long_chains_are_not_nesting() -> None:
    # `a or b or c ...` is one condition of many operands however long it is, as is a chain of `and`s.
    ors = " or ".join(["n = 5"] * 1500 + ["x"])
    assert len(ors) <= MAX_FILTER_LENGTH
    assert matches(ors) == [True, False, False]
    assert matches(" and ".join(["n > -1"] * 1400 + ["n = 1"])) == [True, True, False]
    assert matches("x and n = 1 or not x and n = 0 or n = 7") == [True, False, True]
    assert matches("(x or n = 0) or (n = 7 or n = 8)") == [True, False, True]


def test_text_length_is_bounded() -> None:
    longest = "n = 1" + " " * (MAX_FILTER_LENGTH - 5)
    assert matches(longest) == [True, True, False]
    assert error_of(longest + " ") == f"filter is longer than {MAX_FILTER_LENGTH} characters"
    with pytest.raises(SortError) as info:
        parse_sort("n," * MAX_FILTER_LENGTH, SYMBOLS)
    assert info.value.message == f"sort is longer than {MAX_FILTER_LENGTH} characters"
