"""The admin CLI's kinds and the model file's format agree with the controller's resource specs, kind by kind and
field by field: operations, field names, enums, defaults, required-ness, create-only fields, references, variants.

The checks read the specs themselves (not the helpers the CLI derives its views with), so a view that drifts from
the specs (one written by hand, or derived wrongly) fails here; the tests at the end change a spec and show that the
derived views follow while the shipped ones would then disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import click
import pytest

from controller.admin import flags as flag_module
from controller.admin import model_format
from controller.admin.admin_client import AdminClient
from controller.admin.cli_table import TABLE, FlagText, KindText
from controller.admin.flags import FlagContext
from controller.admin.kinds import KINDS, Kind, derive_kinds
from controller.admin.model_format import (
    ANSWERED_AS,
    FILE_KINDS,
    KIND_ORDER,
    LOOKUP_KINDS,
    REQUIRED,
    SPELLINGS,
    FieldSpec,
    KindSpec,
    derive_format,
    file_order,
    kind_spec,
)
from controller.admin.model_values import ModelError
from controller.model.field import MISSING, Field, Mode, Variant
from controller.model.registry import Registry
from controller.model.spec import Resource
from controller.resources.catalog import RESOURCES, build_registry
from storage.zitiql import FieldType

REGISTRY = build_registry()
FILE_SPECS = model_format.KINDS


# What the specs say ---------------------------------------------------------------------------------------------

def _default(f: Field) -> Any:
    return f.default() if callable(f.default) else f.default


def _request_fields(resource: Resource) -> dict[str, tuple[Field, Variant | None]]:
    """Every field a request body may carry (tags included; internal ``_`` fields and the discriminator not),
    with its variant; for a kind with a create of its own, that body's schema and required fields."""
    found: dict[str, tuple[Field, Variant | None]] = {}
    tags = resource.field("tags")
    assert tags is not None
    variants = resource.variants.variants if resource.variants is not None else ()
    for f, variant in [(tags, None), *((f, None) for f in resource.fields),
                       *((f, v) for v in variants for f in v.fields)]:
        if f.writable and not f.name.startswith("_"):
            found.setdefault(f.name, (f, variant))
    if resource.create_schema is not None:
        properties = resource.create_schema["properties"]
        required = set(resource.create_schema.get("required", ()))
        found = {name: (replace(f, schema=properties[name],
                                required=frozenset({Mode.CREATE}) if name in required else frozenset()), v)
                 for name, (f, v) in found.items() if name in properties}
    return found


def _schema_at(schema: Mapping[str, Any], steps: Sequence[str]) -> Mapping[str, Any] | None:
    for step in steps:
        properties = schema.get("properties") or {}
        if step not in properties:
            return None
        schema = properties[step]
    return schema


def _type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    return next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind


class _Names:
    """A client that resolves every name to ``KIND/NAME``."""

    def resolve(self, kind: str, name: str) -> str:
        return f"{kind}/{name}"


_CONTEXT = FlagContext(cast(AdminClient, _Names()), "new-name", "--flag")


# The CLI ----------------------------------------------------------------------------------------------------------

def _flag_problems(resource: Resource, kind: Kind, flag: Any) -> list[str]:
    where = f"{kind.path} --{flag.name}"
    head, *inner = flag.field.split(".")
    fields = _request_fields(resource)
    if resource.variants is not None and head == resource.variants.discriminator:
        values = [v.value for v in resource.variants.variants]
        choices = list(getattr(flag.kind, "choices", []))
        return [] if choices == values else [f"{where}: choices {choices}, the spec's variants {values}"]
    if head not in fields:
        return [f"{where}: {head} is no field a request writes"]
    f, variant = fields[head]
    schema = _schema_at(f.schema, inner)
    if schema is None:
        return [f"{where}: {flag.field} is not in the field's schema"]
    problems = []
    enum = schema.get("enum")
    choices = list(getattr(flag.kind, "choices", []) or [])
    if enum is not None and choices != list(enum):
        problems.append(f"{where}: choices {choices}, the spec's enum {list(enum)}")
    if enum is None and choices and not set(choices) <= set(schema.get("properties") or {}):
        problems.append(f"{where}: choices {choices} are neither the spec's enum nor keys of its request")
    if _type(schema) == "integer" and flag.kind is not click.INT:
        problems.append(f"{where}: an integer field, not an INT option")
    if (_type(schema) == "boolean") != flag.switch:
        problems.append(f"{where}: a switch exactly when the field is a boolean")
    if flag.variants != (frozenset({variant.value}) if variant is not None else frozenset()):
        problems.append(f"{where}: variants {sorted(flag.variants)}, the spec's {variant and variant.value}")
    target = f.ref if not inner else None
    if target is not None and flag.convert("x", _CONTEXT) != f"{target}/x":
        problems.append(f"{where}: does not resolve names of {target}")
    if f.roles is not None and flag.convert("@x,#y", _CONTEXT) != [f"@{f.roles}/x", "#y"]:
        problems.append(f"{where}: does not resolve @names of {f.roles}")
    if f.ids_of is not None and _type(f.schema) == "array" and flag.convert("x,y", _CONTEXT) != [
            f"{f.ids_of}/x", f"{f.ids_of}/y"]:
        problems.append(f"{where}: does not resolve names of {f.ids_of}")
    default = _default(f)
    if not inner and Mode.CREATE in f.required and default in (MISSING, None) and kind.creatable and \
            "required on create" not in flag.help:
        problems.append(f"{where}: its help does not say it is required on create")
    if not inner and isinstance(default, bool) and f"default: {'yes' if default else 'no'}" not in flag.help:
        problems.append(f"{where}: its help does not give the default {default}")
    return problems


