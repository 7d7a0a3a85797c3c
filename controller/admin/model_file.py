"""The model file of ``tollgate apply -f FILE`` and ``tollgate export``: what it holds and how it is read
(:func:`controller.admin.export.dump_model` writes it).

The file is YAML. Its top-level keys are kinds, each a list of entities identified by ``name``::

    config-types:           # name, schema, tags
    configs:                # name, configType (a config type's name), data, tags
    posture-checks:         # name, typeId, roleAttributes, the type's own fields, tags
    services:               # name, encryptionRequired, maxIdleTimeMillis, terminatorStrategy, roleAttributes,
                            # configs (config names), tags
    identities:             # name, type, isAdmin, roleAttributes, authPolicy (an auth policy's name), externalId,
                            # defaultHostingCost, defaultHostingPrecedence, serviceHostingCosts,
                            # serviceHostingPrecedences (both keyed by service name), appData, tags, enroll
    service-policies:       # name, type (Dial | Bind), semantic, identityRoles, serviceRoles, postureCheckRoles, tags
    edge-router-policies:   # name, semantic, identityRoles, edgeRouterRoles, tags
    service-edge-router-policies:  # name, semantic, serviceRoles, edgeRouterRoles, tags

Fields carry the Management API's own names and values, except that references name their target instead of giving
its id: ``configType`` and ``authPolicy`` (for ``configTypeId`` and ``authPolicyId``), a service's ``configs``, the
keys of ``serviceHostingCosts``/``serviceHostingPrecedences``, and ``@name`` entries of role lists (the API's
``@id``; ``#attribute`` and ``#all`` are as in the API). Posture checks take the fields of their ``typeId``: OS
``operatingSystems``, MAC ``macAddresses``, DOMAIN ``domains``, PROCESS ``process``, PROCESS_MULTI ``semantic`` and
``processes``, MFA ``timeoutSeconds``, ``promptOnWake``, ``promptOnUnlock``, ``ignoreLegacyEndpoints``. An
identity's ``enroll: ott`` creates it with a one-time-token enrollment; it is read only when the identity is created.

In YAML, role entries must be quoted (``["#staff", "@alice"]``): ``#`` would start a comment and ``@`` cannot start
a plain value. An identity's ``authPolicy`` left out is the controller's default auth policy. A service's
``encryptionRequired``, a config's ``configType`` and a posture check's ``typeId`` cannot change once the entity
exists: a plan that would change one is refused (remove the entity, apply with ``--prune``, add it back).

The file states the whole of each entity it names: a field left out means the field's default (empty role lists,
``semantic: AllOf``, no tags...), so removing a line from the file resets that field. Lists of names (role
attributes, role lists, a service's configs) are sets: their order does not matter. Server-managed fields (ids,
timestamps, links, enrollment secrets, authenticators) never appear.

In memory a model is ``{kind: {name: entity}}`` where each entity is a dict in canonical form: every field of its
kind present (defaults filled in), sets sorted, posture-check fields in the form the controller stores. Two entities
are the same when their canonical forms are equal.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from controller.admin import model_values as values
from controller.admin.model_values import Check, ModelError
from controller.check_types.bodies import CHECK_TYPES, normalize_check
from controller.errors import FieldError

__all__ = [
    "KINDS",
    "KIND_ORDER",
    "REQUIRED",
    "Entity",
    "FieldSpec",
    "KindSpec",
    "Model",
    "ModelError",
    "entity_fields",
    "parse_model",
]

Entity = dict[str, Any]
Model = dict[str, dict[str, Entity]]
RefStyle = Literal["name", "names", "roles", "keys"]


class _Required:
    """The default of a field the file must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


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
        variant: the posture-check ``typeId`` the field belongs to (None: every entity of the kind has it).
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

    @property
    def wire_name(self) -> str:
        return self.wire or self.name

    def default_value(self) -> Any:
        """A fresh copy of the default (callers may change it)."""
        return copy.deepcopy(self.default)


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One kind of the file: its key (the API's path segment, ``service-policies``) and its fields in file order."""

    kind: str
    fields: tuple[FieldSpec, ...]

    def field(self, name: str) -> FieldSpec:
        return next(f for f in self.fields if f.name == name)


_SEMANTIC = values.choice("AllOf", "AnyOf")
_PRECEDENCE = values.choice("default", "required", "failed")
_COST = values.integer(0, 65535)
_NAME = FieldSpec("name", values.entity_name)
_TAGS = FieldSpec("tags", values.mapping, {})
_ATTRIBUTES = FieldSpec("roleAttributes", values.name_set, [])


def _role_list(name: str, target: str) -> FieldSpec:
    return FieldSpec(name, values.roles, [], ref=target, ref_style="roles")


def _posture(name: str, variant: str, default: Any = REQUIRED) -> FieldSpec:
    return FieldSpec(name, values.passed, default, variant=variant)


KINDS: dict[str, KindSpec] = {spec.kind: spec for spec in (
    KindSpec("config-types", (_NAME, FieldSpec("schema", values.mapping, {}), _TAGS)),
    KindSpec("configs", (
        _NAME,
        FieldSpec("configType", values.entity_name,
                  wire="configTypeId", ref="config-types", ref_style="name", create_only=True),
        FieldSpec("data", values.mapping),
        _TAGS,
    )),
    KindSpec("posture-checks", (
        _NAME,
        FieldSpec("typeId", values.choice(*CHECK_TYPES), create_only=True),
        _ATTRIBUTES,
        _posture("operatingSystems", "OS"),
        _posture("macAddresses", "MAC"),
        _posture("domains", "DOMAIN"),
        _posture("process", "PROCESS"),
        _posture("semantic", "PROCESS_MULTI"),
        _posture("processes", "PROCESS_MULTI"),
        _posture("timeoutSeconds", "MFA", -1),
        _posture("promptOnWake", "MFA", False),
        _posture("promptOnUnlock", "MFA", False),
        _posture("ignoreLegacyEndpoints", "MFA", False),
        _TAGS,
    )),
    KindSpec("services", (
        _NAME,
        FieldSpec("encryptionRequired", values.boolean, True, create_only=True),
        FieldSpec("maxIdleTimeMillis", values.integer(0, 2**63 - 1), 0),
        FieldSpec("terminatorStrategy", values.string, "smartrouting"),
        _ATTRIBUTES,
        FieldSpec("configs", values.name_set, [], ref="configs", ref_style="names"),
        _TAGS,
    )),
    KindSpec("identities", (
        _NAME,
        FieldSpec("type", values.choice("User", "Device", "Service", "Router", "Default"), "Default"),
        FieldSpec("isAdmin", values.boolean, False),
        _ATTRIBUTES,
        FieldSpec("authPolicy", values.optional_string, None,
                  wire="authPolicyId", ref="auth-policies", ref_style="name"),
        FieldSpec("externalId", values.optional_string, None),
        FieldSpec("defaultHostingCost", _COST, 0),
        FieldSpec("defaultHostingPrecedence", _PRECEDENCE, "default"),
        FieldSpec("serviceHostingCosts", values.map_of(_COST), {}, ref="services", ref_style="keys"),
        FieldSpec("serviceHostingPrecedences", values.map_of(_PRECEDENCE), {}, ref="services", ref_style="keys"),
        FieldSpec("appData", values.mapping, {}),
        _TAGS,
        FieldSpec("enroll", values.enroll, None, wire="enrollment", compared=False),
    )),
    KindSpec("service-policies", (
        _NAME,
        FieldSpec("type", values.choice("Dial", "Bind")),
        FieldSpec("semantic", _SEMANTIC, "AllOf"),
        _role_list("identityRoles", "identities"),
        _role_list("serviceRoles", "services"),
        _role_list("postureCheckRoles", "posture-checks"),
        _TAGS,
    )),
    KindSpec("edge-router-policies", (
        _NAME,
        FieldSpec("semantic", _SEMANTIC, "AllOf"),
        _role_list("identityRoles", "identities"),
        _role_list("edgeRouterRoles", "edge-routers"),
        _TAGS,
    )),
    KindSpec("service-edge-router-policies", (
        _NAME,
        FieldSpec("semantic", _SEMANTIC, "AllOf"),
        _role_list("serviceRoles", "services"),
        _role_list("edgeRouterRoles", "edge-routers"),
        _TAGS,
    )),
)}
"""The kinds of the file, in dependency order: an entity refers only to kinds before its own."""

KIND_ORDER: tuple[str, ...] = tuple(KINDS)


def entity_fields(kind: str, entity: Mapping[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields an entity of ``kind`` has: all of the kind's, or for a posture check those of its ``typeId``."""
    return tuple(f for f in KINDS[kind].fields if f.variant is None or f.variant == entity.get("typeId"))


def _canonical_entity(kind: str, raw: Any, where: str) -> Entity:
    if not isinstance(raw, dict):
        raise values.fail(where, "each entry must be a mapping with a name")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise values.fail(where, "an entry has no name")
    where = f"{kind} {name!r}"
    spec = KINDS[kind]
    entity: Entity = {"name": name}
    if kind == "posture-checks":
        entity["typeId"] = spec.field("typeId").check(raw.get("typeId"), f"{where}: typeId")
    fields = entity_fields(kind, entity)
    known = {f.name for f in fields}
    unknown = [str(key) for key in raw if key not in known]
    if unknown:
        raise values.fail(where, f"unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
    for f in fields:
        if f.name in entity:
            continue
        value = raw.get(f.name)
        if value is not None:
            entity[f.name] = f.check(value, f"{where}: {f.name}")
        elif f.default is REQUIRED and f.variant is None:
            raise values.fail(where, f"{f.name} is required")
        elif f.default is not REQUIRED:
            entity[f.name] = f.default_value()
    if kind == "posture-checks":
        try:
            entity = normalize_check(entity, entity["typeId"], partial=False)
        except FieldError as exc:
            raise values.fail(f"{where}: {exc.field}", exc.reason) from None
    return entity


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key repeated in one mapping (plain YAML keeps the last one silently, which
    would drop a whole kind's entries)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is repeated",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_model(text: str) -> Model:
    """Read a model file.

    Args:
        text: the file's YAML text. An empty file is an empty model.

    Returns:
        The model: every kind of :data:`KIND_ORDER` present (possibly empty), entities in canonical form.

    Raises:
        ModelError: the text is not YAML (or repeats a key in a mapping), names an unknown kind or field, gives a
            value of the wrong shape, lacks a required field, or names two entities of one kind alike.
    """
    try:
        raw = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ModelError(f"the file is not valid YAML{at}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ModelError("the file must be a mapping of kinds (" + ", ".join(KIND_ORDER) + ")")
    unknown = [str(key) for key in raw if key not in KINDS]
    if unknown:
        raise ModelError(f"unknown kind {unknown[0]!r} (known: {', '.join(KIND_ORDER)})")
    model: Model = {kind: {} for kind in KIND_ORDER}
    for kind, entries in raw.items():
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise ModelError(f"{kind}: must be a list of entries")
        for index, raw_entity in enumerate(entries):
            entity = _canonical_entity(kind, raw_entity, f"{kind}[{index}]")
            if entity["name"] in model[kind]:
                raise ModelError(f"{kind} {entity['name']!r}: named twice")
            model[kind][entity["name"]] = entity
    return model
