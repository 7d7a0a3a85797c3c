"""ZitiQL, the filter language of the Edge Management API list endpoints, compiled to Python closures.

A filter is ``[<boolean expression>] [sort by f [asc|desc], ...] [skip N] [limit N|none]``; an empty filter matches
everything. :func:`compile_filter` parses it (LALR, one cached parser), checks it against a kind's symbol table and
returns a :class:`Query` whose predicate is a closure tree, so evaluating a row walks no syntax tree. It also
derives an :class:`IndexHint` so that the store can fetch candidate rows from an index instead of scanning.

Language notes (decisions where the reference grammar is silent or surprising):

* Keywords are case-insensitive, identifiers case-sensitive; ``datetime(`` must be lower-case.
* ``not`` binds tighter than ``and``, which binds tighter than ``or``: ``not a and b`` is ``(not a) and b``.
* Any comparison with a missing (``None``) value is false, ``!=`` and ``not in`` included; only ``= null`` matches.
* ``between a and b`` is half-open, ``a <= x < b``, as in the reference implementation.
* ``allOf(set) <op> v`` is false for an empty set (see :mod:`storage.zitiql.compiler`).
* Map keys (``tags.owner``) and set elements have no declared type: a literal of any type is accepted and rows whose
  value has another type simply do not match.

Limits: a filter may be at most :data:`MAX_FILTER_LENGTH` characters long and nest at most :data:`MAX_FILTER_DEPTH`
levels deep; beyond either it is refused as a :class:`QueryError`, before anything recurses over it.

This module must stay free of Trio and Quart: it is pure computation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from storage.zitiql.compiler import MAX_SORT_FIELDS, compile_query, sort_keys
from storage.zitiql.model import (
    FieldType,
    IndexHint,
    Query,
    QueryError,
    SortError,
    SortKey,
    Symbol,
    TextColumn,
    TextSearch,
)
from storage.zitiql.resolution import resolve_sort_field
from storage.zitiql.values import Getter, Row, sort_value, to_datetime

__all__ = [
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_LENGTH",
    "FieldType",
    "IndexHint",
    "Query",
    "QueryError",
    "SortError",
    "SortKey",
    "Symbol",
    "TextColumn",
    "TextSearch",
    "compile_filter",
    "order_rows",
    "parse_sort",
    "stored_fields",
]

#: The longest filter (or sort parameter) accepted, in characters: far beyond any filter written by hand or by a
#: client library, and short enough that parsing one takes milliseconds.
MAX_FILTER_LENGTH = 16 * 1024

#: The deepest parse tree accepted, counting every node on the way from the root to a leaf (a comparison is two
#: levels, a chain of ``and`` or ``or`` one however long it is, each ``not``, group of another operator or
#: subquery one more). The compiler and the closures it builds recurse once or twice per level: this keeps them far
#: inside Python's recursion limit, wherever in the stack a filter is compiled.
MAX_FILTER_DEPTH = 100

# Whitespace is insignificant between tokens. The reference grammar demands it in some places (around `and`), which
# only makes it reject more filters; every filter it accepts means the same here. Keywords are terminals hidden from
# the tree (leading underscore) unless the compiler must see them; `?` rules collapse when they have one child, so
# parentheses leave no trace in the tree. The rules of `and` and `or` are left-recursive (which keeps the "expecting
# ..." lists of syntax errors complete); _Chains turns each chain into one node holding every operand, so that a long
# chain is wide, not deep (see MAX_FILTER_DEPTH).
_GRAMMAR = r"""
query: [or_expr] [sort_clause] [skip_clause] [limit_clause]
sort_param: sort_field ("," sort_field)*

?or_expr: and_expr
        | or_expr _OR and_expr -> or_
?and_expr: unary
         | and_expr _AND unary -> and_
?unary: _NOT unary -> not_
      | atom
?atom: "(" or_expr ")"
     | lhs CMP literal -> cmp
     | lhs _IN array -> in_
     | lhs _NOT _IN array -> not_in
     | lhs _BETWEEN literal _AND literal -> between
     | lhs _NOT _BETWEEN literal _AND literal -> not_between
     | lhs _CONTAINS literal -> contains
     | lhs _NOT _CONTAINS literal -> not_contains
     | lhs _ICONTAINS literal -> icontains
     | lhs _NOT _ICONTAINS literal -> not_icontains
     | TRUE -> true_const
     | FALSE -> false_const
     | IDENT -> bare
     | _ISEMPTY "(" set_expr ")" -> is_empty

lhs: IDENT -> field
   | _ANYOF "(" IDENT ")" -> any_of
   | _ALLOF "(" IDENT ")" -> all_of
   | _COUNT "(" set_expr ")" -> count

set_expr: IDENT -> set_ident
        | _FROM IDENT _WHERE query -> subquery

?literal: STRING | NUMBER | DATETIME | TRUE | FALSE | NULL
array: "[" _item ("," _item)* "]"
_item: STRING | NUMBER | DATETIME | TRUE | FALSE | NULL

