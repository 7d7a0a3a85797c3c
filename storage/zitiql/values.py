"""Literals, run-time value conversions and single-value tests for the ZitiQL compiler.

A test is built once per comparison (``name < "x"``) after the literal has been checked against the field's type;
at run time it only checks that the row value has the literal's type (datetimes: parses it), so that a value of
another type or a missing one never matches, and compares.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lark import Token, Tree

from storage.zitiql.model import FieldType, QueryError

__all__ = [
    "TYPE_NAMES",
    "Getter",
    "Lit",
    "Pred",
    "Row",
    "Test",
    "array_literal",
    "as_sequence",
    "literal",
    "map_getter",
    "sort_value",
    "to_datetime",
    "value_test",
]

Row = Mapping[str, Any]
Pred = Callable[[Row], bool]
Getter = Callable[[Row], Any]
Test = Callable[[Any], bool]

#: How a value type is named in error messages; ``None`` is the type of the ``null`` literal.
TYPE_NAMES: dict[FieldType | None, str] = {
    FieldType.STRING: "a string",
    FieldType.NUMBER: "a number",
    FieldType.BOOL: "a boolean",
    FieldType.DATETIME: "a datetime",
    None: "null",
}

_ESCAPES = {'"': '"', "\\": "\\", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})")
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal: its type (``None`` for ``null``), Python value and source text for messages."""

    kind: FieldType | None
    value: Any
    text: str


def literal(node: Tree[Token] | Token | None) -> Lit:
    """Converts a literal token; raises :class:`QueryError` for an invalid datetime."""
    assert isinstance(node, Token)
    text = str(node)
    kind = node.type
    if kind == "STRING":
        return Lit(FieldType.STRING, re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], text[1:-1]), text)
    if kind == "NUMBER":
        number: float = float(text) if any(c in text for c in ".eE") else int(text)
        return Lit(FieldType.NUMBER, number, text)
    if kind == "DATETIME":
        return Lit(FieldType.DATETIME, _datetime_literal(text), text)
    if kind in ("TRUE", "FALSE"):
        return Lit(FieldType.BOOL, kind == "TRUE", text)
    return Lit(None, None, text)


def _datetime_literal(text: str) -> datetime:
    inner = text[text.index("(") + 1 : -1].strip()
    m = _RFC3339.fullmatch(inner)
    if m:
        date, time, fraction, offset = m.groups()
        # fromisoformat wants at most microseconds; RFC3339 allows any number of fraction digits.
        micros = ("." + (fraction + "000000")[:6]) if fraction else ""
        zone = "+00:00" if offset in ("Z", "z") else offset
        try:
            return datetime.fromisoformat(f"{date}T{time}{micros}{zone}")
        except ValueError:
            pass
    raise QueryError(f"invalid datetime '{inner}': expected RFC3339, e.g. datetime(2021-01-01T00:00:00Z)")


def array_literal(nodes: Sequence[Tree[Token] | Token | None]) -> list[Lit]:
    """Converts the items of ``[...]``; they must all be strings, all numbers or all datetimes."""
    lits = [literal(node) for node in nodes]
    if any(lit.kind in (None, FieldType.BOOL) for lit in lits):
        raise QueryError("arrays may only hold strings, numbers or datetimes")
    if len({lit.kind for lit in lits}) > 1:
        raise QueryError(f"array values must all have the same type: [{', '.join(lit.text for lit in lits)}]")
    return lits


def to_datetime(value: Any) -> datetime | None:
    """An aware datetime from a stored value (RFC3339 string or datetime); naive means UTC; else ``None``."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return None


# The Python classes a row value must have to be compared with a literal of each (non-datetime) type. The check is
# inlined in the test closures instead of calling a converter: one call less per row.
_CLASSES: dict[FieldType, type | tuple[type, ...]] = {
    FieldType.STRING: str,
    FieldType.NUMBER: (int, float),
    FieldType.BOOL: bool,
}


def as_sequence(value: Any) -> Sequence[Any]:
    """A set field's elements; anything that is not a collection counts as empty."""
    if isinstance(value, list | tuple):
        return value
    if value is None or isinstance(value, str | bytes | Mapping):
        return ()
    try:
        return list(value)
    except TypeError:
        return ()


