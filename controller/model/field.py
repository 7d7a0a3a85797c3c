"""The declaration of a resource's fields: :class:`Field` (its wire name, schema, where it is writable and required,
defaults, references, role selectors, filterability), the three write modes, discriminated variants, the fields every
kind has, and shorthands for the fields most kinds share, so that a plain kind costs a dozen lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from storage.zitiql import FieldType

__all__ = [
    "ALL_MODES",
    "ATTRIBUTES",
    "COMMON_FIELDS",
    "COST",
    "CREATE_ONLY",
    "MISSING",
    "NAME",
    "NONE",
    "PRECEDENCE",
    "REQUIRED_CU",
    "SEMANTIC",
    "STRING_LIST",
    "TAGS_SCHEMA",
    "WRITE_MODES",
    "Field",
    "Mode",
    "Variant",
    "Variants",
    "bool_field",
    "int_field",
    "object_field",
    "role_field",
    "string_field",
    "string_list",
]


class Mode(StrEnum):
    """The three ways a client writes a resource."""

    CREATE = "create"
    UPDATE = "update"  # PUT: every field, required ones must be present
    PATCH = "patch"  # only the fields sent


ALL_MODES = frozenset(Mode)
WRITE_MODES = ALL_MODES
CREATE_ONLY = frozenset({Mode.CREATE})
NONE: frozenset[Mode] = frozenset()


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Field:
    """One wire field of a resource.

    Attributes:
        name: the wire name, also the key in the stored row.
        schema: JSON schema of the value (without nullability).
        required: modes in which a request must carry the field.
        writable: modes in which a request may carry it; others ignore it silently, as the reference does.
        default: value stored on create when absent (a callable is called for a fresh value). For a field a
            create must carry, the value to offer when the user gives none (the admin CLI fills it in).
        nullable: a request may send null (stored as null; in PATCH null clears the field).
        ref: kind whose id this field holds; checked on write, shown as an entity ref named ``ref_name``.
        ref_name: wire name of the entity ref rendered beside the id (``authPolicy`` for ``authPolicyId``).
        roles: kind whose entities this role-selector list selects (``#attr``, ``@id``, ``#all``).
        ids_of: kind whose ids the value holds beyond a single ``ref``: the items of an id list (a service's
            ``configs``) or the keys of a map keyed by id (``serviceHostingCosts``). The generic write path does
            not check these (the kind's hooks do what the API does with them); clients that write names for ids
            (the admin CLI, the model file) translate them.
        filter: the filter type when the field is filterable; None when not.
        unique: at most one row of the kind has each non-null value.
        indexed_set: the list's elements are indexed (role attributes), so filters and selectors need no scan.
        stored: False for request-only fields (a password, an enrollment request) that hooks consume.
        on_delete: what deleting the referenced row does to this one: ``refuse`` (409), ``cascade`` (delete this
            row too) or ``nullify`` (clear the field).
        hashed_into: for a request-only secret (a password): the internal field that stores its hash instead;
            the domain hashes it off the event loop before the write.
    """

    name: str
    schema: Mapping[str, Any]
    required: frozenset[Mode] = NONE
    writable: frozenset[Mode] = ALL_MODES
    default: Any = MISSING
    nullable: bool = False
    ref: str | None = None
    ref_name: str | None = None
    roles: str | None = None
    ids_of: str | None = None
    filter: FieldType | None = None
    unique: bool = False
    indexed_set: bool = False
    stored: bool = True
    on_delete: str = "refuse"
    hashed_into: str | None = None


@dataclass(frozen=True, slots=True)
class Variant:
    """The extra fields of one value of a discriminator (one posture check type)."""

    value: str
    fields: tuple[Field, ...]
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Variants:
    """A discriminator field whose value selects extra fields; an unknown value is unparsable (400)."""

    discriminator: str
    variants: tuple[Variant, ...]

    def get(self, value: Any) -> Variant | None:
        for variant in self.variants:
            if value == variant.value or value in variant.aliases:
                return variant
        return None

    def values(self) -> tuple[str, ...]:
        """Every discriminator value a request may carry: each variant's own, then the aliases."""
        return (*(v.value for v in self.variants), *(alias for v in self.variants for alias in v.aliases))


TAGS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": ["string", "boolean", "null"]},
}

COMMON_FIELDS: tuple[Field, ...] = (
    Field("id", {"type": "string"}, writable=NONE, filter=FieldType.STRING),
    Field("createdAt", {"type": "string", "format": "date-time"}, writable=NONE, filter=FieldType.DATETIME),
    Field("updatedAt", {"type": "string", "format": "date-time"}, writable=NONE, filter=FieldType.DATETIME),
    Field("tags", TAGS_SCHEMA, default=dict, nullable=True, filter=FieldType.MAP),
)


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

