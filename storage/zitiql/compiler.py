"""Turns a parsed ZitiQL tree (see ``storage/zitiql/parser.py``) into closures over rows.

All type checking and symbol resolution happens here, once per filter; the closures that come out only read row
values and compare them. Rows are mappings keyed by wire field names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lark import Token, Tree

from storage.zitiql.model import FieldType, IndexHint, QueryError, SortKey, Symbol, TextSearch
from storage.zitiql.resolution import (
    Related,
    Scalar,
    as_collection,
    as_scalar,
    resolve_path,
    resolve_sort_field,
)
from storage.zitiql.values import (
    TYPE_NAMES,
    Lit,
    Pred,
    Row,
    array_literal,
    literal,
    value_test,
)

__all__ = ["MAX_SORT_FIELDS", "CompiledQuery", "compile_query", "sort_keys"]

#: Sort keys beyond this many are ignored, as the reference controller does.
MAX_SORT_FIELDS = 5

# Plain fields that the store indexes, so equality/membership on them can be answered from an index.
_HINT_SCALARS = frozenset({"id", "name"})
_HINT_SETS = frozenset({"roleAttributes"})

def _always(_row: Row) -> bool:
    return True


def _never(_row: Row) -> bool:
    return False




@dataclass(frozen=True, slots=True)
class CompiledQuery:
    """The parts of a compiled ``query`` node; see :class:`storage.zitiql.model.Query`."""

    predicate: Pred
    sort: tuple[SortKey, ...]
    skip: int | None
    limit: int | None
    index_hint: IndexHint | None
    residual: Pred | None = None
    search: TextSearch | None = None


def compile_query(tree: Tree[Token], symbols: Mapping[str, Symbol]) -> CompiledQuery:
    """Compiles a ``query`` node: ``[bool_expr] [sort by ...] [skip N] [limit N|none]``."""
    expr, sort_clause, skip_clause, limit_clause = tree.children
    predicate: Pred = _always
    hint: IndexHint | None = None
    residual: Pred | None = None
    search: TextSearch | None = None
    if isinstance(expr, Tree):
        predicate, hint, residual = _top_expr(expr, symbols)
        search = _text_search(expr, symbols)
    sort: tuple[SortKey, ...] = ()
    if isinstance(sort_clause, Tree):
        sort = sort_keys(sort_clause.children, symbols)
    skip = _whole_number(skip_clause.children[0], "skip") if isinstance(skip_clause, Tree) else None
    limit: int | None = None
    if isinstance(limit_clause, Tree):
        tok = limit_clause.children[0]
        assert isinstance(tok, Token)
        limit = -1 if tok.type == "NONE" else _whole_number(tok, "limit")
    return CompiledQuery(predicate, sort, skip, limit, hint, residual, search)


def sort_keys(fields: Sequence[Tree[Token] | Token | None], symbols: Mapping[str, Symbol]) -> tuple[SortKey, ...]:
    """Validates ``sort_field`` nodes and keeps the first :data:`MAX_SORT_FIELDS`; raises :class:`QueryError`."""
    keys = []
    for node in fields[:MAX_SORT_FIELDS]:
        assert isinstance(node, Tree)
        ident, direction = node.children
        resolve_sort_field(str(ident), symbols)
        keys.append(SortKey(str(ident), isinstance(direction, Token) and direction.type == "DESC"))
    return tuple(keys)


def _whole_number(tok: Tree[Token] | Token | None, clause: str) -> int:
    text = str(tok)
    if not re.fullmatch(r"-?\d+", text):
        raise QueryError(f"{clause} needs a whole number, got '{text}'")
    return int(text)


def _flatten(node: Tree[Token], data: str) -> list[Tree[Token]]:
    """``a and (b and c)`` -> ``[a, b, c]``, so n-ary chains compile to one closure."""
    out: list[Tree[Token]] = []
    for child in node.children:
        assert isinstance(child, Tree)
        out.extend(_flatten(child, data) if child.data == data else [child])
    return out


def _all_of(preds: list[Pred]) -> Pred:
    if len(preds) == 2:
        a, b = preds
        return lambda row: a(row) and b(row)

    def conj(row: Row) -> bool:
        return all(p(row) for p in preds)

    return conj


def _any_of(preds: list[Pred]) -> Pred:
    if len(preds) == 2:
        a, b = preds
        return lambda row: a(row) or b(row)

    def disj(row: Row) -> bool:
        return any(p(row) for p in preds)

    return disj


def _top_expr(node: Tree[Token], symbols: Mapping[str, Symbol]) -> tuple[Pred, IndexHint | None, Pred | None]:
    """The filter's boolean expression: its predicate, index hint and, when the hint is exact, the residual
    predicate (the other top-level conjuncts), which rows from the hint's candidates need checked alone."""
    if node.data != "and_":
        predicate, hint = _expr(node, symbols)
        return predicate, hint, _always if hint is not None and hint.exact else None
    parts = [_expr(child, symbols) for child in _flatten(node, "and_")]
    predicate = _all_of([p for p, _ in parts])
    hinted = next((n for n, (_, h) in enumerate(parts) if h is not None), None)
    if hinted is None:
        return predicate, None, None
    hint = parts[hinted][1]
    assert hint is not None
    if not hint.exact:
        return predicate, hint, None
    rest = [p for n, (p, _) in enumerate(parts) if n != hinted]
    return predicate, hint, rest[0] if len(rest) == 1 else _all_of(rest)


