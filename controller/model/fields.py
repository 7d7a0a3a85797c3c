"""Shorthands for the fields most kinds share, so that a plain kind costs a dozen lines."""

from __future__ import annotations

from typing import Any

from controller.model.spec import Field, Mode
from storage.zitiql import FieldType

__all__ = [
    "ATTRIBUTES", "COST", "NAME", "PRECEDENCE", "REQUIRED_CU", "SEMANTIC",
    "bool_field", "int_field", "object_field", "role_field", "string_field", "string_list",
]

REQUIRED_CU = frozenset({Mode.CREATE, Mode.UPDATE})
STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


def string_field(name: str, *, required: frozenset[Mode] = frozenset(), filterable: bool = True,
                 **kwargs: Any) -> Field:
    return Field(name, {"type": "string"}, required=required,
                 filter=FieldType.STRING if filterable else None, **kwargs)


def bool_field(name: str, *, required: frozenset[Mode] = frozenset(), filterable: bool = True,
               **kwargs: Any) -> Field:
    return Field(name, {"type": "boolean"}, required=required, filter=FieldType.BOOL if filterable else None,
                 **kwargs)


def int_field(name: str, *, minimum: int | None = None, maximum: int | None = None,
              required: frozenset[Mode] = frozenset(), filterable: bool = True, **kwargs: Any) -> Field:
    schema: dict[str, Any] = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return Field(name, schema, required=required, filter=FieldType.NUMBER if filterable else None, **kwargs)


def object_field(name: str, schema: dict[str, Any] | None = None, **kwargs: Any) -> Field:
    return Field(name, schema or {"type": "object"}, **kwargs)


def string_list(name: str, **kwargs: Any) -> Field:
    return Field(name, STRING_LIST, **kwargs)


def role_field(name: str, target: str) -> Field:
    """A role-selector list over ``target`` (``#attr``, ``@id``, ``#all``), stored sorted."""
    return Field(name, STRING_LIST, default=list, roles=target, filter=FieldType.SET)


NAME = string_field("name", required=REQUIRED_CU, unique=True)
ATTRIBUTES = Field("roleAttributes", STRING_LIST, default=list, nullable=True, filter=FieldType.SET,
                   indexed_set=True)
SEMANTIC = Field("semantic", {"type": "string", "enum": ["AllOf", "AnyOf"]}, required=REQUIRED_CU,
                 default="AllOf", filter=FieldType.STRING)
COST = int_field("cost", minimum=0, maximum=65535, default=0, nullable=True)
PRECEDENCE = Field("precedence", {"type": "string", "enum": ["default", "required", "failed"]}, default="default",
                   filter=FieldType.STRING)

