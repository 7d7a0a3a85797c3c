"""The fields of each kind of the model file (:mod:`controller.admin.model_file`), derived from the resource specs.

A kind of the file has every field a request may write to a kind of the controller: its name first, then the
discriminator (a posture check's ``typeId``), the kind's own fields and each variant's in spec order, ``tags``, and
last the fields only a create reads. What a field's value may be (its check), its default, whether it is fixed
once created and what it refers to come from the spec:

* ``ref`` (one id) becomes a name under the spec's ``ref_name`` (``configType`` for ``configTypeId``); when the
  spec has a default id (an identity's auth policy), leaving the name out stands for it;
* ``roles`` lists take ``@name`` for the API's ``@id``; ``ids_of`` lists hold names, ``ids_of`` maps are keyed by
  name;
* enums, bounds, booleans, strings and objects are checked as the schema says; role attribute lists are sets;
* a variant's fields (posture checks') are checked together by the kind's ``normalize`` hook, as a create is.

What the specs cannot say is the file's own spelling of a few fields, kept in :data:`SPELLINGS` and
:data:`ANSWERED_AS`, and which kinds the file holds (:data:`FILE_KINDS`); their order is derived from the references.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from controller.admin import model_values as values
from controller.admin.model_values import Check
from controller.admin.specs import REGISTRY
from controller.model.field import CREATE_ONLY, MISSING, Field, Mode, Variant
from controller.model.registry import Registry
from controller.model.request_fields import default_value, enum_of, json_type, request_field, words
from controller.model.spec import Normalize, Resource

__all__ = ["ANSWERED_AS", "FILE_KINDS", "KINDS", "KIND_ORDER", "LOOKUP_KINDS", "REQUIRED", "SPELLINGS", "Entity",
           "FieldSpec", "KindSpec", "Model", "Spelling", "derive_format", "entity_fields", "file_order", "kind_spec"]

Entity = dict[str, Any]
Model = dict[str, dict[str, Entity]]
RefStyle = Literal["name", "names", "roles", "keys"]


class _Required:
    """The default of a field the file must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True, slots=True)
class Spelling:
    """A field the file writes in a form of its own.

    Attributes:
        name: the field's name in the file.
        check: validates the file's value and returns its canonical form.
        read: the file's value from a row as the API answers it.
        write: the request's value from the file's value.
    """

    name: str
    check: Check
    read: Callable[[Mapping[str, Any]], Any]
    write: Callable[[Any], Any]


FILE_KINDS: tuple[str, ...] = ("config-types", "configs", "posture-checks", "services", "identities",
                               "service-policies", "edge-router-policies", "service-edge-router-policies")
"""The kinds an operator states in the file. The file lists them in dependency order (:func:`file_order`): each
after the kinds its fields refer to, ties in this order."""

SPELLINGS: Mapping[tuple[str, str], Spelling] = {
    # ``enroll: ott`` asks a create for a one-time-token enrollment; answers show it as the pending enrollment.
    ("identities", "enrollment"): Spelling("enroll", values.enroll,
                                           lambda row: "ott" if (row.get("enrollment") or {}).get("ott") else None,
                                           lambda value: {"ott": True}),
}
"""(kind, spec field) -> the file's spelling of a request field that the file cannot carry as the API does."""

