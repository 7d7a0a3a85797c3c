"""Resolving a filter's field path against a kind's symbols: a plain field, a key of a map field, or one field
across the rows of a related kind (``servicePolicies.name``). A filter's type errors about a field start here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storage.zitiql.model import FieldType, QueryError, Symbol
from storage.zitiql.values import Getter, Row, as_sequence, map_getter

__all__ = [
    "WRAP_HELP",
    "Collection",
    "MapRef",
    "Related",
    "Resolved",
    "Scalar",
    "as_collection",
    "as_scalar",
    "resolve_path",
    "resolve_sort_field",
]

WRAP_HELP = "must be used with anyOf(), allOf(), count() or isEmpty()"


@dataclass(frozen=True, slots=True)
class Scalar:
    """One value per row. ``key`` is the row key when the value is read with a plain ``row.get``."""

    name: str
    vtype: FieldType | None  # None: typed at run time (map values)
    get: Getter
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Collection:
    """Many values per row (a set field, or one field across related rows)."""

    name: str
    elem_type: FieldType | None
    elements: Callable[[Row], Sequence[Any]]
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Related:
    name: str
    rows: Callable[[Row], Iterable[Row]]
    symbols: Mapping[str, Symbol]


@dataclass(frozen=True, slots=True)
class MapRef:
    name: str


Resolved = Scalar | Collection | Related | MapRef


def _row_getter(key: str) -> Getter:
    return lambda row: row.get(key)


def _from_symbol(name: str, sym: Symbol) -> Resolved:
    get = sym.getter or _row_getter(name)
    key = None if sym.getter else name
    if sym.type is FieldType.SET:
        if key is not None:
            # Stored sets are lists; reading the row directly saves a call per row on the commonest set filters.
            return Collection(
                name, None, lambda row: v if (v := row.get(name)).__class__ is list else as_sequence(v), key
            )
        return Collection(name, None, lambda row: as_sequence(get(row)), key)
    if sym.type is FieldType.MAP:
        return MapRef(name)
    if sym.type is FieldType.SUBQUERY:
        if sym.related is None:
            raise QueryError(f"symbol '{name}' has no related rows")
        return Related(name, sym.related, sym.related_symbols or {})
    return Scalar(name, sym.type, get, key)


def resolve_path(path: str, symbols: Mapping[str, Symbol]) -> Resolved:
    """Finds ``path`` in ``symbols``: exact names first, then ``<map>.<key>`` and ``<subquery>.<field>``."""
    sym = symbols.get(path)
    if sym is not None:
        return _from_symbol(path, sym)
    parts = path.split(".")
    # Longest known prefix wins, so a symbol table may define dotted names (``type.name``) of its own.
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        sym = symbols.get(head)
        if sym is None:
            continue
        if sym.type is FieldType.MAP:
            return Scalar(path, None, map_getter(sym.getter or _row_getter(head), parts[cut:]))
        if sym.type is FieldType.SUBQUERY:
            related = _from_symbol(head, sym)
            assert isinstance(related, Related)
            return _through(path, related, ".".join(parts[cut:]))
        break
    raise QueryError(f"unknown symbol '{path}'")


def _through(path: str, related: Related, rest: str) -> Collection:
    """``servicePolicies.name``: the values of one field over all related rows, as a set."""
    try:
        inner = resolve_path(rest, related.symbols)
    except QueryError:
        raise QueryError(f"unknown symbol '{path}'") from None
    rows = related.rows
    if isinstance(inner, Scalar):
        get = inner.get
        return Collection(path, inner.vtype, lambda row: [v for r in rows(row) if (v := get(r)) is not None])
    if isinstance(inner, Collection):
        elements = inner.elements
        return Collection(path, inner.elem_type, lambda row: [v for r in rows(row) for v in elements(r)])
    raise QueryError(f"symbol '{path}' cannot be used here")


def as_scalar(resolved: Resolved) -> Scalar:
    if isinstance(resolved, Scalar):
        return resolved
    if isinstance(resolved, MapRef):
        raise QueryError(f"'{resolved.name}' is a map field; compare one of its keys, e.g. {resolved.name}.<key>")
    raise QueryError(f"'{resolved.name}' is a set field and {WRAP_HELP}")


def as_collection(resolved: Resolved, func: str) -> Collection:
    if isinstance(resolved, Collection):
        return resolved
    if isinstance(resolved, Related):
        rows = resolved.rows
        # A related kind used as a set stands for the ids of its rows, as in ``anyOf(services) = "<id>"``.
        return Collection(resolved.name, FieldType.STRING, lambda row: [r.get("id") for r in rows(row)])
    raise QueryError(f"{func}() needs a set field, but '{resolved.name}' is not a set")


def resolve_sort_field(name: str, symbols: Mapping[str, Symbol]) -> Scalar:
    """Resolves a sort field; raises :class:`QueryError` for unknown, set, map and subquery fields."""
    resolved = resolve_path(name, symbols)
    if isinstance(resolved, Scalar):
        return resolved
    kind = "map" if isinstance(resolved, MapRef) else "set"
    raise QueryError(f"cannot sort by {kind} field '{name}'")
