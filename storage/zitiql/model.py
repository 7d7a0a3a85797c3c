"""Value types of the ZitiQL engine: symbol tables, errors, the compiled :class:`Query` and the text column its
:class:`TextSearch` reads.

Split from ``storage/zitiql/parser.py`` so that the compiler (``storage/zitiql/compiler.py``) and the public entry
points can share them without an import cycle. Import these names from ``storage.zitiql.parser``, which re-exports them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldType", "IndexHint", "Query", "QueryError", "SortError", "SortKey", "Symbol", "TextColumn",
           "TextSearch"]


class FieldType(enum.Enum):
    """How a filterable field is typed, which decides the operators and literals it accepts."""

    STRING = "string"
    NUMBER = "number"
    BOOL = "bool"
    DATETIME = "datetime"
    #: A list of values; only usable through ``anyOf``/``allOf``/``count``/``isEmpty``.
    SET = "set"
    #: A string-keyed dict (``tags``); usable only as ``tags.<key>``, whose values are typed at run time.
    MAP = "map"
    #: Related rows of another kind: ``isEmpty(from x where ...)``, ``count(x)``, ``anyOf(x.name) = "..."``.
    SUBQUERY = "subquery"


@dataclass(frozen=True)
class Symbol:
    """One filterable field of a kind.

    Attributes:
        type: The field's type.
        getter: Reads the value from a row; ``None`` means ``row.get(<symbol name>)``. Only plain-field symbols
            (no getter) can give an :class:`IndexHint`, since the store's indexes are on stored fields.
        related: For ``SUBQUERY`` symbols: the related rows of a row (e.g. the service policies of an identity).
        related_symbols: For ``SUBQUERY`` symbols: the symbol table of the related rows.
    """

    type: FieldType
    getter: Callable[[Mapping[str, Any]], Any] | None = None
    related: Callable[[Mapping[str, Any]], Iterable[Mapping[str, Any]]] | None = None
    related_symbols: Mapping[str, Symbol] | None = None


class QueryError(Exception):
    """A filter that cannot be parsed or does not fit the symbol table (maps to 400 ``INVALID_FILTER``).

    Attributes:
        message: Human-readable cause, e.g. ``unknown symbol 'foo'``; syntax errors start with ``line L:C`` where
            ``L`` is 1-based and ``C`` is the 0-based column, as ANTLR-based parsers report them.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SortError(Exception):
    """A bad ``sort`` query parameter (maps to 400 ``INVALID_SORT_IDENTIFIER``).

    Attributes:
        message: Human-readable cause, e.g. ``unknown symbol 'foo'``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class SortKey:
    """One sort field: a symbol name as written (``name``, ``tags.owner``) and its direction."""

    field: str
    descending: bool


@dataclass(frozen=True)
class IndexHint:
    """Where to find candidate rows without a full scan.

    The candidates are the rows whose ``field`` (or, for set fields, any element of it) is one of ``values``. The
    hint is a superset of the matches; ``exact`` when the candidates are precisely the rows that satisfy the
    conjunct it came from (then :attr:`Query.residual` decides the rest).
    """

    field: str
    values: frozenset[str]
    exact: bool = False


@dataclass(frozen=True)
class TextSearch:
    """A top-level conjunct ``field contains "text"`` on a stored string field: no row matches unless its ``field``
    is a string holding ``text``, so a :class:`TextColumn` of ``field`` can narrow many rows at once."""

    field: str
    text: str


class TextColumn:
    """The values of one stored field over a list of rows, joined into one string: :meth:`holding` finds the rows
    whose value holds a text with substring searches of that string, instead of a test per row.

    A value that is not a string stands as an empty segment (no search finds it, as ``contains`` never matches it).
    The segments are joined by :data:`SEPARATOR`, so a row's position is the number of separators before it; a
    text without the separator can only be found inside one segment.
    """

    __slots__ = ("_text", "searchable")

    SEPARATOR = "\x00"

    def __init__(self, rows: Sequence[Mapping[str, Any]], field: str) -> None:
        self._text = self.SEPARATOR.join(
            [value if isinstance(value := row.get(field), str) else "" for row in rows])
        #: False when a value holds the separator itself (positions could not be counted): test each row instead.
        self.searchable = self._text.count(self.SEPARATOR) == max(len(rows) - 1, 0)

    def holding(self, text: str) -> list[int] | None:
        """The positions (in the rows' order) of the rows whose value is a string holding ``text``; None when
        ``text`` cannot be searched this way (empty, holding the separator, or the column is not searchable)."""
        separator = self.SEPARATOR
        if not text or separator in text or not self.searchable:
            return None
        find, count = self._text.find, self._text.count
        found: list[int] = []
        row = counted = 0  # the row of the text's position ``counted``
        at = find(text)
        while at >= 0:
            row += count(separator, counted, at)
            counted = at
            found.append(row)
            end = find(separator, at)  # the end of this row's segment: one position per row is enough
            if end < 0:
                break
            at = find(text, end + 1)
        return found


@dataclass(frozen=True)
class Query:
    """A compiled filter.

    Attributes:
        predicate: Whether a row matches; always true when there was no boolean expression.
        sort: From ``sort by`` in the filter (at most 5 keys, as written); ``()`` when absent.
        skip: From ``skip N`` in the filter, else ``None``.
        limit: From ``limit N`` in the filter; ``-1`` for ``limit none``; else ``None``.
        index_hint: Candidate rows from an index, if the first usable top-level conjunct allows it.
        has_condition: Whether there was a boolean expression (without one every row matches).
        fields: The stored fields that the predicate and ``sort`` read (``row.get(name)``), or ``None`` when they
            read more than stored fields (a symbol with its own getter, related rows). A caller may then hand the
            predicate rows that hold only these fields and ``id``.
        residual: With an exact ``index_hint``: the predicate without the conjunct the hint stands for, which
            decides exactly as ``predicate`` does on rows the hint selected; else ``None``.
        search: A top-level ``contains`` conjunct a :class:`TextColumn` can answer: rows it does not find never
            match (the predicate still decides on the rows it finds); else ``None``.
    """

    predicate: Callable[[Mapping[str, Any]], bool]
    sort: tuple[SortKey, ...]
    skip: int | None
    limit: int | None
    index_hint: IndexHint | None
    has_condition: bool = True
    fields: frozenset[str] | None = None
    residual: Callable[[Mapping[str, Any]], bool] | None = None
    search: TextSearch | None = None
