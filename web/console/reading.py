"""What the console's pages read from the store beyond one list or one row, through the domain facade's snapshots:
the rows and role attributes a form offers (:class:`StoreChoices`), who refers to a row about to be deleted
(:func:`references_to`), and every row of a kind as the API lists them (:class:`DomainRows`, what planning an
apply reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.access.policy_links import selecting_policy_ids
from controller.data.domain import Domain
from controller.data.present import present
from controller.model.registry import Registry

__all__ = ["MAX_OFFERED", "DomainRows", "Referrer", "StoreChoices", "references_to"]

MAX_OFFERED = 200
"""A form offers the rows of a kind as choices up to this many; past that, their names or ids are typed."""
MAX_SHOWN_REFERRERS = 50
"""A delete's confirmation names at most this many rows per way they refer to the row (and counts them all)."""


class StoreChoices:
    """The :class:`web.console.form_values.Choices` of one request, read from the domain (each kind once)."""

    def __init__(self, domain: Domain) -> None:
        self._domain = domain
        self._rows: dict[str, list[tuple[str, str]] | None] = {}
        self._attributes: dict[str, list[str]] = {}

    def rows(self, kind: str) -> list[tuple[str, str]] | None:
        if kind not in self._rows:
            with self._domain.read() as ctx:
                if ctx.txn.count(kind) > MAX_OFFERED:
                    self._rows[kind] = None
                else:
                    found = [(str(row["id"]), str(row.get("name") or "")) for row in
                             ctx.txn.scan(kind, frozenset({"id", "name"}))]
                    self._rows[kind] = sorted(found, key=lambda item: (item[1].lower(), item[0]))
        return self._rows[kind]

    def attributes(self, kind: str) -> list[str]:
        if kind not in self._attributes:
            resource = self._domain.registry[kind]
            self._attributes[kind] = (self._domain.role_attributes(kind, None)[0]
                                      if resource.role_attributes_path else [])
        return self._attributes[kind]

    def resolve(self, kind: str, text: str) -> str | None:
        with self._domain.read() as ctx:
            if ctx.txn.exists(kind, text):
                return text
            if self._domain.registry[kind].field("name") is None:
                return None
            return ctx.txn.by_unique(kind, "name", text)


@dataclass(frozen=True, slots=True)
class Referrer:
    """Rows of one kind that refer to the row about to be deleted, one way.

    Attributes:
        kind: their kind.
        how: how they refer to it, and what the delete does to them.
        rows: ``(id, name)`` of the first :data:`MAX_SHOWN_REFERRERS` of them.
        count: how many there are.
    """

    kind: str
    how: str
    rows: tuple[tuple[str, str], ...]
    count: int


_ON_DELETE = {"refuse": "the delete is refused while it does", "cascade": "deleted with it",
              "nullify": "the reference is cleared"}


def references_to(domain: Domain, kind: str, row_id: str) -> list[Referrer]:
    """Every row that refers to the row ``row_id`` of ``kind``, by the ways the registry knows: a reference field
    (with what its ``on_delete`` makes the delete do), an id list, a role list that selects it (by ``#all``, an
    attribute or ``@id``: the role list stays as it is, the row simply leaves its selection)."""
    registry: Registry = domain.registry
    found: list[Referrer] = []
    with domain.read() as ctx:
        row = ctx.txn.get(kind, row_id)
        if row is None:
            return []

        def add(referring: str, how: str, ids: list[str]) -> None:
            if ids:
                shown = ctx.txn.get_many(referring, sorted(ids)[:MAX_SHOWN_REFERRERS], frozenset({"id", "name"}))
                found.append(Referrer(referring, how, tuple((str(r["id"]), str(r.get("name") or r["id"]))
                                                            for r in shown), len(ids)))

        for resource, f in registry.referencing_fields(kind):
            add(resource.kind, f"{f.name} names it: {_ON_DELETE.get(f.on_delete, f.on_delete)}",
                ctx.txn.ids_by_ref(resource.kind, f.name, row_id))
        for resource in registry.resources.values():
            for f in resource.all_fields():
                if f.ids_of == kind:
                    holders = ctx.txn.scan(resource.kind, frozenset({"id", f.name}))
                    add(resource.kind, f"{f.name} holds its id", [str(r["id"]) for r in holders
                                                                  if _holds(r.get(f.name), row_id)])
        for resource, f in registry.role_fields(kind):
            add(resource.kind, f"{f.name} selects it; the role list stays as it is",
                list(selecting_policy_ids(ctx, resource.kind, kind, row)))
    return found


def _holds(value: Any, row_id: str) -> bool:
    return isinstance(value, list | dict) and row_id in value


class DomainRows:
    """:class:`controller.admin.export.ModelRows` over the controller's own domain: every row of a kind as
    ``GET /{kind}`` presents it, read in one snapshot per kind."""

    def __init__(self, domain: Domain) -> None:
        self._domain = domain

    def list_all(self, kind: str) -> list[dict[str, Any]]:
        resource = self._domain.registry[kind]
        with self._domain.read() as ctx:
            return [present(ctx, resource, row) for row in ctx.txn.scan(kind)]

