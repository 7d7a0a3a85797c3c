"""A JSON schema, as we validate with, rendered in the Swagger 2.0 dialect of our OpenAPI documents.

Swagger 2.0 has no unions and no null type: a nullable value carries ``x-nullable: true``, and the keywords it does
not know are dropped (those it shares with JSON Schema are kept as they are).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["swagger_schema"]

_KEEP = frozenset({"format", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
                   "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "multipleOf", "default",
                   "description", "title", "readOnly", "example", "minProperties", "maxProperties"})


def swagger_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema rendered as a Swagger 2.0 schema object.

    ``anyOf``/``oneOf`` with a null option and ``type`` lists with ``"null"`` become ``x-nullable``; other unions, which
    Swagger 2.0 cannot state, keep their options under ``x-anyOf``/``x-oneOf`` and leave the value unconstrained;
    ``const`` becomes a one-value ``enum``; numeric ``exclusiveMinimum``/``exclusiveMaximum`` become the boolean form.
    Keywords Swagger 2.0 does not know are dropped.
    """
    out: dict[str, Any] = {}
    nullable = False
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options is None:
            continue
        real = [o for o in options if o.get("type") != "null"]
        nullable = nullable or len(real) < len(options)
        if len(real) == 1:
            inner = swagger_schema(real[0])
            nullable = inner.pop("x-nullable", False) or nullable
            out.update(inner)
        elif real:
            out[f"x-{key}"] = [swagger_schema(o) for o in real]
    kind = schema.get("type")
    if isinstance(kind, list):
        nullable = nullable or "null" in kind
        real_types = [k for k in kind if k != "null"]
        if len(real_types) == 1:
            out["type"] = real_types[0]
        elif real_types:
            out["x-types"] = real_types
    elif kind == "null":
        nullable = True
    elif kind is not None:
        out["type"] = kind
    for key, value in schema.items():
        if key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key in _KEEP:
            out[key] = value
        elif key == "properties":
            out[key] = {name: swagger_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = swagger_schema(value) if isinstance(value, Mapping) else {}
        elif key == "additionalProperties":
            out[key] = value if isinstance(value, bool) else swagger_schema(value)
        elif key == "required" and value:
            out[key] = list(value)
        elif key == "allOf":
            out[key] = [swagger_schema(sub) for sub in value]
        elif key.startswith("x-"):
            out[key] = value
    if nullable:
        out["x-nullable"] = True
        if "enum" in out and None not in out["enum"]:
            # Without null among its values an enum would forbid the null that x-nullable allows.
            out["enum"] = [*out["enum"], None]
    return out