sort_clause: _SORT _BY sort_field ("," sort_field)*
sort_field: IDENT [ASC | DESC]
skip_clause: _SKIP NUMBER
limit_clause: _LIMIT (NUMBER | NONE)

_AND: "and"i
_OR: "or"i
_NOT: "not"i
_IN: "in"i
_BETWEEN: "between"i
_CONTAINS: "contains"i
_ICONTAINS: "icontains"i
_ISEMPTY: "isempty"i
_ANYOF: "anyof"i
_ALLOF: "allof"i
_COUNT: "count"i
_FROM: "from"i
_WHERE: "where"i
_SORT: "sort"i
_BY: "by"i
_SKIP: "skip"i
_LIMIT: "limit"i
NONE: "none"i
ASC: "asc"i
DESC: "desc"i
TRUE: "true"i
FALSE: "false"i
NULL: "null"i
CMP: /!=|<=|>=|=|<|>/
IDENT: /[A-Za-z][A-Za-z_]*(\.[A-Za-z][A-Za-z_]*)*/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?(0|[1-9][0-9]*))?/
STRING: /"(?:[^"\\\x00-\x1f]|\\["\\fnrt])*"/
DATETIME.2: /datetime\([^)]*\)/
%ignore /[ \t\r\n]+/
"""

# How terminals are named in "expected ..." messages.
_DISPLAY = {
    "CMP": "comparison operator",
    "IDENT": "identifier",
    "STRING": "string",
    "NUMBER": "number",
    "DATETIME": "datetime(...)",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "$END": "end of input",
}


class _Chains(Transformer[Token, Tree[Token]]):
    """Builds ``a or b or c`` as one ``or_`` node of three operands rather than ``or_(or_(a, b), c)`` (the same for
    ``and_``), as the parser reduces each operator: the left operand's node takes the right one in place."""

    @staticmethod
    def _chain(data: str, children: list[Any]) -> Tree[Token]:
        left, right = children
        if isinstance(left, Tree) and left.data == data:
            left.children.append(right)
            return left
        return Tree(data, children)

    def or_(self, children: list[Any]) -> Tree[Token]:
        return self._chain("or_", children)

    def and_(self, children: list[Any]) -> Tree[Token]:
        return self._chain("and_", children)


@functools.cache
def _parser() -> Lark:
    # Built on first use (tens of milliseconds) and shared: each parse() call keeps its state to itself.
    return Lark(_GRAMMAR, parser="lalr", start=["query", "sort_param"], maybe_placeholders=True,
                transformer=_Chains())


def _position(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}:{pos - (text.rfind(chr(10), 0, pos) + 1)}"


def _expected(names: Iterable[str]) -> str:
    shown = sorted({_DISPLAY.get(name, name.lstrip("_").lower()) for name in names})
    return f", expecting one of: {', '.join(shown)}" if shown else ""


def _syntax_message(text: str, exc: UnexpectedInput) -> str:
    """``line L:C <what went wrong>``: L is 1-based, C the 0-based column, as ANTLR reports them."""
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else len(text)
        rest = text[pos:]
        if rest.startswith('"'):
            if re.match(r'"(?:[^"\\]|\\.)*"', rest):
                return f"{_position(text, pos)} invalid string {rest[:40]!r}: control character or unknown escape"
            return f"{_position(text, pos)} unterminated string {rest[:40]!r}"
        word = re.match(r"\S{1,20}", rest)
        return f"{_position(text, pos)} unexpected input {word.group() if word else rest[:1]!r}"
    expected: Iterable[str] = ()
    if isinstance(exc, UnexpectedToken):
        # LALR merges lookaheads of similar states, so `expected` can list tokens that are not valid here; asking
        # the parser which tokens it would really accept gives an exact list.
        parser = exc.interactive_parser
        expected = parser.accepts() if parser is not None else exc.expected  # type: ignore[no-untyped-call]
        if exc.token.type != "$END":
            pos = exc.token.start_pos if exc.token.start_pos is not None else len(text)
            return f"{_position(text, pos)} unexpected input '{exc.token}'{_expected(expected)}"
    return f"{_position(text, len(text))} unexpected end of input{_expected(expected)}"


def _parse(text: str, start: str, what: str) -> Tree[Token]:
    """The parse tree of ``text`` (a ``what``: "filter" or "sort") from the rule ``start``; raises QueryError.

    The length is checked before parsing and the depth right after, by a walk without recursion: the LALR parser
    and lark's tree building loop rather than recurse, so only what comes after (the compiler, the closures it
    builds) needs the depth bounded.
    """
    if len(text) > MAX_FILTER_LENGTH:
        raise QueryError(f"{what} is longer than {MAX_FILTER_LENGTH} characters")
    try:
        tree = _parser().parse(text, start=start)
    except UnexpectedInput as exc:
        raise QueryError(_syntax_message(text, exc)) from None
    _check_depth(tree, what)
    return tree


def _check_depth(tree: Tree[Token], what: str) -> None:
    """Raise QueryError when ``tree`` is deeper than :data:`MAX_FILTER_DEPTH`; an explicit stack, no recursion."""
    levels = [(tree, 1)]
    while levels:
        node, depth = levels.pop()
        if depth > MAX_FILTER_DEPTH:
            raise QueryError(f"{what} is nested deeper than {MAX_FILTER_DEPTH} levels")
        levels.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))