def _text_search(expr: Tree[Token], symbols: Mapping[str, Symbol]) -> TextSearch | None:
    """The first top-level conjunct of a compiled ``expr`` that is ``field contains "text"`` on a stored string
    field, as a :class:`TextSearch` (its closure tests whether the row's value is a string holding ``text``)."""
    for node in _flatten(expr, "and_") if expr.data == "and_" else [expr]:
        lhs = node.children[0] if node.data == "contains" else None
        if isinstance(lhs, Tree) and lhs.data == "field":
            search = _searched(as_scalar(resolve_path(str(lhs.children[0]), symbols)), *_operands(node))
            if search is not None:
                return search
    return None


def _searched(field: Scalar, op: str, lits: list[Lit]) -> TextSearch | None:
    if field.key is None or op != "contains" or field.vtype is not FieldType.STRING:
        return None
    lit = lits[0]
    return TextSearch(field.key, lit.value) if lit.kind is FieldType.STRING else None


def _expr(node: Tree[Token], symbols: Mapping[str, Symbol]) -> tuple[Pred, IndexHint | None]:
    """Compiles a boolean expression; the hint is that of the first hint-giving top-level conjunct."""
    data = node.data
    if data == "and_":
        parts = [_expr(child, symbols) for child in _flatten(node, "and_")]
        return _all_of([p for p, _ in parts]), next((h for _, h in parts if h is not None), None)
    if data == "or_":
        return _any_of([_expr(child, symbols)[0] for child in _flatten(node, "or_")]), None
    if data == "not_":
        child = node.children[0]
        assert isinstance(child, Tree)
        inner = _expr(child, symbols)[0]
        return (lambda row: not inner(row)), None
    if data == "true_const":
        return _always, None
    if data == "false_const":
        return _never, None
    if data == "bare":
        return _bare(str(node.children[0]), symbols), None
    if data == "is_empty":
        counter, elements = _set_source(node.children[0], symbols, "isEmpty")
        if elements is not None:
            return (lambda row: not elements(row)), None
        return (lambda row: counter(row) == 0), None
    return _comparison(node, symbols)


def _bare(name: str, symbols: Mapping[str, Symbol]) -> Pred:
    field = as_scalar(resolve_path(name, symbols))
    if field.vtype not in (FieldType.BOOL, None):
        raise QueryError(f"'{name}' is {TYPE_NAMES[field.vtype]} field and cannot be used as a condition")
    get = field.get
    return lambda row: get(row) is True


