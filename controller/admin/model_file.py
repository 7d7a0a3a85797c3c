"""The model file of ``tollgate apply -f FILE`` and ``tollgate export``: what it holds and how it is read
(:func:`controller.admin.export.dump_model` writes it).

The file is YAML. Its top-level keys are kinds, each a list of entities identified by ``name``, for example::

    config-types:                  # name, schema, tags
    configs:                       # name, configType (a config type's name), data, tags
    posture-checks:                # name, typeId, roleAttributes, the fields of its typeId, tags
    services:                      # name, encryptionRequired, ..., roleAttributes, configs (config names), tags
    identities:                    # name, type, isAdmin, roleAttributes, authPolicy (an auth policy's name), ...,
                                   # serviceHostingCosts (keyed by service name), ..., tags, enroll
    service-policies:              # name, type (Dial | Bind), semantic, identityRoles, serviceRoles, ...
    edge-router-policies:          # name, semantic, identityRoles, edgeRouterRoles, tags
    service-edge-router-policies:  # name, semantic, serviceRoles, edgeRouterRoles, tags

Each kind has the fields the Management API lets a client write, with the API's own names, values and defaults
(:mod:`controller.admin.model_format` derives them from the controller's resource specs), except that references
name their target instead of giving its id: ``configType`` and ``authPolicy`` (for ``configTypeId`` and
``authPolicyId``), a service's ``configs``, the keys of ``serviceHostingCosts``/``serviceHostingPrecedences``, and
``@name`` entries of role lists (the API's ``@id``; ``#attribute`` and ``#all`` are as in the API). Posture checks
take the fields of their ``typeId`` (OS ``operatingSystems``, MAC ``macAddresses``, MFA ``timeoutSeconds``...). An
identity's ``enroll: ott`` creates it with a one-time-token enrollment; it is read only when the identity is created.

In YAML, role entries must be quoted (``["#staff", "@alice"]``): ``#`` would start a comment and ``@`` cannot start
a plain value. An identity's ``authPolicy`` left out is the controller's default auth policy. Fields the API fixes
at create (a service's ``encryptionRequired``, a config's ``configType``, a posture check's ``typeId``) cannot
change once the entity exists: a plan that would change one is refused (remove the entity, apply with ``--prune``,
add it back).

The file states the whole of each entity it names: a field left out means the field's default (empty role lists,
``semantic: AllOf``, no tags...), so removing a line from the file resets that field. Lists of names (role
attributes, role lists, a service's configs) are sets: their order does not matter. Server-managed fields (ids,
timestamps, links, enrollment secrets, authenticators) never appear.

In memory a model is ``{kind: {name: entity}}`` where each entity is a dict in canonical form: every field of its
kind present (defaults filled in), sets sorted, variant fields in the form the controller stores. Two entities are
the same when their canonical forms are equal.
"""

from __future__ import annotations

from typing import Any

import yaml

from controller.admin import model_values as values
from controller.admin.model_format import KIND_ORDER, KINDS, REQUIRED, Entity, Model, entity_fields
from controller.admin.model_values import ModelError
from controller.errors import FieldError
from controller.model.field import Mode

__all__ = ["KIND_ORDER", "Entity", "Model", "ModelError", "entity_fields", "parse_model"]


def _canonical_entity(kind: str, raw: Any, where: str) -> Entity:
    if not isinstance(raw, dict):
        raise values.fail(where, "each entry must be a mapping with a name")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise values.fail(where, "an entry has no name")
    where = f"{kind} {name!r}"
    spec = KINDS[kind]
    entity: Entity = {"name": name}
    if spec.discriminator is not None:
        chosen = spec.field(spec.discriminator)
        entity[chosen.name] = chosen.check(raw.get(chosen.name), f"{where}: {chosen.name}")
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
        elif f.default is REQUIRED and not f.normalized:  # the kind's normalize rule says what its fields lack
            raise values.fail(where, f"{f.name} is required")
        elif f.default is not REQUIRED:
            entity[f.name] = f.default_value()
    if spec.normalize is not None:
        # The kind's own rule for its variant's fields, as the controller applies it to a create.
        try:
            entity = spec.normalize(entity, Mode.CREATE)
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
