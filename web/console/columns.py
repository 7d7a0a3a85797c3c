"""What the console's lists and detail pages show of a row, derived from the resource specs.

A list's columns (:func:`list_columns`) are the row's name (its id for a kind without names), the discriminator of
a kind with variants, and every field a filter can test that holds one value or a set (strings, numbers, booleans,
role attributes, role lists, references): what a filter can name is what a column can show and sort by. A detail
page (:func:`detail_entries`) shows every field the API answers with, in the spec's order, then what the kind's
``present`` hook adds. References are links to the row they name, role lists show names for ``@id`` entries, and
nested values are shown as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from controller.model.field import COMMON_FIELDS
from controller.model.spec import Resource
from storage.zitiql import FieldType, Symbol
from web.console.widgets import label_of

__all__ = ["Cell", "Column", "Entry", "cells", "detail_entries", "list_columns", "shown"]

_SHOWN = frozenset({FieldType.STRING, FieldType.NUMBER, FieldType.BOOL, FieldType.SET})
_SORTED = frozenset({FieldType.STRING, FieldType.NUMBER, FieldType.BOOL, FieldType.DATETIME})
_COMMON = frozenset(f.name for f in COMMON_FIELDS)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a kind's list.

    Attributes:
        field: the field's wire name (the sort key when ``sortable``).
        label: its header.
        sortable: the list sorts by it (a filter may name it, and it holds one value).
        shows: ``link`` (the row's name or id, linking to it), ``ref`` (the row a reference names, linking to it),
            ``roles`` (a role list, with names for ``@id``), or ``value``.
        ref_name: the answer's key for a reference's entity ref (``authPolicy`` for ``authPolicyId``).
    """

    field: str
    label: str
    sortable: bool
    shows: Literal["link", "ref", "roles", "value"] = "value"
    ref_name: str | None = None


@dataclass(frozen=True, slots=True)
class Cell:
    """What one cell shows, and where it links (None: nowhere)."""

    text: str
    href: str | None = None


def shown(value: Any) -> str:
    """One value as text: booleans as yes/no, lists joined with commas, nothing as an em dash, objects as JSON."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping) and isinstance(value.get("entity"), str):
        return str(value.get("name") or value.get("id"))
    if isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
        return ", ".join(str(item) for item in value)
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def list_columns(resource: Resource, symbols: Mapping[str, Symbol]) -> tuple[Column, ...]:
    """The columns of ``resource``'s list; ``symbols`` are what its filters may name (the sortable fields)."""
    named = resource.field("name") is not None
    def sortable(name: str) -> bool:
        return name in symbols and symbols[name].type in _SORTED

    columns = [Column("name" if named else "id", "Name" if named else "Id", True, "link")]
    if resource.variants is not None:
        name = resource.variants.discriminator
        columns.append(Column(name, label_of(name), sortable(name)))
    for f in resource.all_fields():
        if f.name in _COMMON or f.name == "name" or f.name.startswith("_") or f.name not in symbols:
            continue
        if f.ref is not None and f.ref_name is not None:
            columns.append(Column(f.name, label_of(f.ref_name), sortable(f.name), "ref", f.ref_name))
        elif f.roles is not None:
            columns.append(Column(f.name, label_of(f.name), False, "roles"))
        elif symbols[f.name].type in _SHOWN:
            columns.append(Column(f.name, label_of(f.name), sortable(f.name)))
    return tuple(columns)


def _ref_href(ref: Any) -> str | None:
    if isinstance(ref, Mapping) and ref.get("id") and isinstance(ref.get("entity"), str):
        return f"{ref['entity']}/{ref['id']}"
    return None


def cells(kind: str, columns: Sequence[Column], row: Mapping[str, Any]) -> list[Cell]:
    """The cells of one presented row; links are relative to the console's root (``identities/ID``)."""
    out: list[Cell] = []
    for column in columns:
        if column.shows == "link":
            out.append(Cell(str(row.get(column.field) or row.get("id")), f"{kind}/{row['id']}"))
        elif column.shows == "ref":
            ref = row.get(column.ref_name or "")
            out.append(Cell(shown(ref) if ref else shown(row.get(column.field)), _ref_href(ref)))
        elif column.shows == "roles":
            display = row.get(f"{column.field}Display")
            names = [str(d.get("name")) for d in display] if isinstance(display, list) else row.get(column.field)
            out.append(Cell(shown(names)))
        else:
            out.append(Cell(shown(row.get(column.field))))
    return out


@dataclass(frozen=True, slots=True)
class Entry:
    """One field of a detail page: its label, its text (or JSON, shown preformatted) and a link, if any."""

    name: str
    label: str
    text: str
    href: str | None = None
    block: bool = False


def _entry(name: str, value: Any) -> Entry:
    href = _ref_href(value)
    if isinstance(value, dict | list) and href is None and not (
            isinstance(value, list) and all(isinstance(item, str | int | float) for item in value)):
        return Entry(name, label_of(name), json.dumps(value, indent=2, sort_keys=True) if value else "—",
                     block=bool(value))
    return Entry(name, label_of(name), shown(value), href)


def detail_entries(resource: Resource, row: Mapping[str, Any]) -> list[Entry]:
    """Every field of a presented row: the spec's fields in order (a reference as the row it names, a role list
    with names), then the fields the kind's ``present`` hook adds, in the answer's order."""
    entries: list[Entry] = []
    seen = {"_links"}
    for f in resource.all_fields():
        if f.name.startswith("_") or f.name not in row:
            continue
        seen.add(f.name)
        value = row[f.name]
        if f.ref is not None and f.ref_name is not None:
            seen.add(f.ref_name)
            ref = row.get(f.ref_name)
            entries.append(Entry(f.name, label_of(f.ref_name), shown(ref or value), _ref_href(ref)))
        elif f.roles is not None:
            seen.add(f"{f.name}Display")
            display = row.get(f"{f.name}Display")
            names = [str(d.get("name")) for d in display] if isinstance(display, list) else value
            entries.append(Entry(f.name, label_of(f.name), shown(names)))
        else:
            entries.append(_entry(f.name, value))
    entries.extend(_entry(name, value) for name, value in row.items() if name not in seen)
    return entries
