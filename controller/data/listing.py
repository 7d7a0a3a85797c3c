"""List queries: filter, roleFilter, sort, paging and the list ``meta`` block.

Candidate rows come from the narrowest source available (an association's ids, a roleFilter selection, or an index
hint from the filter) before the compiled predicate runs, so filters on indexed fields do not scan a whole kind
(except a role attribute that half the kind or more holds, where one pass costs less: ``_candidates_from_hint``).
The predicate and the sort see only the stored fields they read (``Query.fields``), decoded from each candidate;
only the page's rows are read whole. A page with neither filter nor sort reads nothing but its own rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.access.roles import parse_semantic, require_role_filter_entries, select_ids
from controller.errors import ApiError, field_cause, nested_cause
from controller.model.spec import ReadContext, Resource
from storage.zitiql import (
    IndexHint,
    Query,
    QueryError,
    SortError,
    SortKey,
    Symbol,
    compile_filter,
    order_rows,
    parse_sort,
    stored_fields,
)

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_UNLIMITED", "ListParams", "Page", "list_rows", "list_values",
           "page_values"]

DEFAULT_LIMIT = 10
MAX_LIMIT = 500
MAX_OFFSET = 100_000
MAX_UNLIMITED = 10_000
"""The most rows ``limit=-1`` (all of them) answers; a longer list is paged with limit and offset instead."""
NO_LIMIT = 9223372036854775807
_ID_ONLY = frozenset({"id"})


@dataclass(frozen=True, slots=True)
class ListParams:
    """The raw list query parameters of a request."""

    filter: str | None = None
    sort: str | None = None
    limit: str | None = None
    offset: str | None = None
    role_filter: tuple[str, ...] = ()
    role_semantic: str | None = None


@dataclass(slots=True)
class Page:
    """One page of rows and the ``meta`` block that describes it."""

    rows: list[Mapping[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)


def _int_param(name: str, raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError("INVALID_PAGINATION", field_cause(name, f"{name} must be an integer", raw)) from None


def compile_query(text: str | None, symbols: Mapping[str, Symbol]) -> Query:
    try:
        return compile_filter(text, symbols)
    except QueryError as exc:
        raise ApiError("INVALID_FILTER", nested_cause(exc.message)) from None


def _hinted(ctx: ReadContext, kind: str, hint: IndexHint, unique: set[str],
            only_narrowing: bool) -> tuple[frozenset[str], list[str]] | None:
    """:func:`_candidates_from_hint`, as a set and in id order, remembered while ``kind`` is not written."""
    memo = ctx.txn.kind_memo(kind)
    key = ("hint", hint, only_narrowing)
    if memo is not None and key in memo:
        found: tuple[frozenset[str], list[str]] | None = memo[key]
        return found
    ids = _candidates_from_hint(ctx, kind, hint, unique, only_narrowing)
    found = None if ids is None else (frozenset(ids), sorted(ids))
    if memo is not None and _room(memo, 1 + (len(ids) if ids is not None else 0)):
        memo[key] = found
    return found


def _candidates_from_hint(ctx: ReadContext, kind: str, hint: IndexHint, unique: set[str],
                          only_narrowing: bool) -> set[str] | None:
    """The rows an index gives for ``hint``, or None to read the whole kind instead.

    With ``only_narrowing``, a role-attribute hint that would select half the kind or more gives None: reading
    those candidates one by one costs about 1.7 times as much per row as one pass over the kind (measured: a
    filter matching 10k of 10k identities, 229M instructions through the index, 132M in one pass), so the index
    pays only when it leaves out most rows. The count sums each value's rows, so a row holding two of them counts
    twice: an overestimate that only ever chooses the pass.
    """
    if hint.field == "id":
        return set(hint.values)
    if hint.field in unique:
        found = (ctx.txn.by_unique(kind, hint.field, v) for v in hint.values)
        return {i for i in found if i is not None}
    if hint.field == "roleAttributes":
        if only_narrowing and sum(ctx.txn.count_by_set(kind, hint.field, v)
                                  for v in hint.values) * 2 >= ctx.txn.count(kind):
            return None
        return {i for v in hint.values for i in ctx.txn.ids_by_set(kind, hint.field, v)}
    return None


def page_values(query_limit: int | None, query_skip: int | None, params: ListParams) -> tuple[int, int]:
    """Effective (limit, offset): the filter's own ``limit``/``skip`` win; -1 means no limit."""
    limit = query_limit if query_limit is not None else _int_param("limit", params.limit)
    offset = query_skip if query_skip is not None else _int_param("offset", params.offset)
    if limit is None or limit == 0 or limit < -1:
        limit = DEFAULT_LIMIT
    elif limit > MAX_LIMIT:
        limit = MAX_LIMIT
    offset = 0 if offset is None or offset < 0 else min(offset, MAX_OFFSET)
    return limit, offset