ANSWERED_AS: Mapping[tuple[str, str], str] = {("identities", "type"): "typeId"}
"""(kind, spec field) -> the key under which answers show a field's stored value (an identity's ``type`` is shown
as a reference to the identity type, its value in ``typeId``)."""


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a kind in the file.

    Attributes:
        name: the field's name in the file.
        check: validates a value given in the file and returns its canonical form; raises :class:`ModelError`
            with the ``where`` prefix it is handed.
        default: the canonical value when the file leaves the field out, or :data:`REQUIRED`.
        wire: the field's name in the API when it differs (``configTypeId`` for ``configType``).
        ref: the kind the field's names refer to, or None for a plain value.
        ref_style: how names appear: ``name`` (one name), ``names`` (a list of names), ``roles`` (``@name``
            entries of a role list), ``keys`` (the keys of a map).
        create_only: the API cannot change the field after create; a plan that would change it is refused.
        compared: False for a field that only matters when the entity is created (``enroll``).
        variant: the discriminator value the field belongs to (None: every entity of the kind has it).
        default_id: for a ``name`` reference, the id the API stores when the request leaves it out; the file's
            null stands for it.
        is_set: a list whose order does not matter (stored sorted, without repeats).
        normalized: checked with the other fields of its variant by the kind's ``normalize`` hook.
        read: for a field spelled by the file (:data:`SPELLINGS`), its value from an API row.
        write: for such a field, the request's value.
        answered_as: the key of the stored value in answers, when it is not the wire name.
    """

    name: str
    check: Check
    default: Any = REQUIRED
    wire: str | None = None
    ref: str | None = None
    ref_style: RefStyle | None = None
    create_only: bool = False
    compared: bool = True
    variant: str | None = None
    default_id: str | None = None
    is_set: bool = False
    normalized: bool = False
    read: Callable[[Mapping[str, Any]], Any] | None = None
    write: Callable[[Any], Any] | None = None
    answered_as: str | None = None

    @property
    def wire_name(self) -> str:
        return self.wire or self.name

    def default_value(self) -> Any:
        """A fresh copy of the default (callers may change it)."""
        return copy.deepcopy(self.default)


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One kind of the file: its key (the API's path segment, ``service-policies``), its fields in file order, the
    field choosing each entity's variant, and the kind's rule that checks a variant's fields together."""

    kind: str
    fields: tuple[FieldSpec, ...]
    discriminator: str | None = None
    normalize: Normalize | None = None

    def field(self, name: str) -> FieldSpec:
        return next(f for f in self.fields if f.name == name)


def _scalar_check(schema: Mapping[str, Any], nullable: bool) -> Check:
    """The check of a value of ``schema`` that is not a reference."""
    kind = json_type(schema)
    enum = enum_of(schema)
    if enum is not None:
        return values.choice(*enum)
    if kind == "boolean":
        return values.boolean
    if kind == "integer":
        return values.integer(schema.get("minimum"), schema.get("maximum"))
    if kind == "string":
        return values.optional_string if nullable else values.string
    if kind == "object":
        return values.mapping
    return values.json_value


def _field_spec(registry: Registry, resource: Resource, f: Field, variant: Variant | None) -> FieldSpec:
    default = default_value(f)
    file_default = REQUIRED if default is MISSING and Mode.CREATE in f.required else (
        None if default is MISSING else default)
    common: dict[str, Any] = {"create_only": f.writable == CREATE_ONLY,
                              "variant": variant.value if variant is not None else None}
    if variant is not None and resource.hooks.normalize is not None:
        return FieldSpec(f.name, values.passed, file_default, normalized=True, **common)
    if f.ref is not None:
        optional = file_default is not REQUIRED
        return FieldSpec(f.ref_name or f.name, values.optional_string if optional else values.entity_name,
                         None if optional else REQUIRED, wire=f.name, ref=f.ref, ref_style="name",
                         default_id=default if isinstance(default, str) else None, **common)
    if f.roles is not None:
        return FieldSpec(f.name, values.roles, file_default, ref=f.roles, ref_style="roles", is_set=True, **common)
    kind = json_type(f.schema)
    if f.ids_of is not None and kind == "array":
        return FieldSpec(f.name, values.name_set, file_default, ref=f.ids_of, ref_style="names", is_set=True,
                         **common)
    if f.ids_of is not None and kind == "object":
        check = values.map_of(_scalar_check(f.schema.get("additionalProperties") or {}, False),
                              words(registry[f.ids_of].singular) if f.ids_of in registry else f.ids_of)
        return FieldSpec(f.name, check, file_default, ref=f.ids_of, ref_style="keys", **common)
    if kind == "array" and f.indexed_set:
        return FieldSpec(f.name, values.name_set, file_default, is_set=True, **common)
    return FieldSpec(f.name, _scalar_check(f.schema, f.nullable), file_default,
                     answered_as=ANSWERED_AS.get((resource.kind, f.name)), **common)


