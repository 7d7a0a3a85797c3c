"""Config types (a name and a JSON schema) and configs (data of one type, validated against the type's schema).

A config type's schema must itself be a valid JSON schema; a config's data must satisfy its type's schema. A config
type cannot be deleted while configs use it (the generic reference rule answers 409). Services list the configs they
carry: each listed id must exist, a service carries at most one config per type, and deleting a config removes it
from the services that listed it.

Schemas are checked offline: a ``$ref`` that points outside the schema is never fetched (that would put network I/O
inside the write transaction), so it fails validation instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import referencing
import referencing.exceptions

from controller.clock import format_time
from controller.errors import FieldError
from controller.model.field import CREATE_ONLY, NAME, REQUIRED_CU, Mode, object_field, string_field
from controller.model.spec import Change, Hooks, Resource, WriteContext
from controller.model.validation import validate_schema
from storage.zitiql import FieldType, Symbol

__all__ = ["CONFIGS", "CONFIG_TYPES", "check_service_configs"]

# Without a ``$schema`` a schema is read as draft 7, the draft the reference's own config types declare.
_DEFAULT_DRAFT = jsonschema.Draft7Validator
_OFFLINE: referencing.Registry[Any] = referencing.Registry()


def _validator_class(schema: Mapping[str, Any]) -> type[jsonschema.protocols.Validator]:
    cls: type[jsonschema.protocols.Validator] = jsonschema.validators.validator_for(schema, default=_DEFAULT_DRAFT)
    return cls


def _config_type_validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None,
                          mode: Mode) -> None:
    schema = row.get("schema")
    if schema is None:
        row["schema"] = schema = {}
    try:
        _validator_class(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise FieldError("schema", f"schema{where} is not valid JSON schema: {exc.message}",
                         json.dumps(schema, sort_keys=True)) from None


CONFIG_TYPES = Resource(
    kind="config-types", singular="configType", op_name="ConfigType", op_plural="ConfigTypes", tag="Config",
    body_name="configType",
    fields=(
        NAME,
        object_field("schema", nullable=True, default=dict),
    ),
    hooks=Hooks(validate=_config_type_validate),
)


def _config_validate(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None, mode: Mode) -> None:
    config_type = ctx.txn.get("config-types", row["configTypeId"]) or {}
    schema = config_type.get("schema") or {}
    if not schema:
        return
    cls = _validator_class(schema)
    validator = cls(schema, registry=_OFFLINE, format_checker=cls.FORMAT_CHECKER)
    try:
        validate_schema(validator, row.get("data"), "data")
    except referencing.exceptions.Unresolvable as exc:
        raise FieldError("data", f"data could not be validated: the config type's schema refers to {exc.ref}, "
                         "which is not part of the schema", None) from None


def _config_after_write(ctx: WriteContext, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
    if old is None or new is not None:
        return
    # A deleted config drops out of every service that listed it, as the reference unlinks it.
    config_id = old["id"]
    for service_id in ctx.txn.ids_by_set("services", "configs", config_id):
        service = ctx.txn.get("services", service_id)
        if service is None:
            continue
        updated = {**service, "configs": [c for c in service.get("configs") or [] if c != config_id],
                   "updatedAt": format_time(ctx.now)}
        ctx.txn.put("services", updated)
        ctx.changes.append(Change("services", service_id, service, updated))


def _config_type_of(row: Mapping[str, Any]) -> Any:
    return row.get("configTypeId")


CONFIGS = Resource(
    kind="configs", singular="config", op_name="Config", op_plural="Configs", tag="Config", body_name="config",
    fields=(
        NAME,
        string_field("configTypeId", required=frozenset({Mode.CREATE}), writable=CREATE_ONLY, ref="config-types",
                     ref_name="configType"),
        object_field("data", required=REQUIRED_CU, filter=FieldType.MAP),
    ),
    # The reference names the config type symbol ``type`` in filters.
    extra_filter_fields={"type": Symbol(FieldType.STRING, getter=_config_type_of)},
    hooks=Hooks(validate=_config_validate, after_write=_config_after_write),
)


def check_service_configs(ctx: WriteContext, row: dict[str, Any], old: Mapping[str, Any] | None,
                          mode: Mode) -> None:
    """A service's ``configs`` must name existing configs, at most one per config type (duplicates collapse)."""
    ids = list(dict.fromkeys(row.get("configs") or []))
    row["configs"] = ids
    if not ids:
        return
    configs = {c["id"]: c for c in ctx.txn.get_many("configs", ids)}
    missing = [i for i in ids if i not in configs]
    if missing:
        raise FieldError("configs", "no config found with the given ids", missing)
    by_type: dict[str, str] = {}
    for config_id in ids:
        type_id = configs[config_id].get("configTypeId", "")
        if type_id in by_type:
            type_name = (ctx.txn.get("config-types", type_id) or {}).get("name", type_id)
            raise FieldError("configs", f"configs {by_type[type_id]} and {config_id} have the same config type "
                             f"{type_name}; a service may carry only one config of each type", ids)
        by_type[type_id] = config_id
