"""A resource kind declared as data, and what its hooks see: :class:`Resource` (its fields, variants, association
lists, the named hooks of its real domain rules), the :class:`ReadContext` and :class:`WriteContext` every hook and
query runs in, the :class:`Change` s a write records, and :class:`Kinds`, the registry of every kind as a hook reaches
it (``controller.model.registry.Registry`` is the one implementation).

Everything generic (request validation, the six standard routes, indexes, filterable fields, the OpenAPI document)
is computed from these specs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from controller.model.events import Author, Cause, Event
from controller.model.field import COMMON_FIELDS, Field, Mode, Variant, Variants
from storage.layout import KindLayout
from storage.store import ReadTxn, WriteTxn
from storage.zitiql import Symbol

__all__ = [
    "AfterCreate",
    "Association",
    "Change",
    "EnrollmentSecrets",
    "Environment",
    "Hooks",
    "Kinds",
    "Present",
    "ReadContext",
    "Resource",
    "WriteContext",
]

T = TypeVar("T")


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


class Kinds(Protocol):
    """Every kind's spec, as hooks and queries reach it through ``ctx.registry``."""

    @property
    def resources(self) -> Mapping[str, Resource]:
        """Every resource kind's spec, by kind."""

    @property
    def internal(self) -> Mapping[str, KindLayout]:
        """The storage layouts of the kinds that are not resources (MFA records, posture state), by kind."""

    @property
    def access_kinds(self) -> frozenset[str]:
        """Kinds whose rows decide what identities may use (``Resource.shapes_access``)."""

    def __getitem__(self, kind: str) -> Resource: ...

    def associations(self, kind: str) -> tuple[Association, ...]:
        """The ``GET /{kind}/{id}/{path}`` lists of a kind."""

    def symbols(self, kind: str) -> Mapping[str, Symbol]:
        """Filterable fields of a kind, as the query engine's symbol table."""

    def referencing_fields(self, kind: str) -> list[tuple[Resource, Field]]:
        """Every (resource, field) whose field holds an id of ``kind``."""

    def role_fields(self, kind: str) -> list[tuple[Resource, Field]]:
        """Every (resource, field) that is a role selector over ``kind``."""


class EnrollmentSecrets(Protocol):
    """An enrollment's token and JWT, which only the running controller's keys can make
    (``controller/authentication/enrollment_jwt.py``)."""

    def new_token(self) -> dict[str, str]:
        """The row fields that stand for a fresh token (the store never holds the token itself)."""

    def token(self, row: Mapping[str, Any]) -> str:
        """The token of a stored enrollment row."""

    def digest(self, token: str) -> str:
        """What a row keeps to find the enrollment of ``token``."""

    def enrollment(self, row: Mapping[str, Any]) -> str:
        """The JWT a client enrols with, for a stored enrollment row."""


@dataclass(frozen=True, slots=True)
class Environment:
    """What hooks may need from the running controller beyond the store.

    Attributes:
        network_ca_pem: the controller's own CA certificate, the issuer of every certificate it signs.
        enrollments: enrollment tokens and JWTs.
    """

    network_ca_pem: bytes
    enrollments: EnrollmentSecrets


@dataclass(frozen=True, slots=True)
class Change:
    """One row written: ``before`` is None for a create, ``after`` is None for a delete."""

    kind: str
    id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(slots=True)
class ReadContext:
    """A consistent snapshot plus the registry and ``now`` (wall-clock epoch seconds).

    ``memo`` holds what :meth:`cached` derived from this snapshot (policy links, decoded policy rows): one request
    or one actor step asks the same questions for many services, and a snapshot never changes under it.
    ``shared`` is the store's memo of answers derived from the access kinds alone (``Resource.shapes_access``),
    kept across snapshots until one of those kinds is written (``storage.store.SharedMemo``); None when this
    snapshot is older than that write. ``env`` is what the running controller lends hooks beyond the store (None
    for a store used without a controller, as some benchmarks do).
    """

    txn: ReadTxn
    registry: Kinds
    now: float
    memo: dict[Hashable, Any] = field(default_factory=dict)
    shared: dict[Hashable, Any] | None = None
    env: Environment | None = None

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per snapshot for ``key``. Callers must not mutate the value."""
        try:
            value: T = self.memo[key]
        except KeyError:
            value = self.memo[key] = compute()
        return value

    def shared_cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Like :meth:`cached`, but remembered across snapshots: only for answers that depend on nothing but rows
        of the access kinds and ``key`` itself (a stale answer would outlive the snapshot that computed it)."""
        shared = self.shared
        if shared is None:
            return self.cached(key, compute)
        try:
            value: T = shared[key]
        except KeyError:
            value = shared[key] = compute()
        return value


@dataclass(slots=True)
class WriteContext(ReadContext):
    """A write transaction; every row written through the single write path is recorded in ``changes``.

    What else the write records for its events (``controller/model/events.py``): ``events``, each with the number
    of changes recorded before it (its place among them), and ``causes``, why it ends rows of the kinds whose
    changes are events, by (kind, id); both None until something is recorded. ``author`` is who the write is for.
    """

    txn: WriteTxn
    changes: list[Change] = field(default_factory=list)
    events: list[tuple[int, Event]] | None = None
    causes: dict[tuple[str, str], Cause] | None = None
    author: Author | None = None

    def record(self, event: Event) -> None:
        """Record ``event`` as happening in this write, after the changes recorded so far."""
        if self.events is None:
            self.events = []
        self.events.append((len(self.changes), event))

    def end_cause(self, kind: str, row_id: str, cause: Cause) -> None:
        """Say why this write ends (deletes) the row ``row_id`` of ``kind``: ``cause`` is a JSON object whose
        ``code`` names the cause (``logout``, ``postureCheckFailed``...) and whose other keys say more, or the
        posture engine's compact form of one (``controller.model.events.Cause``)."""
        if self.causes is None:
            self.causes = {}
        self.causes[(kind, row_id)] = cause

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Always ``compute()``: this transaction's own writes would make a remembered answer stale."""
        return compute()

    def shared_cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Always ``compute()``, as :meth:`cached`."""
        return compute()