def _spelled(resource: Resource, f: Field) -> FieldSpec | None:
    """A request-only field the file spells its own way, or None when the file does not carry it."""
    spelling = SPELLINGS.get((resource.kind, f.name))
    if spelling is None:
        return None
    return FieldSpec(spelling.name, spelling.check, None, wire=f.name, compared=False, read=spelling.read,
                     write=spelling.write)


def kind_spec(registry: Registry, resource: Resource) -> KindSpec:
    """The file's form of one kind of ``registry`` (see the module docstring for the order and the rules)."""
    stored: list[FieldSpec] = []
    request_only: list[FieldSpec] = []
    variants = resource.variants.variants if resource.variants is not None else ()
    candidates = [(f, None) for f in resource.fields] + [(f, v) for v in variants for f in v.fields]
    for f, variant in candidates:
        if f.name == "name" or request_field(resource, f.name) is None:
            continue
        if f.stored:
            stored.append(_field_spec(registry, resource, f, variant))
        elif (spelled := _spelled(resource, f)) is not None:
            request_only.append(spelled)
    head = [FieldSpec("name", values.entity_name)]
    discriminator = None
    if resource.variants is not None:
        discriminator = resource.variants.discriminator
        head.append(FieldSpec(discriminator, values.choice(*resource.variants.values()), create_only=True))
    tags = resource.field("tags")
    assert tags is not None  # every kind has tags
    # A variant's fields are checked together by the kind's normalize rule, as the controller checks a create.
    normalize = resource.hooks.normalize if discriminator is not None else None
    return KindSpec(resource.kind, (*head, *stored, _field_spec(registry, resource, tags, None), *request_only),
                    discriminator, normalize)


def _targets(spec: KindSpec) -> list[str]:
    """The kinds the fields of ``spec`` refer to, in field order."""
    return list(dict.fromkeys(f.ref for f in spec.fields if f.ref is not None))


def file_order(specs: Mapping[str, KindSpec], preference: Iterable[str]) -> tuple[str, ...]:
    """The kinds of ``specs`` each after those it refers to; among kinds free to come next, the first of
    ``preference``.

    Raises:
        ValueError: references among the kinds form a cycle.
    """
    pending = list(preference)
    placed: list[str] = []
    while pending:
        free = next((kind for kind in pending if all(target in placed or target not in specs or target == kind
                                                     for target in _targets(specs[kind]))), None)
        if free is None:
            raise ValueError(f"the model file's kinds refer to each other in a cycle: {pending}")
        placed.append(free)
        pending.remove(free)
    return tuple(placed)


def derive_format(registry: Registry, kinds: Iterable[str] = FILE_KINDS
                  ) -> tuple[dict[str, KindSpec], tuple[str, ...]]:
    """The file's kinds (``kinds`` of ``registry``) in dependency order, by key; and the kinds they refer to
    without holding them, in the order first referred to."""
    kinds = tuple(kinds)
    specs = {kind: kind_spec(registry, registry[kind]) for kind in kinds}
    order = file_order(specs, kinds)
    lookups = dict.fromkeys(target for kind in order for target in _targets(specs[kind]) if target not in specs)
    return {kind: specs[kind] for kind in order}, tuple(lookups)


KINDS, LOOKUP_KINDS = derive_format(REGISTRY)
"""The kinds of the file, in dependency order: an entity refers only to kinds before its own; and the kinds it
refers to by name without defining them (edge routers, auth policies)."""

KIND_ORDER: tuple[str, ...] = tuple(KINDS)


def entity_fields(kind: str, entity: Mapping[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields an entity of ``kind`` has: all of the kind's, or for a kind with variants those of its own."""
    spec = KINDS[kind]
    chosen = entity.get(spec.discriminator) if spec.discriminator is not None else None
    return tuple(f for f in spec.fields if f.variant is None or f.variant == chosen)
