"""ZitiQL errors: type and syntax errors with their messages and positions."""

from __future__ import annotations

import pytest

from storage.zitiql import (
    FieldType,
    QueryError,
    Symbol,
    compile_filter,
)
from tests.storage.test_query import error_of


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo = 1", "unknown symbol 'foo'"),
        ("foo", "unknown symbol 'foo'"),
        ('name.first = "x"', "unknown symbol 'name.first'"),
        ('anyOf(servicePolicies.nope) = "x"', "unknown symbol 'servicePolicies.nope'"),
        ("isEmpty(from servicePolicies where foo = 1)", "unknown symbol 'foo'"),
        ('name = "x" sort by foo', "unknown symbol 'foo'"),
        (
            "roleAttributes",
            "'roleAttributes' is a set field and must be used with anyOf(), allOf(), count() or isEmpty()",
        ),
        (
            'roleAttributes = "x"',
            "'roleAttributes' is a set field and must be used with anyOf(), allOf(), count() or isEmpty()",
        ),
        (
            'servicePolicies = "p1"',
            "'servicePolicies' is a set field and must be used with anyOf(), allOf(), count() or isEmpty()",
        ),
        ("sort by roleAttributes", "cannot sort by set field 'roleAttributes'"),
        ("sort by tags", "cannot sort by map field 'tags'"),
        ("tags", "'tags' is a map field; compare one of its keys, e.g. tags.<key>"),
        ("name", "'name' is a string field and cannot be used as a condition"),
        ("cost", "'cost' is a number field and cannot be used as a condition"),
        ('anyOf(name) = "x"', "anyOf() needs a set field, but 'name' is not a set"),
        ("count(tags) > 1", "count() needs a set field, but 'tags' is not a set"),
        ("isEmpty(cost)", "isEmpty() needs a set field, but 'cost' is not a set"),
        (
            'isEmpty(from roleAttributes where id = "x")',
            "'roleAttributes' is not a related entity type and cannot be used with 'from'",
        ),
        # type mismatches
        ("name = 1", "type mismatch: 'name' is a string field but 1 is a number"),
        ('cost = "3"', "type mismatch: 'cost' is a number field but \"3\" is a string"),
        ("isAdmin = 1", "type mismatch: 'isAdmin' is a boolean field but 1 is a number"),
        ('name in ["a", "b"] and cost in ["1"]', "type mismatch: 'cost' is a number field but \"1\" is a string"),
        (
            'createdAt > "2020-01-01T00:00:00Z"',
            "type mismatch: 'createdAt' is a datetime field but \"2020-01-01T00:00:00Z\" is a string; "
            "write datetime(...) for datetime values",
        ),
        (
            "cost between 1 and datetime(2020-01-01T00:00:00Z)",
            "type mismatch: 'cost' is a number field but datetime(2020-01-01T00:00:00Z) is a datetime",
        ),
        ("name contains 3", "type mismatch: 'name' is a string field but 3 is a number"),
        ("cost contains 3", "'contains' needs a string, got 3"),
        ("tags.n icontains 3", "'icontains' needs a string, got 3"),
        ("isAdmin < true", "operator '<' cannot be used with booleans"),
        ('name between "a" and "b"', "'between' needs numbers or datetimes, got \"a\""),
        ('tags.n between 1 and "2"', "'between' needs values of one type, got 1 and \"2\""),
        ("cost > null", "null can only be compared with = or !=, not '>'"),
        ("name contains null", "null can only be compared with = or !=, not 'contains'"),
        ("anyOf(roleAttributes) = null", "anyOf(roleAttributes) cannot be compared with null"),
        ("count(roleAttributes) = null", "count() cannot be compared with null"),
        ('name in ["a", 1]', 'array values must all have the same type: ["a", 1]'),
        ("name in [null]", "arrays may only hold strings, numbers or datetimes"),
        ("isAdmin in [true]", "arrays may only hold strings, numbers or datetimes"),
        (
            "createdAt = datetime(2021-13-01T00:00:00Z)",
            "invalid datetime '2021-13-01T00:00:00Z': expected RFC3339, e.g. datetime(2021-01-01T00:00:00Z)",
        ),
        (
            "createdAt = datetime(yesterday)",
            "invalid datetime 'yesterday': expected RFC3339, e.g. datetime(2021-01-01T00:00:00Z)",
        ),
        ("skip 1.5", "skip needs a whole number, got '1.5'"),
        ("limit 1e3", "limit needs a whole number, got '1e3'"),
        # syntax errors say where: line (1-based) and column (0-based)
        ('name = "abc', "line 1:7 unterminated string '\"abc'"),
        ('name = "x" and\n  cost = "abc', "line 2:9 unterminated string '\"abc'"),
        ('name = "a\\qb"', "line 1:7 invalid string '\"a\\\\qb\"': control character or unknown escape"),
        (
            'name = "x" xx',
            "line 1:11 unexpected input 'xx', expecting one of: and, end of input, limit, or, skip, sort",
        ),
        ('(name = "x"', "line 1:11 unexpected end of input, expecting one of: ')', or"),
        (
            "name = ",
            "line 1:7 unexpected end of input, expecting one of: datetime(...), false, null, number, string, true",
        ),
        ("name = 'x'", "line 1:7 unexpected input \"'x'\""),
        ('name = "x")', "line 1:10 unexpected input ')'"),
        (
            "name in []",
            "line 1:9 unexpected input ']', expecting one of: datetime(...), false, null, number, string, true",
        ),
        ("sort by name limit 5 skip 1", "line 1:21 unexpected input 'skip', expecting one of: end of input"),
        ("sort by", "line 1:7 unexpected end of input, expecting one of: identifier"),
    ],
)
def test_filter_errors(text: str, message: str) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize(
    ("text", "prefix"),
    [
        # digits are not allowed in identifiers
        ('name2 = "x"', "line 1:4 unexpected input '2'"),
        # numbers have no leading zeros: `0` is a number, the next `0` is unexpected
        ("cost = 007", "line 1:8 unexpected input '0'"),
        # a datetime literal is never a left-hand side
        ("datetime(2020-01-01T00:00:00Z) < createdAt", "line 1:8 unexpected input '('"),
        ('name == "x"', "line 1:6 unexpected input '='"),
        ("cost between 1 or 2", "line 1:15 unexpected input 'or'"),
        ("isAdmin and", "line 1:11 unexpected end of input"),
    ],
)
def test_syntax_error_positions(text: str, prefix: str) -> None:
    assert error_of(text).startswith(prefix)


def test_subquery_symbol_without_related_rows_is_an_error() -> None:
    symbols = {"broken": Symbol(FieldType.SUBQUERY)}
    with pytest.raises(QueryError, match="symbol 'broken' has no related rows"):
        compile_filter("isEmpty(broken)", symbols)