def _always(_row: Mapping[str, Any]) -> bool:
    return True


def compile_filter(text: str | None, symbols: Mapping[str, Symbol]) -> Query:
    """Compiles a ZitiQL filter against a kind's symbol table.

    Args:
        text: The ``filter`` query parameter; ``None``, empty or blank means "every row".
        symbols: The kind's filterable fields by name.

    Returns:
        The compiled query. ``sort`` holds at most 5 keys (more are ignored) and does not include the ``id``
        tiebreaker, which :func:`order_rows` adds.

    Raises:
        QueryError: syntax errors (message starts with ``line L:C``), unknown symbols (``unknown symbol 'foo'``), set
            fields used without a set function, type mismatches, sorting by a set field, bad skip/limit numbers.
    """
    if text is None or not text.strip():
        return Query(_always, (), None, None, None, has_condition=False, fields=frozenset())
    tree = _parse(text, "query", "filter")
    compiled = compile_query(tree, symbols)
    condition = tree.children[0]
    names = [str(v) for v in condition.scan_values(lambda v: isinstance(v, Token) and v.type == "IDENT")
             ] if isinstance(condition, Tree) else []
    return Query(compiled.predicate, compiled.sort, compiled.skip, compiled.limit, compiled.index_hint,
                 has_condition=condition is not None, residual=compiled.residual, search=compiled.search,
                 fields=stored_fields([*names, *(key.field for key in compiled.sort)], symbols))


def stored_fields(names: Iterable[str], symbols: Mapping[str, Symbol]) -> frozenset[str] | None:
    """The stored fields that reading the symbols ``names`` (as a filter or sort writes them) takes, or ``None``
    when one of them reads more than a stored field: a symbol with its own getter, or related rows.

    The names must already have compiled against ``symbols``. Any name this cannot place gives ``None`` (the whole
    row), which is always safe: the inner names of ``from x where ...`` never get here alone, since ``x`` is
    related rows.
    """
    fields = set()
    for name in names:
        field = _stored_field(name, symbols)
        if field is None:
            return None
        fields.add(field)
    return frozenset(fields)


def _stored_field(name: str, symbols: Mapping[str, Symbol]) -> str | None:
    # The same lookup order as storage/zitiql/compiler.py's _resolve: the exact name, then the longest known prefix.
    sym = symbols.get(name)
    if sym is not None:
        return name if sym.getter is None and sym.type is not FieldType.SUBQUERY else None
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        sym = symbols.get(head)
        if sym is not None:
            return head if sym.type is FieldType.MAP and sym.getter is None else None
    return "id" if name == "id" else None


def parse_sort(text: str, symbols: Mapping[str, Symbol]) -> tuple[SortKey, ...]:
    """Parses the ``sort`` query parameter: ``"name desc,id"``, ``"name asc, createdAt"``.

    Returns:
        At most 5 keys (more are ignored); ``()`` for an empty or blank parameter.

    Raises:
        SortError: bad syntax, unknown fields, or set/map fields.
    """
    if not text.strip():
        return ()
    try:
        return sort_keys(_parse(text, "sort_param", "sort").children, symbols)
    except QueryError as exc:
        raise SortError(exc.message) from None


def _sort_getter(field: str, symbols: Mapping[str, Symbol]) -> Getter:
    try:
        resolved = resolve_sort_field(field, symbols)
    except QueryError as exc:
        if field != "id":
            raise SortError(exc.message) from None
        return lambda row: row.get("id")
    get = resolved.get
    if resolved.vtype is FieldType.DATETIME:
        # Compare instants, not strings, so that differing offsets or precisions still order correctly.
        return lambda row: v if (v := to_datetime(raw := get(row))) is not None else raw
    return get


def _sort_key(get: Getter) -> Callable[[Row], tuple[int, Any]]:
    return lambda row: sort_value(get(row))


def order_rows(
    rows: Iterable[Mapping[str, Any]], sort: Sequence[SortKey], symbols: Mapping[str, Symbol]
) -> list[Mapping[str, Any]]:
    """Sorts rows by ``sort``, then by ``id`` (appended unless already a key); ``()`` sorts by ``id`` alone.

    Strings compare by code point (the same order as UTF-8 bytes, so case-sensitive); ``None`` sorts first
    ascending and last descending; values of mixed types order as null < bool < number < datetime < string.
    At most the first 5 keys of ``sort`` are used.

    Raises:
        SortError: a key names an unknown, set or map field.
    """
    keys = list(sort[:MAX_SORT_FIELDS])
    if all(key.field != "id" for key in keys):
        keys.append(SortKey("id", False))
    out: list[Row] = list(rows)
    # Python's sort is stable (also with reverse=True), so sorting by each key from the last to the first gives
    # the lexicographic order with a per-key direction.
    for key in reversed(keys):
        out.sort(key=_sort_key(_sort_getter(key.field, symbols)), reverse=key.descending)
    return out