def map_getter(base: Getter, keys: Sequence[str]) -> Getter:
    """Reads ``tags.a.b`` as ``row["tags"]["a"]["b"]``, ``None`` where a level is missing or not a mapping."""
    if len(keys) == 1:
        key = keys[0]
        return lambda row: m.get(key) if isinstance(m := base(row), Mapping) else None

    def get(row: Row) -> Any:
        value = base(row)
        for key in keys:
            if not isinstance(value, Mapping):
                return None
            value = value.get(key)
        return value

    return get


def _check(name: str, vtype: FieldType | None, op: str, lits: list[Lit]) -> None:
    kind = lits[0].kind
    for lit in lits:
        if vtype is not None and lit.kind is not vtype:
            hint = "; write datetime(...) for datetime values" if vtype is FieldType.DATETIME else ""
            raise QueryError(
                f"type mismatch: '{name}' is {TYPE_NAMES[vtype]} field but {lit.text} is {TYPE_NAMES[lit.kind]}{hint}"
            )
        if lit.kind is not kind:
            raise QueryError(f"'{op}' needs values of one type, got {lits[0].text} and {lit.text}")
    if kind is FieldType.BOOL and op not in ("=", "!="):
        raise QueryError(f"operator '{op}' cannot be used with booleans")
    if op.endswith("between") and kind is FieldType.STRING:
        raise QueryError(f"'{op}' needs numbers or datetimes, got {lits[0].text}")
    if op.endswith("contains") and kind is not FieldType.STRING:
        raise QueryError(f"'{op}' needs a string, got {lits[0].text}")


def value_test(name: str, vtype: FieldType | None, op: str, lits: list[Lit]) -> Test:
    """Builds the test ``<value> <op> <lits>`` for a field called ``name`` of type ``vtype`` (``None``: dynamic).

    Raises:
        QueryError: the literals do not fit the field type or the operator.
    """
    if lits[0].kind is None:
        if op == "=":
            return lambda v: v is None
        if op == "!=":
            return lambda v: v is not None
        raise QueryError(f"null can only be compared with = or !=, not '{op}'")
    _check(name, vtype, op, lits)
    kind = lits[0].kind
    if kind is FieldType.DATETIME:
        if op in _BINARY:
            cmp, lit = _BINARY[op], lits[0].value
            return lambda v: (c := to_datetime(v)) is not None and cmp(c, lit)
        rel = _relation(op, lits)
        return lambda v: (c := to_datetime(v)) is not None and rel(c)
    assert kind is not None
    cls = _CLASSES[kind]
    if kind is FieldType.NUMBER:
        # bool is an int subclass, but true is not 1 in a filter.
        if op in _BINARY:
            cmp, lit = _BINARY[op], lits[0].value
            return lambda v: isinstance(v, cls) and v.__class__ is not bool and cmp(v, lit)
        rel = _relation(op, lits)
        return lambda v: isinstance(v, cls) and v.__class__ is not bool and rel(v)
    if op in _BINARY:
        cmp, lit = _BINARY[op], lits[0].value
        return lambda v: isinstance(v, cls) and cmp(v, lit)
    rel = _relation(op, lits)
    return lambda v: isinstance(v, cls) and rel(v)


def _relation(op: str, lits: list[Lit]) -> Test:
    """``<value> <op> <lits>`` for a value already known to have the literals' type."""
    lit = lits[0].value
    if op in _BINARY:
        cmp = _BINARY[op]
        return lambda c: cmp(c, lit)
    if op in ("in", "not in"):
        values = frozenset(x.value for x in lits)
        if op == "in":
            return lambda c: c in values
        return lambda c: c not in values
    if op in ("between", "not between"):
        # Half-open like the reference implementation: lower bound included, upper bound excluded.
        low, high = lit, lits[1].value
        if op == "between":
            return lambda c: low <= c < high
        return lambda c: not low <= c < high
    if op in ("icontains", "not icontains"):
        lowered = lit.lower()
        if op == "icontains":
            return lambda c: lowered in c.lower()
        return lambda c: lowered not in c.lower()
    if op == "contains":
        return lambda c: lit in c
    return lambda c: lit not in c


def sort_value(value: Any) -> tuple[int, Any]:
    """A total-order key: null < booleans < numbers < datetimes < strings < anything else (by repr)."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, value)
    if isinstance(value, datetime):
        return (3, value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    if isinstance(value, str):
        return (4, value)
    return (5, repr(value))