def _column_problems(resource: Resource, kind: Kind) -> list[str]:
    shown: dict[str, Mapping[str, Any]] = {f.name: f.schema for f in resource.all_fields()}
    shown.update({f.ref_name: {} for f in resource.all_fields() if f.ref_name})
    shown.update(resource.presented)
    if resource.variants is not None:
        shown[resource.variants.discriminator] = {"type": "string"}
    problems = []
    for header, path in kind.columns:
        head, *inner = path.split(".")
        if head not in shown:
            problems.append(f"{kind.path} column {header!r}: answers carry no {head}")
        elif inner and "properties" in shown[head] and _schema_at(shown[head], inner) is None:
            problems.append(f"{kind.path} column {header!r}: {path} is not in the field's schema")
    return problems


def cli_disagreements(registry: Registry, kinds: Sequence[Kind]) -> list[str]:
    """Where the CLI's kinds say something other than the specs of ``registry``."""
    listable = {r.kind for r in registry.resources.values() if "list" in r.operations}
    problems = [] if {k.path for k in kinds} == listable else [
        f"kinds {sorted({k.path for k in kinds} ^ listable)}: listed by one of the CLI and the controller only"]
    for kind in kinds:
        resource = registry.resources.get(kind.path)
        if resource is None:
            continue
        operations = (("create" in resource.operations or resource.create_schema is not None),
                      "patch" in resource.operations, "delete" in resource.operations)
        if (kind.creatable, kind.updatable, kind.deletable) != operations:
            problems.append(f"{kind.path}: operations {(kind.creatable, kind.updatable, kind.deletable)}, the "
                            f"spec's {operations}")
        if kind.singular.replace("-", "") != resource.singular.lower():
            problems.append(f"{kind.path}: singular {kind.singular}, the spec's {resource.singular}")
        if kind.named != (resource.field("name") is not None):
            problems.append(f"{kind.path}: named {kind.named}")
        discriminator = resource.variants.discriminator if resource.variants is not None else None
        if kind.discriminator != discriminator:
            problems.append(f"{kind.path}: discriminator {kind.discriminator}, the spec's {discriminator}")
        fields = _request_fields(resource)
        defaults = {name: _default(f) for name, (f, variant) in fields.items() if kind.creatable and variant is None
                    and Mode.CREATE in f.required and _default(f) not in (MISSING, None)}
        if dict(kind.create_defaults) != defaults:
            problems.append(f"{kind.path}: create defaults {dict(kind.create_defaults)}, the spec's {defaults}")
        for flag in kind.flags:
            problems.extend(_flag_problems(resource, kind, flag))
        problems.extend(_column_problems(resource, kind))
    return problems


# The model file ---------------------------------------------------------------------------------------------------

def _rejects(check: Any, value: Any) -> bool:
    try:
        check(value, "here")
    except ModelError:
        return True
    return False


def _value_problems(where: str, check: Any, schema: Mapping[str, Any]) -> list[str]:
    """``check`` accepts what ``schema`` allows and refuses what it does not (its enum, bounds, type)."""
    problems = []
    enum = schema.get("enum")
    if enum is not None:
        problems += [f"{where}: refuses {value!r}" for value in enum if _rejects(check, value)]
        if not _rejects(check, "not-" + "-".join(enum)):
            problems.append(f"{where}: takes a value outside {enum}")
    if _type(schema) == "integer":
        for bound, step in (("minimum", -1), ("maximum", 1)):
            if bound in schema and (_rejects(check, schema[bound]) or not _rejects(check, schema[bound] + step)):
                problems.append(f"{where}: does not hold to the {bound} {schema[bound]}")
        if not _rejects(check, "1"):
            problems.append(f"{where}: takes a text for a number")
    if _type(schema) == "boolean" and (_rejects(check, True) or not _rejects(check, "yes")):
        problems.append(f"{where}: is no boolean")
    return problems