def _set_source(
    node: Tree[Token] | Token | None, symbols: Mapping[str, Symbol], func: str
) -> tuple[Callable[[Row], int], Callable[[Row], Sequence[Any]] | None]:
    """The argument of ``count``/``isEmpty``: a counter, plus the element list when there is one."""
    assert isinstance(node, Tree)
    if node.data == "set_ident":
        coll = as_collection(resolve_path(str(node.children[0]), symbols), func)
        elements = coll.elements
        return (lambda row: len(elements(row))), elements
    ident, inner_tree = node.children
    related = resolve_path(str(ident), symbols)
    if not isinstance(related, Related):
        raise QueryError(f"'{ident}' is not a related entity type and cannot be used with 'from'")
    assert isinstance(inner_tree, Tree)
    inner = compile_query(inner_tree, related.symbols)
    rows, pred, skip, limit = related.rows, inner.predicate, max(inner.skip or 0, 0), inner.limit

    def count(row: Row) -> int:
        n = max(sum(1 for r in rows(row) if pred(r)) - skip, 0)
        return n if limit is None or limit < 0 else min(n, limit)

    return count, None


_OPS = {
    "in_": "in",
    "not_in": "not in",
    "between": "between",
    "not_between": "not between",
    "contains": "contains",
    "not_contains": "not contains",
    "icontains": "icontains",
    "not_icontains": "not icontains",
}


def _operands(node: Tree[Token]) -> tuple[str, list[Lit]]:
    children = node.children
    if node.data == "cmp":
        return str(children[1]), [literal(children[2])]
    op = _OPS[str(node.data)]
    if op.endswith("in"):
        array = children[1]
        assert isinstance(array, Tree)
        return op, array_literal(array.children)
    if op.endswith("between"):
        return op, [literal(children[1]), literal(children[2])]
    return op, [literal(children[1])]


def _comparison(node: Tree[Token], symbols: Mapping[str, Symbol]) -> tuple[Pred, IndexHint | None]:
    op, lits = _operands(node)
    lhs = node.children[0]
    assert isinstance(lhs, Tree)
    func = str(lhs.data)
    if func == "field":
        field = as_scalar(resolve_path(str(lhs.children[0]), symbols))
        test = value_test(field.name, field.vtype, op, lits)
        hint = _hint(field.key, _HINT_SCALARS, op, lits, exact=True)
        key, get = field.key, field.get
        if key is not None:
            if op == "=" and lits[0].kind is FieldType.STRING:
                # The commonest filters get a single-call closure; str == non-str is simply false.
                value = lits[0].value
                return (lambda row: row.get(key) == value), hint
            if (search := _searched(field, op, lits)) is not None:
                # The test TextColumn.holding answers for many rows at once.
                part = search.text
                return (lambda row: isinstance(v := row.get(key), str) and part in v), hint
            return (lambda row: test(row.get(key))), hint
        return (lambda row: test(get(row))), hint
    if func == "count":
        counter, _ = _set_source(lhs.children[0], symbols, "count")
        if any(lit.kind is None for lit in lits):
            raise QueryError("count() cannot be compared with null")
        test = value_test("count()", FieldType.NUMBER, op, lits)
        return (lambda row: test(counter(row))), None
    name = "anyOf" if func == "any_of" else "allOf"
    coll = as_collection(resolve_path(str(lhs.children[0]), symbols), name)
    if any(lit.kind is None for lit in lits):
        raise QueryError(f"{name}({coll.name}) cannot be compared with null")
    test = value_test(coll.name, coll.elem_type, op, lits)
    elements = coll.elements
    if name == "allOf":
        # An empty set matches no allOf() test: the rows an index hint selects (those holding the value) must be
        # a superset of the matches, so vacuous truth is deliberately not used here.
        hint = _hint(coll.key, _HINT_SETS, op, lits, exact=False) if op == "=" else None
        return (lambda row: bool(values := elements(row)) and all(map(test, values))), hint
    hint = _hint(coll.key, _HINT_SETS, op, lits, exact=True)
    if op == "=" and lits[0].kind is FieldType.STRING:
        value = lits[0].value
        return (lambda row: value in elements(row)), hint
    return (lambda row: any(map(test, elements(row)))), hint


def _hint(key: str | None, fields: frozenset[str], op: str, lits: list[Lit], *, exact: bool) -> IndexHint | None:
    """The index hint of a comparison on a stored field (``exact``: its candidates are precisely its matches)."""
    if key not in fields or op not in ("=", "in") or any(lit.kind is not FieldType.STRING for lit in lits):
        return None
    assert key is not None
    return IndexHint(key, frozenset(lit.value for lit in lits), exact)
