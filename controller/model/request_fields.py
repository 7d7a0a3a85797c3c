"""What a request body may carry for a kind, read from its spec (:func:`request_field`), and the small readings of a
field's schema every client-side derivation needs (its JSON type, enum, default, the schema at a nested path, its
name as people read it).

The admin CLI's flags and model file (``controller/admin/``) and the web console's forms, columns and filters
(``web/console/``) are derived with these. Nothing here restates a kind: enums, defaults, required-ness, references
and operations are read from the specs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from controller.model.field import CREATE_ONLY, MISSING, Field, Mode, Variant
from controller.model.spec import Resource

__all__ = ["default_value", "enum_of", "json_type", "request_field", "schema_at", "words"]

_NO_MODES: frozenset[Mode] = frozenset()


def request_field(resource: Resource, name: str) -> tuple[Field, Variant | None] | None:
    """The field ``name`` as a client writes it, and the variant it belongs to; None when no request carries it.

    The discriminator (posture checks' ``typeId``) is a field of its own here: a string of the variants' values,
    required on create and fixed after it. For a kind created through a route of its own (``create_schema``), the
    field's schema and required-ness are that body's. Internal fields (``_name``) and fields no request writes are
    None.
    """
    if resource.variants is not None and name == resource.variants.discriminator:
        values = list(resource.variants.values())
        return Field(name, {"type": "string", "enum": values}, required=CREATE_ONLY, writable=CREATE_ONLY), None
    f = resource.field(name)
    if f is None or name.startswith("_") or not f.writable:
        return None
    if resource.create_schema is not None:
        body = resource.create_schema
        schema = body.get("properties", {}).get(name)
        if schema is None:
            return None
        required = CREATE_ONLY if name in body.get("required", ()) else _NO_MODES
        f = replace(f, schema=schema, required=required)
    return f, resource.variant_of(name)


def json_type(schema: Mapping[str, Any]) -> str | None:
    """The JSON type a schema's value has (its non-null one when it allows null too), or None when not given."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), None)
    return kind if isinstance(kind, str) else None


def schema_at(schema: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """The schema of the value at a dotted ``path`` inside a value of ``schema`` (``osType`` of a process), or None
    when the schema does not say."""
    for step in path.split(".") if path else ():
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or step not in properties:
            return None
        schema = properties[step]
    return schema


def enum_of(schema: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The values a string schema allows, or None when it allows any."""
    values = schema.get("enum")
    return tuple(str(value) for value in values) if isinstance(values, list) else None


def default_value(f: Field) -> Any:
    """A fresh copy of the field's default (a callable default is called); MISSING when it has none."""
    if f.default is MISSING:
        return MISSING
    return f.default() if callable(f.default) else copy.deepcopy(f.default)


def words(camel: str) -> str:
    """``configType`` as ``config type``: a spec's camel-case name as people read it."""
    return "".join(" " + char.lower() if char.isupper() else char for char in camel).strip()