def _file_field_problems(resource: Resource, spec: KindSpec, f: Field, variant: Variant | None) -> list[str]:
    where = f"{spec.kind} {f.name}"
    if not f.stored:
        spelled = [fs for fs in spec.fields if fs.wire_name == f.name and not fs.compared]
        return [] if spelled or f.name == "tags" else [f"{where}: a request field the file cannot carry"]
    matching = [fs for fs in spec.fields if fs.wire_name == f.name]
    if len(matching) != 1:
        return [f"{where}: not in the file (or twice)"]
    fs: FieldSpec = matching[0]
    problems = []
    default = _default(f)
    expected = REQUIRED if default is MISSING and Mode.CREATE in f.required else None if default is MISSING else default
    if f.ref is not None:
        if (fs.name, fs.ref, fs.ref_style) != (f.ref_name or f.name, f.ref, "name"):
            problems.append(f"{where}: not written as the name of a {f.ref} row under {f.ref_name}")
        if expected is not REQUIRED and (fs.default, fs.default_id) != (None, default if default else None):
            problems.append(f"{where}: left out, it is not the spec's default {default!r}")
    elif fs.default != expected or (expected is REQUIRED) != (fs.default is REQUIRED):
        problems.append(f"{where}: default {fs.default!r}, the spec's {expected!r}")
    target = f.roles or f.ids_of
    if f.ref is None and fs.ref != target:
        problems.append(f"{where}: refers to {fs.ref}, the spec to {target}")
    if fs.variant != (variant.value if variant is not None else None):
        problems.append(f"{where}: variant {fs.variant}, the spec's {variant and variant.value}")
    if fs.create_only != (f.writable == frozenset({Mode.CREATE})):
        problems.append(f"{where}: create-only {fs.create_only}, the spec's writable {sorted(f.writable)}")
    if fs.normalized:  # a variant's fields are checked together by its kind's own rule
        return problems
    if f.ref is None and target is None:
        problems += _value_problems(where, fs.check, f.schema)
    items = f.schema.get("additionalProperties")
    if isinstance(items, Mapping) and _type(f.schema) == "object":
        problems += _value_problems(where + " values", lambda v, w: fs.check({"k": v}, w), items)
    return problems


def format_disagreements(registry: Registry, specs: Mapping[str, KindSpec], order: Sequence[str],
                         lookups: Sequence[str]) -> list[str]:
    """Where the model file's kinds say something other than the specs of ``registry``."""
    problems = []
    for kind, spec in specs.items():
        resource = registry[kind]
        fields = _request_fields(resource)
        for f, variant in fields.values():
            problems += _file_field_problems(resource, spec, f, variant)
        known = set(fields) | {"name"} | ({resource.variants.discriminator} if resource.variants else set())
        problems += [f"{kind} {fs.name}: no field of the spec" for fs in spec.fields if fs.wire_name not in known]
        if resource.variants is not None:
            chosen = spec.field(resource.variants.discriminator)
            values = [v.value for v in resource.variants.variants]
            if not chosen.create_only or any(_rejects(chosen.check, v) for v in values) or not _rejects(
                    chosen.check, "NOPE"):
                problems.append(f"{kind} {chosen.name}: not the fixed choice of {values}")
    targets = {kind: {t for f in registry[kind].all_fields() for t in (f.ref, f.roles, f.ids_of) if t}
               for kind in specs}
    for index, kind in enumerate(order):
        later = [t for t in targets[kind] if t in specs and t != kind and order.index(t) > index]
        problems += [f"{kind} comes before {t}, which it refers to" for t in later]
    outside = {t for kind in specs for t in targets[kind] if t not in specs}
    if set(lookups) != outside:
        problems.append(f"the file refers by name to {sorted(outside)}, looked up: {sorted(lookups)}")
    return problems


# The shipped views ------------------------------------------------------------------------------------------------

def test_the_cli_kinds_agree_with_every_spec() -> None:
    assert cli_disagreements(REGISTRY, KINDS) == []
    assert [kind.path for kind in KINDS[:len(TABLE)]] == [text.path for text in TABLE]


def test_the_model_file_agrees_with_every_spec() -> None:
    assert list(FILE_SPECS) == list(KIND_ORDER)
    assert set(KIND_ORDER) == set(FILE_KINDS)
    assert format_disagreements(REGISTRY, FILE_SPECS, KIND_ORDER, LOOKUP_KINDS) == []


