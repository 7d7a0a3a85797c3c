"""The pages every kind of the Management API has in the console: its list, a row's detail, and the row's
association lists (``GET /{kind}/{id}/{path}`` of the API), each paged without an upper bound.

Lists read through :meth:`controller.data.domain.Domain.list_page`, the call ``GET /{kind}`` makes, with the view
of the URL (:class:`web.console.list_query.ListView`); a filter or sort the API refuses shows the API's message
beside the filter. Detail pages read :meth:`~controller.data.domain.Domain.detail`, the answer of
``GET /{kind}/{id}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quart import Blueprint, Response, request

from controller.errors import ApiError, not_found
from controller.model.spec import Resource
from controller.runtime.composition import Controller
from web.console.columns import Cell, Column, cells, detail_entries, list_columns
from web.console.list_query import PAGE_SIZES, ListView
from web.console.rendering import api_message, htmx_target, page, query_url

__all__ = ["DetailPage", "Listing", "detail_context", "kind_label", "list_rows", "register"]

ASSOCIATION_PREVIEW = 10
"""A detail page shows this many rows of each association list, and links to the whole list."""


def kind_label(kind: str) -> str:
    """``service-policies`` as ``Service policies``."""
    text = kind.replace("-", " ")
    return text[:1].upper() + text[1:]


@dataclass(frozen=True, slots=True)
class Listing:
    """One page of a list, ready for the template."""

    kind: str
    columns: tuple[Column, ...]
    rows: list[list[Cell]]
    total: int
    view: ListView
    error: str
    base: str

    @property
    def first(self) -> int:
        return min(self.view.offset + 1, self.total) if self.total else 0

    @property
    def last(self) -> int:
        return min(self.view.offset + len(self.rows), self.total)

    def url(self, **changes: Any) -> str:
        return query_url(self.base, self.view.query(**changes))

    def sort_url(self, column: Column) -> str:
        """Sorting by ``column``: ascending first, then the other way."""
        again = self.view.sort == column.field and not self.view.descending
        return self.url(sort=column.field, order="desc" if again else "", offset="")

    def aria_sort(self, column: Column) -> str | None:
        if self.view.sort != column.field:
            return None
        return "descending" if self.view.descending else "ascending"

    @property
    def previous_url(self) -> str | None:
        return self.url(offset=max(0, self.view.offset - self.view.limit)) if self.view.offset else None

    @property
    def next_url(self) -> str | None:
        return self.url(offset=self.view.offset + self.view.limit) if self.last < self.total else None


def list_rows(controller: Controller, resource: Resource, view: ListView, base: str,
              candidates: Iterable[str] | None = None) -> Listing:
    """A page of ``resource``'s rows (only ``candidates``, for an association) as the view asks; an API error
    becomes the listing's ``error``, with no rows."""
    symbols = controller.registry.symbols(resource.kind)
    columns = list_columns(resource, symbols)
    try:
        data, meta = controller.domain.list_page(resource.kind, view.params(resource, symbols), candidates)
    except ApiError as refused:
        return Listing(resource.kind, columns, [], 0, view, api_message(refused), base)
    total = int(meta.get("pagination", {}).get("totalCount", len(data)))
    return Listing(resource.kind, columns, [cells(resource.kind, columns, row) for row in data], total, view, "", base)


def _related(controller: Controller, kind: str, row_id: str, path: str) -> tuple[Resource, set[str]]:
    """The target kind of the association ``path`` of row ``row_id``, and the ids it relates the row to."""
    association = next((a for a in controller.registry.associations(kind) if a.path == path), None)
    if association is None:
        raise ApiError("NOT_FOUND")
    with controller.domain.read() as ctx:
        row = ctx.txn.get(kind, row_id)
        if row is None:
            raise not_found(controller.registry[kind].singular, row_id)
        return controller.registry[association.target], association.resolve(ctx, row)


DetailPage = Callable[[str], Awaitable[Response]]
"""A kind's own detail page (the identity's), given the row's id."""


def register(bp: Blueprint, controller: Controller, kinds: Sequence[str],
             own_details: Mapping[str, DetailPage]) -> None:
    """Add the list, detail and association pages of every kind in ``kinds`` to the console's blueprint; a kind of
    ``own_details`` shows its rows with its own page."""
    registry = controller.registry
    kind_rule = "<any(" + ", ".join(f'"{kind}"' for kind in kinds) + "):kind>"

    async def listing_page(listing: Listing, title: str, **context: Any) -> Response:
        status = 400 if listing.error else 200
        template = "results.html" if htmx_target() == "results" else "list.html"
        return await page(template, status, title=title, listing=listing, page_sizes=PAGE_SIZES,
                          label=kind_label, **context)

    @bp.get(f"/{kind_rule}")
    async def list_page(kind: str) -> Response:
        resource = registry[kind]
        view = ListView.from_args(request.args)
        symbols = registry.symbols(kind)
        return await listing_page(list_rows(controller, resource, view, f"/console/{kind}"), kind_label(kind),
                                  resource=resource, takes_name="name" in symbols,
                                  takes_role=view.takes_role(resource, symbols), owner=None)

    @bp.get(f"/{kind_rule}/<id>")
    async def detail_page(kind: str, id: str) -> Response:
        own = own_details.get(kind)
        if own is not None:
            return await own(id)
        return await page("detail.html", **detail_context(controller, kind, id))

    @bp.get(f"/{kind_rule}/<id>/<path>")
    async def association_page(kind: str, id: str, path: str) -> Response:
        resource = registry[kind]
        target, ids = _related(controller, kind, id, path)
        row = controller.domain.detail(kind, id)
        view = ListView.from_args(request.args)
        listing = list_rows(controller, target, view, f"/console/{kind}/{id}/{path}", ids)
        return await listing_page(listing, f"{kind_label(path)} of {_title(resource, row)}", resource=target,
                                  takes_name=False, takes_role=False,
                                  owner=(kind, id, _title(resource, row), path))


def detail_context(controller: Controller, kind: str, row_id: str) -> dict[str, Any]:
    """What ``detail.html`` shows of one row: every field (as ``GET /{kind}/{id}`` answers) and the first rows of
    each association list.

    Raises:
        ApiError: 404 NOT_FOUND when the row does not exist.
    """
    registry = controller.registry
    resource = registry[kind]
    row = controller.domain.detail(kind, row_id)
    previews = []
    for association in registry.associations(kind):
        target, ids = _related(controller, kind, row_id, association.path)
        previews.append((association.path, list_rows(controller, target, ListView(limit=ASSOCIATION_PREVIEW),
                                                     f"/console/{kind}/{row_id}/{association.path}", ids)))
    return {"title": _title(resource, row), "resource": resource, "row": row,
            "entries": detail_entries(resource, row), "previews": previews, "label": kind_label}


def _title(resource: Resource, row: Mapping[str, Any]) -> str:
    return str(row.get("name") or row.get("id"))
