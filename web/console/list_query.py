"""A console list's view as its URL says it: the API's filter language plus the simple name and role fields that
add to it, the sort, and the page, turned into the list parameters of the API (:class:`ListView`). Everything is in
the query string, so a view can be bookmarked and shared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.data.listing import ListParams
from controller.model.spec import Resource
from storage.zitiql import Symbol

__all__ = ["PAGE_SIZES", "ListView", "quoted"]

PAGE_SIZES = (10, 25, 50, 100, 200, 500)
DEFAULT_PAGE_SIZE = 25


def quoted(text: str) -> str:
    """``text`` as a string of the filter language."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _int(value: Any, default: int, lowest: int) -> int:
    try:
        return max(lowest, int(value))
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True, slots=True)
class ListView:
    """What a list shows.

    Attributes:
        filter: the filter typed in the API's language.
        name: rows whose name contains this (added to the filter).
        role: rows holding this role attribute (added to the filter, or the kind's ``roleFilter``).
        sort: the field the rows are sorted by ("" for the API's own order).
        descending: sorted from the greatest.
        limit: rows per page.
        offset: rows before the page.
    """

    filter: str = ""
    name: str = ""
    role: str = ""
    sort: str = ""
    descending: bool = False
    limit: int = DEFAULT_PAGE_SIZE
    offset: int = 0

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> ListView:
        """The view of a list URL's query parameters (unreadable numbers fall back to the defaults)."""
        limit = _int(args.get("limit"), DEFAULT_PAGE_SIZE, 1)
        return cls(filter=str(args.get("filter", "")).strip(), name=str(args.get("name", "")).strip(),
                   role=str(args.get("role", "")).strip().lstrip("#"), sort=str(args.get("sort", "")).strip(),
                   descending=args.get("order") == "desc", limit=limit if limit in PAGE_SIZES else DEFAULT_PAGE_SIZE,
                   offset=_int(args.get("offset"), 0, 0))

    def query(self, **changes: Any) -> dict[str, Any]:
        """This view's query parameters, with ``changes``; defaults are left out."""
        values = {"filter": self.filter, "name": self.name, "role": self.role, "sort": self.sort,
                  "order": "desc" if self.descending else "", "limit": self.limit, "offset": self.offset or ""}
        values.update(changes)
        if values["limit"] == DEFAULT_PAGE_SIZE:
            values["limit"] = ""
        return values

    def params(self, resource: Resource, symbols: Mapping[str, Symbol]) -> ListParams:
        """The API's list parameters for this view of ``resource`` (whose filters may name ``symbols``).

        The name and role fields are conjuncts added before the typed filter; a kind whose role attributes are
        no filter field (posture checks) takes the role as its ``roleFilter``.
        """
        conjuncts: list[str] = []
        if self.name:
            conjuncts.append(f"name contains {quoted(self.name)}")
        role_filter: Sequence[str] = ()
        if self.role and "roleAttributes" in symbols:
            conjuncts.append(f"anyOf(roleAttributes) = {quoted(self.role)}")
        elif self.role and resource.role_filter:
            role_filter = (f"#{self.role}",)
        if self.filter:
            conjuncts.append(f"({self.filter})" if conjuncts else self.filter)
        return ListParams(filter=" and ".join(conjuncts) or None,
                          sort=f"{self.sort} {'desc' if self.descending else 'asc'}" if self.sort else None,
                          limit=str(self.limit), offset=str(self.offset), role_filter=tuple(role_filter))

    def takes_role(self, resource: Resource, symbols: Mapping[str, Symbol]) -> bool:
        """Whether lists of ``resource`` offer the role field."""
        return "roleAttributes" in symbols or resource.role_filter