def test_the_file_and_cli_spellings_name_real_fields() -> None:
    for (kind, name), spelling in SPELLINGS.items():
        f = REGISTRY[kind].field(name)
        assert f is not None and not f.stored and Mode.CREATE in f.writable, (kind, name)
        assert set(flag_module.ENROLL_METHODS) <= set(f.schema["properties"])
        assert spelling.write(spelling.check("ott", "here")) == {"ott": True}
    for (kind, name), key in ANSWERED_AS.items():
        resource = REGISTRY[kind]
        assert resource.field(name) is not None and {name, key} <= set(resource.presented), (kind, name)
    # The OS types the --os and --process formats take are those of the posture check schemas.
    checks = REGISTRY["posture-checks"]
    assert checks.variants is not None
    schemas = {f.name: f.schema for v in checks.variants.variants for f in v.fields}
    for path in (("operatingSystems", "type"), ("processes", "osType")):
        assert list(schemas[path[0]]["items"]["properties"][path[1]]["enum"]) == list(flag_module.OS_TYPES)


# Change a spec: the derived views follow, the shipped ones would disagree -----------------------------------------

def _changed(resource: Resource, **changes: Any) -> Registry:
    return Registry([replace(resource, **changes) if r.kind == resource.kind else r for r in RESOURCES])


def _with_field(resource: Resource, name: str, **changes: Any) -> tuple[Field, ...]:
    return tuple(replace(f, **changes) if f.name == name else f for f in resource.fields)


def _views(registry: Registry, table: Sequence[KindText] = TABLE) -> tuple[list[str], list[str]]:
    specs, lookups = derive_format(registry)
    return cli_disagreements(registry, derive_kinds(registry, table)), format_disagreements(
        registry, specs, tuple(specs), lookups)


def test_an_enum_value_added_to_a_spec_reaches_the_cli_and_the_file() -> None:
    identities = REGISTRY["identities"]
    types = [*identities.field("type").schema["enum"], "Laptop"]  # type: ignore[union-attr]
    registry = _changed(identities, fields=_with_field(identities, "type", schema={"type": "string", "enum": types}))
    assert _views(registry) == ([], [])
    derived = derive_kinds(registry)[0].flag("type")
    assert derived is not None and "Laptop" in getattr(derived.kind, "choices", ())
    assert any("Laptop" in problem for problem in cli_disagreements(registry, KINDS))
    assert format_disagreements(registry, FILE_SPECS, KIND_ORDER, LOOKUP_KINDS) == [
        "identities type: refuses 'Laptop'"]


def test_a_field_added_to_a_spec_reaches_the_file_and_a_flag_that_names_it() -> None:
    services = REGISTRY["services"]
    colour = Field("colour", {"type": "string", "enum": ["red", "blue"]}, default="red", filter=FieldType.STRING)
    registry = _changed(services, fields=(*services.fields, colour))
    table = [replace(text, flags=(*text.flags, FlagText("colour", "colour", "its colour")))
             if text.path == "services" else text for text in TABLE]
    assert _views(registry, table) == ([], [])
    derived = kind_spec(registry, registry["services"]).field("colour")
    assert (derived.default, derived.check("blue", "here")) == ("red", "blue")
    flag = derive_kinds(registry, table)[1].flag("colour")
    assert flag is not None and list(getattr(flag.kind, "choices", ())) == ["red", "blue"]
    assert "default: red" in flag.help
    assert format_disagreements(registry, FILE_SPECS, KIND_ORDER, LOOKUP_KINDS) == [
        "services colour: not in the file (or twice)"]
    unknown = [replace(text, flags=(FlagText("hue", "hue", "no such field"),)) if text.path == "services" else text
               for text in TABLE]
    with pytest.raises(ValueError, match="flag --hue names hue, which no request carries"):
        derive_kinds(registry, unknown)


def test_references_give_the_file_its_order() -> None:
    checks = REGISTRY["posture-checks"]
    owner = Field("ownerId", {"type": "string"}, ref="identities", ref_name="owner", nullable=True, default=None)
    registry = _changed(checks, fields=(*checks.fields, owner))
    assert _views(registry) == ([], [])
    order = tuple(derive_format(registry)[0])
    assert order.index("identities") < order.index("posture-checks") < order.index("service-policies")
    assert "posture-checks comes before identities, which it refers to" in format_disagreements(
        registry, FILE_SPECS, KIND_ORDER, LOOKUP_KINDS)
    circular = {"a": KindSpec("a", (FieldSpec("b", str, ref="b"),)),
                "b": KindSpec("b", (FieldSpec("a", str, ref="a"),))}
    with pytest.raises(ValueError, match="cycle"):
        file_order(circular, ["a", "b"])


def test_operations_come_from_the_spec() -> None:
    services = REGISTRY["services"]
    registry = _changed(services, operations=services.operations - {"delete"})
    assert _views(registry) == ([], [])
    assert not derive_kinds(registry)[1].deletable
    assert cli_disagreements(registry, KINDS) == [
        "services: operations (True, True, True), the spec's (True, True, False)"]
