"""The declarative description of a resource kind, from which models, routes, storage layout and OpenAPI derive.

A :class:`Resource` lists its :class:`Field` s (wire names, JSON schema of the value, where each is writable and
required, defaults, references, role selectors, filterability), its association lists, an optional discriminator
(:class:`Variants`) and a few named hooks for the real domain rules. Everything generic (request validation,
the six standard routes, indexes, filterable fields, the OpenAPI document) is computed from these specs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from storage.zitiql import FieldType

if TYPE_CHECKING:
    from controller.model.context import ReadContext, WriteContext

__all__ = [
    "ALL_MODES",
    "CREATE_ONLY",
    "MISSING",
    "WRITE_MODES",
    "AfterCreate",
    "Association",
    "Field",
    "Hooks",
    "Mode",
    "Present",
    "Resource",
    "Variant",
    "Variants",
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


@dataclass(frozen=True, slots=True)
class Association:
    """A read-only list ``GET /{kind}/{id}/{path}`` of rows of ``target`` related to one row.

    ``resolve(ctx, row)`` returns the related ids; the generic list machinery then filters, sorts and pages them.
    """

    path: str
    target: str
    resolve: Callable[[ReadContext, Mapping[str, Any]], set[str]]
    operation_id: str | None = None
    admin_only: bool = True


# Hook signatures: every hook is optional; each raises an ApiError to refuse.
Validate = Callable[["WriteContext", dict[str, Any], "Mapping[str, Any] | None", Mode], None]
Normalize = Callable[[dict[str, Any], Mode], dict[str, Any]]
BeforeDelete = Callable[["WriteContext", Mapping[str, Any]], None]
Present = Callable[["ReadContext", Mapping[str, Any], dict[str, Any]], None]
AfterCreate = Callable[["WriteContext", Mapping[str, Any], Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Hooks:
    """The few real domain rules of a kind.

    Attributes:
        prepare: pure rewrite of the raw request body before schema validation (accepted aliases and spellings).
        normalize: pure rewrite of a schema-valid request body before anything else (aliases, canonical forms).
        validate: runs in the write transaction with the new row and the old one (None on create).
        before_delete: runs in the write transaction before a delete; refuses referenced or protected rows.
        after_write: runs in the write transaction after the row is stored (cascades to other rows).
        after_create: runs in the write transaction after a create is stored, with the stored row and the request
            body, request-only fields included (what a create sets up beside its row, such as an enrollment).
        present: adds computed fields to a response copy of the row.
    """

    prepare: Normalize | None = None
    normalize: Normalize | None = None
    validate: Validate | None = None
    before_delete: BeforeDelete | None = None
    after_write: Callable[[WriteContext, Mapping[str, Any] | None, Mapping[str, Any] | None], None] | None = None
    after_create: AfterCreate | None = None
    present: Present | None = None


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind of resource.

    Attributes:
        kind: collection path segment and storage name (``service-policies``).
        singular: store name used in messages (``servicePolicy with id X not found``).
        op_name: operationId stem: ``ServicePolicy`` gives listServicePolicies, createServicePolicy, ...
        op_plural: plural stem for the list operation (``ServicePolicies``).
        tag: OpenAPI tag.
        fields: the common fields (``id``, ``createdAt``, ``updatedAt``, ``tags`` are added for every kind), in the
            order answers, the OpenAPI document and the admin CLI's model file show them.
        variants: discriminated extra fields.
        operations: which of list/create/detail/update/patch/delete exist.
        associations: ``GET /{kind}/{id}/{path}`` lists.
        role_attributes_path: path of the role-attributes list of this kind (``identity-role-attributes``).
        role_filter: lists take ``roleFilter``/``roleSemantic``.
        admin_only: every standard operation needs an admin.
        body_name: name of the body parameter in messages (``identity in body is required``).
        aliases: extra collection paths served by the same routes (``transit-routers`` for ``routers``).
        extra_filter_fields: computed filterable symbols beyond the stored fields.
        seed: rows present in a new database (system rows such as posture check types).
        shapes_access: its rows decide what identities may use (policies, checks, services, routers): every
            write to it re-evaluates the identities with sessions, and answers derived from it are shared across
            read snapshots until the next such write (``storage.store.SharedMemo``).
        indexes: field combinations the domain looks rows up by (composite indexes,
            ``storage.store.ReadTxn.ids_by_fields``); each name must be a field of the kind.
        errors: standard operation (``create``, ``update``, ``patch``, ``delete``) -> statuses its rules may
            answer beyond those every kind's do (400 for a bad body, 404 for an unknown id, 409 for a referenced
            delete): what the OpenAPI document promises; the hooks decide.
        presented: JSON schemas of the fields the ``present`` hook adds to answers or whose stored value it
            replaces there; the OpenAPI document shows these instead of the stored fields' schemas.
        create_schema: the body schema of ``POST /{kind}`` when a route of the kind's own serves it in place of
            the standard create (``operations`` then lacks ``create``): enrollments.
    """

    kind: str
    singular: str
    op_name: str
    op_plural: str
    tag: str
    fields: tuple[Field, ...]
    body_name: str
    variants: Variants | None = None
    operations: frozenset[str] = frozenset({"list", "create", "detail", "update", "patch", "delete"})
    associations: tuple[Association, ...] = ()
    role_attributes_path: str | None = None
    role_filter: bool = False
    admin_only: bool = True
    hooks: Hooks = field(default_factory=Hooks)
    aliases: tuple[str, ...] = ()
    extra_filter_fields: Mapping[str, Any] = field(default_factory=dict)
    seed: tuple[Mapping[str, Any], ...] = ()
    shapes_access: bool = False
    indexes: tuple[tuple[str, ...], ...] = ()
    errors: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    presented: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    create_schema: Mapping[str, Any] | None = None

    # Every write and every presented row asks for all_fields(): derived once, when the spec is made.
    _all_fields: tuple[Field, ...] = field(init=False, repr=False, compare=False, default=())
    _linked_fields: tuple[Field, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        seen: dict[str, Field] = {}
        variant_fields = [f for v in self.variants.variants for f in v.fields] if self.variants else []
        for f in (*COMMON_FIELDS, *self.fields, *variant_fields):
            seen.setdefault(f.name, f)
        unknown = {name for fields in self.indexes for name in fields} - seen.keys()
        if unknown:
            raise ValueError(f"{self.kind}: indexes name fields it does not have: {sorted(unknown)}")
        object.__setattr__(self, "_all_fields", tuple(seen.values()))  # frozen: set once, here
        object.__setattr__(self, "_linked_fields", tuple(f for f in seen.values() if f.ref or f.roles))

    def all_fields(self) -> tuple[Field, ...]:
        """Common fields, own fields, then every variant's fields (first definition of a name wins)."""
        return self._all_fields

    def linked_fields(self) -> tuple[Field, ...]:
        """The fields that name other rows: references (``ref``) and role lists (``roles``), in
        :meth:`all_fields` order."""
        return self._linked_fields

    @property
    def creatable(self) -> bool:
        """``POST /{kind}`` exists: the standard create, or the kind's own (``create_schema``)."""
        return "create" in self.operations or self.create_schema is not None

    def variant_of(self, name: str) -> Variant | None:
        """The variant whose extra fields include ``name`` (None for a field every row has)."""
        if self.variants is None or any(f.name == name for f in (*COMMON_FIELDS, *self.fields)):
            return None
        return next((v for v in self.variants.variants if any(f.name == name for f in v.fields)), None)

    def fields_for(self, variant: Variant | None) -> tuple[Field, ...]:
        """The fields a request body of the given variant may carry (common fields excluded)."""
        return self.fields + variant.fields if variant else self.fields

    def field(self, name: str) -> Field | None:
        for f in self.all_fields():
            if f.name == name:
                return f
        return None


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