def list_rows(ctx: ReadContext, resource: Resource, params: ListParams,
              candidates: Iterable[str] | None = None, symbols: Mapping[str, Symbol] | None = None) -> Page:
    """Filter, sort and page the rows of ``resource`` (only ``candidates`` when given); ``symbols`` narrows what a
    filter or sort may name (the kind's whole symbol table by default)."""
    symbols = ctx.registry.symbols(resource.kind) if symbols is None else symbols
    query, sort, limit, offset = _parsed(params, symbols)
    ids: set[str] | frozenset[str] | None = set(candidates) if candidates is not None else None
    if params.role_filter:
        require_role_filter_entries(params.role_filter)
        semantic = parse_semantic(params.role_semantic)
        selected = select_ids(ctx.txn, resource.kind, params.role_filter, semantic, all_special=False)
        ids = selected if ids is None else ids & selected
    elif params.role_semantic is not None:
        parse_semantic(params.role_semantic)
    ordered_ids: list[str] | None = None  # ``ids`` in id order, when known already
    predicate = query.predicate
    if query.index_hint is not None:
        unique = {f.name for f in resource.all_fields() if f.unique}
        hinted = _hinted(ctx, resource.kind, query.index_hint, unique, only_narrowing=ids is None)
        if hinted is not None:
            if ids is None:
                ids, ordered_ids = hinted
            else:
                ids = ids & hinted[0]
            if query.residual is not None:
                # Every candidate satisfies the conjunct the index answered: only the others are left to check.
                predicate = query.residual
    page_size = None if limit == -1 else limit
    window: Sequence[Mapping[str, Any]]
    if ids is None and not query.has_condition and not sort:
        # Plain paging: the count is the table's, the page a slice of its keys; only the page's rows are read.
        total = ctx.txn.count(resource.kind)
        _check_unlimited(page_size, total - offset)
        window = ctx.txn.get_many(resource.kind, ctx.txn.ids(resource.kind, offset, page_size))
    else:
        fields = _read_fields(query, sort, symbols)
        rows = _candidate_rows(ctx, resource.kind, ids, ordered_ids, fields)
        matched = [row for row in rows if predicate(row)]
        ordered: Sequence[Mapping[str, Any]] = order_rows(matched, sort, symbols) if sort else matched
        window = ordered[offset:] if page_size is None else ordered[offset:offset + page_size]
        total = len(matched)
        _check_unlimited(page_size, len(window))
        if fields is not None:
            # The filter saw only the fields it reads; the page's rows are read whole.
            window = ctx.txn.get_many(resource.kind, [row["id"] for row in window])
    return Page(list(window), _meta(symbols, limit, offset, total))


def list_values(rows: Sequence[Mapping[str, Any]], params: ListParams, symbols: Mapping[str, Symbol]) -> Page:
    """Filter, sort and page ``rows`` that are not stored (answers made on the fly) as :func:`list_rows` pages a
    kind: the same parameters, errors and ``meta``."""
    query, sort, limit, offset = _parsed(params, symbols)
    matched = [row for row in rows if query.predicate(row)]
    ordered: Sequence[Mapping[str, Any]] = order_rows(matched, sort, symbols) if sort else matched
    window = ordered[offset:] if limit == -1 else ordered[offset:offset + limit]
    _check_unlimited(None if limit == -1 else limit, len(window))
    return Page(list(window), _meta(symbols, limit, offset, len(matched)))


def _parsed(params: ListParams, symbols: Mapping[str, Symbol]) -> tuple[Query, Sequence[SortKey], int, int]:
    """The compiled filter, the sort (the filter's own, else ``sort``), and the effective limit and offset.

    Raises:
        ApiError: INVALID_FILTER, INVALID_SORT_IDENTIFIER or INVALID_PAGINATION.
    """
    query = compile_query(params.filter, symbols)
    limit, offset = page_values(query.limit, query.skip, params)
    sort: Sequence[SortKey] = query.sort
    if not sort and params.sort:
        try:
            sort = parse_sort(params.sort, symbols)
        except SortError as exc:
            raise ApiError("INVALID_SORT_IDENTIFIER", nested_cause(exc.message)) from None
    return query, sort, limit, offset


