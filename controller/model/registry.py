"""The resource registry: every kind's spec, and what derives from them all (storage layout, filter symbols).

Kinds that are not client-writable resources but still live in storage (API sessions, MFA records...) register a
bare :class:`storage.store.KindLayout` through ``internal``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from controller.model.field import Field
from controller.model.spec import Association, Resource
from storage.store import KindLayout
from storage.zitiql import FieldType, Symbol

__all__ = ["Registry"]


class Registry:
    """All resource specs, keyed by kind (the collection path segment)."""

    def __init__(self, resources: Iterable[Resource], internal: Iterable[KindLayout] = (),
                 associations: Mapping[str, Iterable[Association]] | None = None) -> None:
        self.resources: dict[str, Resource] = {}
        for resource in resources:
            if resource.kind in self.resources:
                raise ValueError(f"kind {resource.kind} registered twice")
            self.resources[resource.kind] = resource
        self.internal = {layout.kind: layout for layout in internal}
        self._associations: dict[str, tuple[Association, ...]] = {}
        for kind, lists in (associations or {}).items():
            for association in lists:
                if kind not in self.resources or association.target not in self.resources:
                    raise ValueError(f"association {kind}/{association.path} names an unknown kind")
            self._associations[kind] = tuple(lists)
        # Every delete asks who refers to the kind; the specs never change after start, so answer once per kind.
        self._referencing: dict[str, list[tuple[Resource, Field]]] = {}
        self._role_fields: dict[str, list[tuple[Resource, Field]]] = {}

    def associations(self, kind: str) -> tuple[Association, ...]:
        """The ``GET /{kind}/{id}/{path}`` lists of a kind: its spec's own plus those registered centrally."""
        return self.resources[kind].associations + self._associations.get(kind, ())

    def __getitem__(self, kind: str) -> Resource:
        return self.resources[kind]

    def __contains__(self, kind: object) -> bool:
        return kind in self.resources

    @cached_property
    def access_kinds(self) -> frozenset[str]:
        """Kinds whose rows decide what identities may use (``Resource.shapes_access``)."""
        return frozenset(kind for kind, resource in self.resources.items() if resource.shapes_access)

    def layouts(self) -> list[KindLayout]:
        """Storage layout of every kind, derived from field flags."""
        layouts = list(self.internal.values())
        for resource in self.resources.values():
            fields = resource.all_fields()
            layouts.append(KindLayout(
                kind=resource.kind,
                unique=tuple(f.name for f in fields if f.unique),
                sets=tuple(f.name for f in fields if f.indexed_set or f.roles),
                refs=tuple(f.name for f in fields if f.ref),
                composites=resource.indexes,
                watched=resource.shapes_access,
            ))
        return layouts

    def symbols(self, kind: str) -> Mapping[str, Symbol]:
        """Filterable fields of a kind, as the query engine's symbol table."""
        return self._symbols[kind]

    @cached_property
    def _symbols(self) -> dict[str, dict[str, Symbol]]:
        table: dict[str, dict[str, Symbol]] = {}
        for kind, resource in self.resources.items():
            symbols = {f.name: Symbol(f.filter) for f in resource.all_fields() if f.filter is not None}
            symbols.setdefault("isSystem", Symbol(FieldType.BOOL, getter=_is_system))
            symbols.update(resource.extra_filter_fields)
            table[kind] = symbols
        return table

    def referencing_fields(self, kind: str) -> list[tuple[Resource, Field]]:
        """Every (resource, field) whose field holds an id of ``kind``. Do not mutate the list."""
        found = self._referencing.get(kind)
        if found is None:
            found = self._referencing[kind] = [(r, f) for r in self.resources.values() for f in r.all_fields()
                                               if f.ref == kind]
        return found

    def role_fields(self, kind: str) -> list[tuple[Resource, Field]]:
        """Every (resource, field) that is a role selector over ``kind``. Do not mutate the list."""
        found = self._role_fields.get(kind)
        if found is None:
            found = self._role_fields[kind] = [(r, f) for r in self.resources.values() for f in r.all_fields()
                                               if f.roles == kind]
        return found


def _is_system(row: Mapping[str, Any]) -> bool:
    return bool(row.get("isSystem", False))
