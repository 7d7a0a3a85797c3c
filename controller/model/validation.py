"""Request bodies checked against JSON schemas derived from the resource specs.

The same derived schemas appear in our OpenAPI document, so what we document is exactly what we enforce. A
violation becomes 400 ``COULD_NOT_VALIDATE`` with the first error as ``{field, reason, value}``, worded like the
reference controller (``name in body is required``).

Each schema is also compiled with fastjsonschema, and that compiled check runs first: most bodies are valid, and it
accepts them at a fraction of jsonschema's cost. Only a body it rejects goes through jsonschema, which stays the one
judge of what is wrong and the one source of every error's wording. The compiled check must therefore accept
exactly what jsonschema accepts (tests/controller/test_validation_fast.py holds the two to that for every schema
here); a schema that does not compile simply has no compiled check.

Config data is left to jsonschema alone: a config type's schema is the client's, compiling one takes milliseconds
inside the write transaction that first meets it, and config writes are too rare to win that back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import fastjsonschema
import jsonschema

from controller.errors import ApiError, field_cause, nested_cause
from controller.model.field import Field, Mode, Variant
from controller.model.spec import Resource

__all__ = ["FastCheck", "SchemaCheck", "fast_check", "field_schema", "request_schema", "schema_error", "select_variant",
           "validate_body", "validate_schema"]

FastCheck = Callable[[Any], object]
"""A compiled schema: returns when the instance is valid, raises when it is not."""


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


class SchemaCheck(NamedTuple):
    """One schema compiled both ways: ``fast`` (:func:`fast_check`, None when it does not compile) accepts the
    usual valid body cheaply; ``validator`` (jsonschema) judges and words everything ``fast`` rejects."""

    validator: jsonschema.protocols.Validator
    fast: FastCheck | None

    @classmethod
    def of(cls, schema: Mapping[str, Any]) -> SchemaCheck:
        return cls(jsonschema.validators.validator_for(schema)(schema), fast_check(schema))

    def validate(self, instance: Any, prefix: str = "") -> None:
        """:func:`validate_schema` with both compiled forms."""
        validate_schema(self.validator, instance, prefix, fast=self.fast)


# Built on first use: compiling takes a few milliseconds, once per kind, mode and variant in the process.
_VALIDATORS: dict[tuple[str, Mode, str | None], SchemaCheck] = {}


def _validator(resource: Resource, mode: Mode, variant: Variant | None) -> SchemaCheck:
    key = (resource.kind, mode, variant.value if variant else None)
    check = _VALIDATORS.get(key)
    if check is None:
        check = _VALIDATORS[key] = SchemaCheck.of(request_schema(resource, mode, variant))
    return check


class _NoRemote(Mapping[str, Callable[[str], Any]]):
    """fastjsonschema's ``handlers``: it fetches a remote ``$ref`` of any URI scheme it has no handler for, so this
    claims every scheme and refuses it. Compiling never does network or file I/O; such a schema gets no fast check."""

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _refuse(uri: str) -> Any:
    raise fastjsonschema.JsonSchemaDefinitionException(f"remote reference {uri} is not fetched")


_NO_REMOTE = _NoRemote()


def fast_check(schema: Mapping[str, Any]) -> FastCheck | None:
    """``schema`` compiled by fastjsonschema, or None when it cannot be compiled (jsonschema then decides alone).

    The compiled check fills in no defaults (the instance is never changed) and asserts no formats, like the
    jsonschema validators built without a format checker it stands in front of; a remote ``$ref`` is never fetched.
    Without ``$schema`` the schema is read by fastjsonschema's newest draft. ``schema`` itself is not changed.
    """
    try:
        # A copy: compiling rewrites every ``$ref`` in place. Detailed exceptions (the default) only cost a rejection,
        # and without them fastjsonschema 2.22 cannot compile ``const``.
        return fastjsonschema.compile(copy.deepcopy(dict(schema)), handlers=_NO_REMOTE, use_default=False,
                                      use_formats=False)
    except Exception:  # whatever stops the compile only costs the fast path, never the request
        return None


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
    _validator(resource, mode, variant).validate(body)
    return variant


def validate_schema(validator: jsonschema.protocols.Validator, instance: Any, prefix: str = "",
                    fast: FastCheck | None = None) -> None:
    """Raise the first violation of ``instance`` against a compiled validator, as COULD_NOT_VALIDATE.

    ``fast`` (:func:`fast_check` of the same schema) is tried first: when it accepts, so would ``validator``. When
    it rejects, or fails in any way, ``validator`` decides and words the error.
    """
    if fast is not None and _accepts(fast, instance):
        return
    errors = sorted(validator.iter_errors(instance), key=lambda e: (e.validator != "required", list(e.path)))
    if errors:
        raise schema_error(errors[0], prefix)


def _accepts(fast: FastCheck, instance: Any) -> bool:
    try:
        fast(instance)
    except Exception:  # a rejection, or a failure of the generated code (an infinite bound): jsonschema decides
        return False
    return True


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
