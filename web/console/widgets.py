"""The console's forms, derived from the resource specs: one :class:`Widget` per field a request may carry.

Which fields a form has, their order, labels, which are required, enums, bounds, references, role selectors, nested
objects and lists of objects are all read from the spec through :func:`controller.model.request_fields.request_field`
(the readings the admin CLI derives its flags from), so a field added to a spec appears in the console's forms
without a template edit. A field's JSON schema decides its widget:

* a reference (``Field.ref``): a choice among the target kind's rows; a role list (``Field.roles``): the role
  selector, offering ``#all``, the target's role attributes and its rows by name; an id list (``Field.ids_of``):
  a choice of several rows;
* an enum: a choice; a boolean: a checkbox; an integer: a number field (with the schema's bounds); a string: a text
  field (a password field for a secret the domain hashes, a text area for a PEM);
* a list of objects with properties (an OS check's operating systems, a multi-process check's processes): a
  repeatable group; a list of strings: a text area, one value per line;
* an object with properties (a process, an auth policy's factors): a group of its own fields; any other object
  (tags, config data, a JSON schema): JSON in a text area.

The only presentation here is how a field is worded (its name as people read it) and that PEMs are multi-line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from controller.model.field import Field, Mode, Variant
from controller.model.request_fields import enum_of, json_type, request_field, words
from controller.model.spec import Resource

__all__ = ["Widget", "WidgetKind", "form_widgets", "label_of"]

WidgetKind = Literal["text", "password", "textarea", "number", "checkbox", "select", "multiselect", "lines", "json",
                     "roles", "group", "repeat", "hidden"]


@dataclass(frozen=True, slots=True)
class Widget:
    """One field of a form.

    Attributes:
        name: the key of the value in its parent object (the wire name).
        label: the field as people read it.
        kind: how it is entered (see the module docstring).
        required: a create must carry it (and an edit may not clear it).
        nullable: it may be cleared (null).
        choices: the values of an enum.
        target: the kind a reference, an id list or a role selector names rows of.
        minimum: the least number allowed, when the schema says.
        maximum: the greatest number allowed, when the schema says.
        children: the fields of a group, or of each item of a repeatable group.
        hint: what the value looks like, when the schema says (a date and time).
    """

    name: str
    label: str
    kind: WidgetKind
    required: bool = False
    nullable: bool = False
    choices: tuple[str, ...] = ()
    target: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    children: tuple[Widget, ...] = ()
    hint: str = ""


def label_of(name: str) -> str:
    """``roleAttributes`` as ``Role attributes``."""
    said = words(name)
    return said[:1].upper() + said[1:]


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) and properties else None


def _children(schema: Mapping[str, Any]) -> tuple[Widget, ...]:
    properties = _properties(schema) or {}
    required = set(schema.get("required") or ())
    return tuple(_widget(name, sub, required=name in required, nullable="null" in (sub.get("type") or ()))
                 for name, sub in properties.items())


def _widget(name: str, schema: Mapping[str, Any], *, required: bool, nullable: bool,
            f: Field | None = None) -> Widget:
    """The widget of a value of ``schema`` called ``name`` (``f``: the spec's field, for a top-level value)."""
    label = label_of(name)
    common: dict[str, Any] = {"required": required, "nullable": nullable}
    kind = json_type(schema)
    if f is not None and f.ref is not None:
        return Widget(name, label, "select", target=f.ref, **common)
    if f is not None and f.roles is not None:
        return Widget(name, label, "roles", target=f.roles, **common)
    if f is not None and f.ids_of is not None and kind == "array":
        return Widget(name, label, "multiselect", target=f.ids_of, **common)
    choices = enum_of(schema)
    if choices is not None:
        return Widget(name, label, "select", choices=choices, **common)
    if kind == "boolean":
        return Widget(name, label, "checkbox", **common)
    if kind == "integer":
        return Widget(name, label, "number", minimum=schema.get("minimum"), maximum=schema.get("maximum"), **common)
    if kind == "string":
        hint = "a date and time in RFC 3339, such as 2030-01-31T12:00:00Z" if schema.get("format") == "date-time" \
            else ""
        if f is not None and f.hashed_into is not None:
            return Widget(name, label, "password", **common)
        return Widget(name, label, "textarea" if name.endswith("Pem") else "text", hint=hint, **common)
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, Mapping) and json_type(items) == "object" and _properties(items) is not None:
            return Widget(name, label, "repeat", children=_children(items), **common)
        if isinstance(items, Mapping) and json_type(items) in ("string", None):
            return Widget(name, label, "lines", **common)
    if kind == "object" and _properties(schema) is not None and not schema.get("additionalProperties"):
        return Widget(name, label, "group", children=_children(schema), **common)
    return Widget(name, label, "json", **common)


def _shown(f: Field, mode: Mode) -> bool:
    """Whether a form of ``mode`` (CREATE, or PATCH for an edit) has the field: one a request of that mode writes;
    an edit leaves out what only a create reads (an identity's enrollment request), but offers a new secret."""
    if mode not in f.writable:
        return False
    return mode is Mode.CREATE or f.stored or f.hashed_into is not None


def form_widgets(resource: Resource, mode: Mode, variant: Variant | None = None) -> tuple[Widget, ...]:
    """The fields of the form that creates (``Mode.CREATE``) or edits (``Mode.PATCH``) a row of ``resource``
    (of ``variant``, for a kind with variants), in the spec's order with ``tags`` last; the discriminator, which
    the form's URL chooses, is a hidden field."""
    widgets: list[Widget] = []
    if resource.variants is not None:
        name = resource.variants.discriminator
        widgets.append(Widget(name, label_of(name), "hidden", required=True))
    tags = resource.field("tags")
    assert tags is not None  # every kind has tags
    for f in (*resource.fields_for(variant), tags):
        found = request_field(resource, f.name)
        if found is None or not _shown(found[0], mode):
            continue
        spec = found[0]
        widgets.append(_widget(f.name, spec.schema, required=Mode.CREATE in spec.required, nullable=spec.nullable,
                               f=spec))
    return tuple(widgets)