def _meta(symbols: Mapping[str, Symbol], limit: int, offset: int, total: int) -> dict[str, Any]:
    return {"filterableFields": sorted(symbols),
            "pagination": {"limit": NO_LIMIT if limit == -1 else limit, "offset": offset, "totalCount": total}}


def _check_unlimited(page_size: int | None, rows: int) -> None:
    """An answer to ``limit=-1`` holds at most :data:`MAX_UNLIMITED` rows (one list must not hold the whole
    process's memory and time); past that, 400 INVALID_PAGINATION says to page."""
    if page_size is None and rows > MAX_UNLIMITED:
        raise ApiError("INVALID_PAGINATION", nested_cause(
            f"limit -1 answers at most {MAX_UNLIMITED} rows and this list has {rows} from the offset; "
            "page it with limit (at most 500) and offset"))


def _read_fields(query: Query, sort: Sequence[SortKey], symbols: Mapping[str, Symbol]) -> frozenset[str] | None:
    """The stored fields that filtering and ordering read, with ``id``; ``None`` when they need whole rows."""
    if query.fields is None:
        return None
    extra = stored_fields((key.field for key in sort), symbols)
    return None if extra is None else query.fields | extra | {"id"}


def _candidate_rows(ctx: ReadContext, kind: str, ids: set[str] | frozenset[str] | None,
                    ordered_ids: list[str] | None, fields: frozenset[str] | None) -> Iterable[Mapping[str, Any]]:
    """The rows to filter (only ``fields`` of each, when given), in id byte order (``ordered_ids``: ``ids`` in
    that order, when known)."""
    if fields == _ID_ONLY:
        # Nothing but ids to read: the keys alone (an existence check per candidate) instead of decoding rows.
        present_ids = ctx.txn.ids(kind) if ids is None else [i for i in sorted(ids) if ctx.txn.exists(kind, i)]
        return ({"id": row_id} for row_id in present_ids)
    if fields is None:
        return ctx.txn.scan(kind) if ids is None else ctx.txn.get_many(kind, sorted(ids))
    ordered = ordered_ids if ordered_ids is not None or ids is None else sorted(ids)
    return _projected_rows(ctx, kind, ordered, fields)


REMEMBERED_ROWS_LIMIT = 250_000
"""The most rows and ids a kind's memo remembers for lists, over every field set and index hint together
(:func:`_projected_rows`, :func:`_hinted`); past that, lists decode and look up per request."""
_REMEMBERED = ("remembered rows",)


def _room(memo: dict[Any, Any], count: int) -> bool:
    """Whether the kind's memo may remember ``count`` more rows or ids (and, if so, count them)."""
    used: int = memo.get(_REMEMBERED, 0)
    if used + count > REMEMBERED_ROWS_LIMIT:
        return False
    memo[_REMEMBERED] = used + count
    return True


def _projected_rows(ctx: ReadContext, kind: str, ordered_ids: list[str] | None,
                    fields: frozenset[str]) -> list[Mapping[str, Any]]:
    """The ``fields`` of the rows ``ordered_ids`` (every row of the kind when None), in that order.

    Decoded once and remembered in the kind's memo (``ReadTxn.kind_memo``) until the kind is next written: a
    filter reads the same fields of the same rows on every request. The rows handed out are shared: a predicate
    and a sort only read them (the page's rows are read whole anew)."""
    txn = ctx.txn
    memo = txn.kind_memo(kind)
    if memo is None:
        return list(txn.scan(kind, fields) if ordered_ids is None else txn.get_many(kind, ordered_ids, fields))
    if ordered_ids is None:
        key = ("scan", fields)
        every: list[Mapping[str, Any]] | None = memo.get(key)
        if every is None:
            every = list(txn.scan(kind, fields))
            if _room(memo, len(every)):
                memo[key] = every
        return every
    known: dict[str, Mapping[str, Any] | None] = memo.setdefault(("rows", fields), {})
    rows: list[Mapping[str, Any]] = []
    missing: list[str] = []
    for row_id in ordered_ids:
        row = known.get(row_id, _UNKNOWN)
        if row is _UNKNOWN:
            missing.append(row_id)
        elif row is not None:
            rows.append(row)
    if not missing:
        return rows
    # Some rows were never read: read them, remember them (None for an id that has no row), then answer in order.
    found = {str(row["id"]): row for row in txn.get_many(kind, missing, fields)}
    if _room(memo, len(missing)):
        for row_id in missing:
            known[row_id] = found.get(row_id)
    rows = []
    for row_id in ordered_ids:
        row = found.get(row_id) or known.get(row_id)
        if row is not None:
            rows.append(row)
    return rows


_UNKNOWN: Any = object()
