"""Every Management API kind the admin CLI knows: its path, table columns, and create/update flags, derived from
the controller's resource specs and the CLI's presentation table (``controller/admin/cli_table.py``).

The CLI's verbs are derived from these kinds (``list``/``show``/``delete`` take any kind, ``create`` and ``update``
have one subcommand per creatable or updatable kind, with its flags). Kinds are named by their path segment
(``service-policies``) or its singular (``service-policy``). What the specs say is read from them: which operations
exist, the singular name, whether rows are named, a flag's choices, type and conversion of names to ids, its variant,
and the values a create fills in for required fields the user leaves out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import click

from controller.admin.cli_table import TABLE, FlagText, KindText
from controller.admin.flags import (
    Converter,
    Flag,
    as_list,
    json_document,
    reference,
    references,
    roles,
    text,
)
from controller.admin.output import Column
from controller.admin.specs import REGISTRY
from controller.model.field import CREATE_ONLY, MISSING, Field, Mode
from controller.model.registry import Registry
from controller.model.request_fields import default_value, enum_of, json_type, request_field, schema_at, words
from controller.model.spec import Resource

__all__ = ["KINDS", "Kind", "derive_kinds", "find_kind"]


@dataclass(frozen=True)
class Kind:
    """One kind of the Management API as the CLI shows and writes it.

    Attributes:
        path: the collection's path segment (``service-policies``).
        singular: the kind's singular name (``service-policy``), accepted wherever a kind is.
        columns: the table columns of ``tollgate list``.
        flags: the options of ``tollgate create`` and ``tollgate update`` for this kind.
        named: rows have a unique ``name`` (create takes it as an argument; ids may be given as names).
        creatable: ``POST /{path}`` exists.
        updatable: ``PATCH /{path}/{id}`` exists.
        deletable: ``DELETE /{path}/{id}`` exists.
        create_defaults: what a create sends for the fields the API requires that the user left out: the
            spec's default of each (a policy's ``semantic: AllOf``).
        discriminator: the field choosing the kind's variant (posture checks' ``typeId``); PATCH must repeat it.
    """

    path: str
    singular: str
    columns: tuple[Column, ...]
    flags: tuple[Flag, ...] = ()
    named: bool = True
    creatable: bool = True
    updatable: bool = True
    deletable: bool = True
    create_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    discriminator: str | None = None

    def flag(self, name: str) -> Flag | None:
        """This kind's flag called ``name`` (without dashes), or None."""
        return next((flag for flag in self.flags if flag.name == name), None)


def _shown(value: Any) -> str | None:
    """A default as help shows it, or None for one not worth saying (null, empty)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int) and value != "":
        return str(value)
    return None


def _help(resource: Resource, f: Field, schema: Mapping[str, Any], entry: FlagText, nested: bool,
          default: Any) -> str:
    """The flag's help: the table's text, then the spec's facts about the field."""
    if entry.help is not None:
        said = entry.help
    elif f.roles is not None:
        said = f"{f.roles} roles, comma-separated: #attribute, #all, @id or @name"
    else:
        said = words(f.name)
    notes = []
    if json_type(schema) == "integer" and "minimum" in schema and "maximum" in schema:
        notes.append(f"{schema['minimum']} to {schema['maximum']}")
    given = default is not MISSING and default is not None
    if given and not nested and f.ref is None and (shown := _shown(default)) is not None:
        notes.append(f"default: {shown}")  # an id or an empty list is not worth saying
    elif not given and not nested and Mode.CREATE in f.required and resource.creatable:
        notes.append("required on create")
    if not nested and f.writable == CREATE_ONLY and "patch" in resource.operations:
        notes.append("create only")
    variant = resource.variant_of(entry.field.split(".")[0])
    prefix = f"[{variant.value}] " if variant is not None else ""
    return prefix + said + (f" ({'; '.join(notes)})" if notes else "")


