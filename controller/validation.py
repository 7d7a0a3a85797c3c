"""Request bodies checked against JSON schemas derived from the resource specs.

The same derived schemas appear in our OpenAPI document, so what we document is exactly what we enforce. A
violation becomes 400 ``COULD_NOT_VALIDATE`` with the first error as ``{field, reason, value}``, worded like the
reference controller (``name in body is required``).
"""

from __future__ import annotations

from typing import Any

import jsonschema

from controller.errors import ApiError, field_cause, nested_cause
from controller.resources.spec import Field, Mode, Resource, Variant

__all__ = ["field_schema", "request_schema", "schema_error", "select_variant", "validate_body", "validate_schema"]


def field_schema(f: Field, mode: Mode) -> dict[str, Any]:
    """The JSON schema of one field's value in a request of ``mode`` (nullable where the field allows null)."""
    schema = dict(f.schema)
    if f.nullable or mode is Mode.PATCH:
        return {"anyOf": [schema, {"type": "null"}]}
    return schema


def request_schema(resource: Resource, mode: Mode, variant: Variant | None) -> dict[str, Any]:
    """The body schema of a create/update/patch request for ``resource`` (and one variant, if it has them)."""
    fields = [f for f in resource.fields_for(variant) if mode in f.writable and not f.name.startswith("_")]
    if resource.variants is not None and variant is not None:
        fields.insert(0, Field(resource.variants.discriminator, {"type": "string"},
                               required=frozenset({Mode.CREATE, Mode.PATCH})))
    tags = Field("tags", {"type": "object", "additionalProperties": {"type": ["string", "boolean", "null"]}},
                 nullable=True)
    fields.append(tags)
    return {
        "type": "object",
        "properties": {f.name: field_schema(f, mode) for f in fields},
        "required": sorted(f.name for f in fields if mode in f.required),
    }


_VALIDATORS: dict[tuple[str, Mode, str | None], jsonschema.protocols.Validator] = {}


def _validator(resource: Resource, mode: Mode, variant: Variant | None) -> jsonschema.protocols.Validator:
    key = (resource.kind, mode, variant.value if variant else None)
    validator = _VALIDATORS.get(key)
    if validator is None:
        schema = request_schema(resource, mode, variant)
        validator = _VALIDATORS[key] = jsonschema.validators.validator_for(schema)(schema)
    return validator


def select_variant(resource: Resource, body: dict[str, Any], mode: Mode, stored: str | None) -> Variant | None:
    """The variant named by the body's discriminator (or the stored one on a full update)."""
    if resource.variants is None:
        return None
    name = resource.variants.discriminator
    value = body.get(name)
    if value is None:
        if mode is Mode.UPDATE and stored is not None:
            value = stored
        else:
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
    variant = resource.variants.get(value)
    if variant is None:
        raise ApiError("COULD_NOT_PARSE_BODY", nested_cause(f'invalid {name} value: "{value}"'))
    return variant


def validate_body(resource: Resource, body: Any, mode: Mode, stored_variant: str | None = None) -> Variant | None:
    """Check a decoded request body; returns its variant. Raises ApiError on the first violation."""
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE",
                       field_cause(resource.body_name, f"{resource.body_name} in body is required", None))
    if not isinstance(body, dict):
        raise ApiError("COULD_NOT_VALIDATE",
                       field_cause(resource.body_name, f"{resource.body_name} in body must be of type object", body))
    variant = select_variant(resource, body, mode, stored_variant)
    validate_schema(_validator(resource, mode, variant), body)
    return variant


def validate_schema(validator: jsonschema.protocols.Validator, instance: Any, prefix: str = "") -> None:
    """Raise the first violation of ``instance`` against a compiled validator, as COULD_NOT_VALIDATE."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: (e.validator != "required", list(e.path)))
    if errors:
        raise schema_error(errors[0], prefix)


def _innermost(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a nullable field (``anyOf: [schema, null]``) with a non-null value, the error inside the real schema, so
    that the cause names the rule that failed (a bound, an enum) and the nested field that is wrong (``tags.x``)."""
    while error.validator == "anyOf" and error.instance is not None and error.context:
        branch = [e for e in error.context if list(e.relative_schema_path)[:1] == [0]]
        if not branch:
            break
        error = jsonschema.exceptions.best_match(branch)
    return error


def _type_names(value: Any) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def schema_error(error: jsonschema.ValidationError, prefix: str = "") -> ApiError:
    """One jsonschema error as the reference controller's field cause."""
    error = _innermost(error)
    path = prefix + "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i or prefix else str(p))
                            for i, p in enumerate(error.absolute_path))
    if error.validator == "required":
        missing = str(error.message).split("'")[1]
        field = f"{path}.{missing}" if path else missing
        return ApiError("COULD_NOT_VALIDATE", field_cause(field, f"{field} in body is required", None))
    field = path or "(root)"
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kind == "type":
        reason = f"{field} in body must be of type {_type_names(error.validator_value)}"
    elif kind == "enum":
        reason = f"{field} in body should be one of {error.validator_value}"
    elif kind in ("minimum", "maximum"):
        word = "greater than or equal to" if kind == "minimum" else "less than or equal to"
        reason = f"{field} in body should be {word} {error.validator_value}"
    elif kind in ("minLength", "maxLength"):
        word = "at least" if kind == "minLength" else "at most"
        reason = f"{field} in body should be {word} {error.validator_value} chars long"
    elif kind == "minItems":
        reason = f"{field} in body should have at least {error.validator_value} items"
    elif kind == "anyOf" and "anyOf" in schema:
        inner = schema["anyOf"][0]
        reason = f"{field} in body must be of type {inner.get('type', 'object')}"
        if "enum" in inner:
            reason = f"{field} in body should be one of {inner['enum']}"
    else:
        reason = f"{field} in body is invalid: {error.message}"
    return ApiError("COULD_NOT_VALIDATE", field_cause(field, reason, error.instance))
