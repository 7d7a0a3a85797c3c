"""What a controller holds, in the model file's terms: the current state ``tollgate apply`` plans against and
``tollgate export`` writes, and how a model is written as a file (:func:`dump_model`).

Rows of the Management API become canonical entities (see :mod:`controller.admin.model_file`): ids in references
become names, server-managed fields are dropped. Some rows belong to the controller rather than to the operator's
model, and a new controller makes them by itself, so they stay out of exports and plans:

* the default admin identity (``isDefaultAdmin``), and any row the controller marks ``isSystem`` (its system edge
  router policies...), except config types: these are *reserved*. Files may refer to them by name but not define
  them, and ``--prune`` never deletes them;
* config types named as those a new controller seeds (``intercept.v1``, ``host.v1``, ``host.v2``,
  ``ziti-tunneler-client.v1``, ``ziti-tunneler-server.v1``) are *built in*: exported only when they differ from
  the seeded form (its schema, no tags), never deleted by ``--prune``; a file may define them, which updates them.

So an export applied to a new controller and exported again gives the same text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from controller.admin.model_format import (
    KIND_ORDER,
    KINDS,
    LOOKUP_KINDS,
    REQUIRED,
    Entity,
    FieldSpec,
    Model,
    entity_fields,
)
from controller.resources.seeded_config_types import SEEDED_CONFIG_TYPES

__all__ = ["BUILTIN", "Current", "ModelRows", "current_from_rows", "dump_model", "read_current"]

BUILTIN: Model = {"config-types": {str(seeded["name"]): {"name": seeded["name"], "schema": seeded["schema"], "tags": {}}
                                   for seeded in SEEDED_CONFIG_TYPES}}
"""The built-in entities as a new controller seeds them (canonical): its config types."""


@dataclass
class Current:
    """The state of a controller as the model file sees it.

    Attributes:
        entities: the operator's entities (including built-in ones) by kind and name, canonical.
        ids: every named row's id by kind and name, for the model's kinds and the kinds it looks up
            (:data:`controller.admin.model_format.LOOKUP_KINDS`).
        reserved: names per kind of rows the controller owns (the default admin...): referable, never defined.
        builtin: the seeded form of built-in rows per kind and name: never pruned, exported only when changed.
    """

    entities: Model = field(default_factory=lambda: {kind: {} for kind in KIND_ORDER})
    ids: dict[str, dict[str, str]] = field(default_factory=dict)
    reserved: dict[str, frozenset[str]] = field(default_factory=dict)
    builtin: Model = field(default_factory=dict)

    def exported(self) -> Model:
        """The entities an export writes: all but built-in ones that are as seeded."""
        return {kind: {name: entity for name, entity in entities.items()
                       if self.builtin.get(kind, {}).get(name) != entity}
                for kind, entities in self.entities.items()}


def _names_by_id(rows: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, str]]:
    return {kind: {str(row["id"]): str(row.get("name", "")) for row in kind_rows} for kind, kind_rows in rows.items()}


def _name_of(names: Mapping[str, str], row_id: str) -> str:
    """The name of the row ``row_id``; its id when no row has it (the file then reports the dangling reference)."""
    return names.get(row_id, row_id)


def _read_value(f: FieldSpec, row: Mapping[str, Any]) -> Any:
    if f.read is not None:
        return f.read(row)
    return row.get(f.answered_as or f.wire_name)


def _entity(kind: str, row: Mapping[str, Any], names: Mapping[str, Mapping[str, str]]) -> Entity:
    """The canonical entity of one API row."""
    entity: Entity = {"name": row["name"]}
    discriminator = KINDS[kind].discriminator
    if discriminator is not None:
        entity[discriminator] = row.get(discriminator)
    for f in entity_fields(kind, entity):
        if f.name in entity:
            continue
        value = _read_value(f, row)
        targets = names.get(f.ref or "", {})
        if f.ref_style == "name":
            # The id the API stores for a reference left out reads as leaving it out.
            value = None if value in (None, "", f.default_id) else _name_of(targets, str(value))
        elif f.ref_style == "names":
            value = sorted({_name_of(targets, str(item)) for item in value or []})
        elif f.ref_style == "roles":
            value = sorted({"@" + _name_of(targets, role[1:]) if role.startswith("@") else role
                            for role in value or []})
        elif f.ref_style == "keys":
            value = {_name_of(targets, key): item for key, item in (value or {}).items()}
        elif f.is_set:
            value = sorted(set(value or []))
        elif value is None and f.default is not REQUIRED:
            value = f.default_value()  # a null map or list reads as the empty one, as the API treats it
        elif value == "" and f.default is None:
            value = None  # an empty text where null is the default (externalId) reads as null, as the API stores it
        entity[f.name] = value
    return entity


def _is_reserved(kind: str, row: Mapping[str, Any]) -> bool:
    return bool(row.get("isDefaultAdmin")) or (kind != "config-types" and bool(row.get("isSystem")))


def current_from_rows(rows: Mapping[str, list[dict[str, Any]]], builtin: Model = BUILTIN) -> Current:
    """The current state from API rows (pure).

    Args:
        rows: the list rows (as the Management API presents them) of every kind of
            :data:`controller.admin.model_format.KIND_ORDER` and :data:`~controller.admin.model_format.LOOKUP_KINDS`;
            a missing kind has no rows.
        builtin: the seeded form of the built-in rows (canonical entities by kind and name), :data:`BUILTIN` unless
            given; see the module docstring.

    Returns:
        The state; ``entities`` holds every row of the model's kinds but the reserved ones.
    """
    names = _names_by_id(rows)
    current = Current(builtin=builtin)
    for kind in (*KIND_ORDER, *LOOKUP_KINDS):
        kind_rows = rows.get(kind, [])
        current.ids[kind] = {str(row.get("name", "")): str(row["id"]) for row in kind_rows}
        if kind not in KIND_ORDER:
            continue
        current.reserved[kind] = frozenset(str(row["name"]) for row in kind_rows if _is_reserved(kind, row))
        current.entities[kind] = {str(row["name"]): _entity(kind, row, names) for row in kind_rows
                                  if not _is_reserved(kind, row)}
    return current


class ModelRows(Protocol):
    """What reading the current state takes: every row of a kind as the Management API lists them (the CLI's
    :class:`~controller.admin.admin_client.AdminClient`, or the web console reading the controller in process)."""

    def list_all(self, kind: str) -> list[dict[str, Any]]:
        """Every row of ``kind``, in id order, as ``GET /{kind}`` presents them."""


def read_current(client: ModelRows, builtin: Model = BUILTIN) -> Current:
    """The current state of the controller ``client`` reads (one list per kind).

    Raises:
        Whatever ``client`` raises (the CLI's AdminError when the controller refuses a list, ConnectionProblem when
        it cannot be reached).
    """
    rows = {kind: client.list_all(kind) for kind in (*KIND_ORDER, *LOOKUP_KINDS)}
    return current_from_rows(rows, builtin)


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def _without_empty(value: Any) -> Any:
    """A variant's field without the empty optional parts its kind's rule fills in (a process's ``hashes: []``
    and ``signerFingerprint: ""``, an OS's ``versions: []``)."""
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item not in ([], "")}
    if isinstance(value, list):
        return [_without_empty(item) for item in value]
    return value


class _Dumper(yaml.SafeDumper):
    """Lists of plain values on one line (``roleAttributes: [a, b]``), everything else in block style."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.SequenceNode:
    flow = all(item is None or isinstance(item, str | bool | int | float) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _file_entity(kind: str, entity: Entity) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in entity_fields(kind, entity):
        value = entity.get(f.name)
        if f.name != "name" and (value is None or (f.default is not REQUIRED and value == f.default)):
            continue
        if f.normalized:
            value = _without_empty(value)
        out[f.name] = _sorted_keys(value) if isinstance(value, dict) else value
    return out


def dump_model(model: Model) -> str:
    """The YAML text of a model, in a stable form.

    Kinds come in :data:`KIND_ORDER` (empty ones left out), entities sorted by name, fields in the kind's order,
    fields equal to their default left out, keys of free-form maps (``data``, ``schema``, ``tags``...) sorted. The
    text reads back (:func:`controller.admin.model_file.parse_model`) as the same model.
    """
    document: dict[str, list[dict[str, Any]]] = {}
    for kind in KIND_ORDER:
        entities = model.get(kind) or {}
        if entities:
            document[kind] = [_file_entity(kind, entities[name]) for name in sorted(entities)]
    if not document:
        return ""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=120)