def _convert(f: Field, schema: Mapping[str, Any], nested: bool) -> Converter:
    kind = json_type(schema)
    if f.ref is not None and not nested:
        return reference(f.ref)
    if f.roles is not None:
        return roles(f.roles)
    if f.ids_of is not None and kind == "array":
        return references(f.ids_of)
    if kind == "array":
        return as_list
    if kind == "object":
        return json_document
    return text


def _flag(resource: Resource, entry: FlagText, defaults: Mapping[str, Any]) -> Flag:
    head, _, inner = entry.field.partition(".")
    found = request_field(resource, head)
    schema = schema_at(found[0].schema, inner) if found is not None else None
    if found is None or schema is None:
        raise ValueError(f"{resource.kind}: flag --{entry.name} names {entry.field}, which no request carries")
    f, variant = found
    nested = bool(inner)
    default = defaults.get(f.name, default_value(f))
    kind: click.ParamType[Any, Any] | None = None
    choices = entry.choices or enum_of(schema)
    if choices is not None:
        kind = click.Choice(list(choices))
    elif json_type(schema) == "integer":
        kind = click.INT
    metavar = entry.metavar
    if metavar is None and entry.convert is None:
        metavar = "ROLES" if f.roles else "JSON|@FILE" if json_type(schema) == "object" else None
    return Flag(entry.name, entry.field, _help(resource, f, schema, entry, nested, default),
                entry.convert or _convert(f, schema, nested), metavar, kind,
                switch=json_type(schema) == "boolean" and entry.convert is None, multiple=entry.multiple,
                variants=frozenset({variant.value}) if variant is not None else frozenset())


def _create_defaults(resource: Resource) -> dict[str, Any]:
    """The fields a create must carry whose spec has a value for them (a policy's ``semantic``), with it."""
    defaults = {}
    for f in resource.fields:
        found = request_field(resource, f.name)
        if found is not None and Mode.CREATE in found[0].required:
            value = default_value(f)
            if value is not MISSING and value is not None:
                defaults[f.name] = value
    return defaults


def _kind(resource: Resource, shown: KindText) -> Kind:
    named = resource.field("name") is not None
    defaults = _create_defaults(resource) if resource.creatable else {}
    return Kind(
        path=resource.kind,
        singular=words(resource.singular).replace(" ", "-"),
        columns=shown.columns,
        flags=tuple(_flag(resource, flag, defaults) for flag in shown.flags),
        named=named,
        creatable=resource.creatable,
        updatable="patch" in resource.operations,
        deletable="delete" in resource.operations,
        create_defaults=MappingProxyType(defaults),
        discriminator=resource.variants.discriminator if resource.variants is not None else None,
    )


def derive_kinds(registry: Registry, table: Iterable[KindText] = TABLE) -> tuple[Kind, ...]:
    """The CLI's kinds: every kind of ``registry`` with a list operation, presented as ``table`` says (in its
    order, then the kinds it lacks with the columns id and name and no flags).

    Raises:
        ValueError: the table names a kind that is not listable, or a flag names a field no request carries.
    """
    listable = [resource for resource in registry.resources.values() if "list" in resource.operations]
    texts = {entry.path: entry for entry in table}
    unknown = set(texts) - {resource.kind for resource in listable}
    if unknown:
        raise ValueError(f"the CLI's table names kinds the controller does not list: {sorted(unknown)}")
    ordered = [*(registry[path] for path in texts), *(r for r in listable if r.kind not in texts)]
    return tuple(_kind(resource, texts.get(resource.kind) or _plain(resource)) for resource in ordered)


def _plain(resource: Resource) -> KindText:
    """The presentation of a kind the table lacks: its id and name, no flags."""
    return KindText(resource.kind, (("id", "id"), *((("name", "name"),) if resource.field("name") else ())))


KINDS: tuple[Kind, ...] = derive_kinds(REGISTRY)
"""Every kind with a list operation in the Management API, in the order help lists them."""

_BY_NAME = {name: kind for kind in KINDS for name in (kind.path, kind.singular)}


def find_kind(name: str) -> Kind | None:
    """The kind called ``name`` (its path or singular, any case), or None."""
    return _BY_NAME.get(name.lower())
