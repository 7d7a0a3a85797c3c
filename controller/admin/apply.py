"""Planning and carrying out ``tollgate apply``: the changes that make a controller hold what a model file says.

:func:`plan` is pure: it compares the file's model with the controller's current state (both canonical, see
:mod:`controller.admin.model_file`) and lists creates, updates of the fields that differ and, with ``prune``,
deletes of what the file does not name. Creates and updates come in dependency order (config types, configs,
posture checks, services, identities, then policies), each kind's entities by name; deletes come last, in the
reverse order. Applying a plan and planning again with the same file gives an empty plan.

Carrying a plan out is sans-IO too: :func:`requests` yields each change as the Management API request that makes
it (:class:`Request`, names turned back into ids as it goes: an entity created earlier in the plan is referred to
by the new id its caller sends back). :func:`execute` drives it through anything with the three writes of
:class:`ModelWrites` (the CLI's :class:`~controller.admin.admin_client.AdminClient`); the web console drives the
same requests through the controller's domain in process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from controller.admin.export import Current
from controller.admin.model_format import KIND_ORDER, KINDS, Entity, FieldSpec, Model, entity_fields
from controller.admin.model_values import ModelError
from controller.admin.specs import REGISTRY
from controller.model.request_fields import words

__all__ = ["ApplyFailed", "Change", "FieldChange", "ModelWrites", "Plan", "Request", "execute", "plan", "requests",
           "wire_body"]

Action = Literal["create", "update", "delete"]

_SIGN = {"create": "+", "update": "~", "delete": "-"}


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field an update changes, from ``old`` to ``new`` (canonical values)."""

    field: str
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Change:
    """One step of a plan.

    Attributes:
        action: ``create``, ``update`` or ``delete``.
        kind: the kind (the file's key, ``service-policies``).
        name: the entity's name.
        entity: the entity as the file states it (canonical); None for a delete.
        fields: for an update, the fields that differ, in the kind's field order.
    """

    action: Action
    kind: str
    name: str
    entity: Entity | None = None
    fields: tuple[FieldChange, ...] = ()

    def lines(self) -> list[str]:
        """The change as diff lines: ``+ create KIND NAME``, one ``~ update KIND NAME: FIELD: OLD -> NEW`` per
        field, ``- delete KIND NAME``; values as JSON."""
        head = f"{_SIGN[self.action]} {self.action} {self.kind} {self.name}"
        if self.action != "update":
            return [head]
        return [f"{head}: {c.field}: {_shown(c.old)} -> {_shown(c.new)}" for c in self.fields]


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@dataclass(frozen=True, slots=True)
class Plan:
    """The changes of one apply, in the order they are made."""

    changes: tuple[Change, ...]

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        """The whole plan as diff lines (see :meth:`Change.lines`)."""
        return [line for change in self.changes for line in change.lines()]

    def summary(self) -> str:
        """``N to create, N to update, N to delete``."""
        counts = {action: sum(1 for c in self.changes if c.action == action) for action in _SIGN}
        return ", ".join(f"{counts[action]} to {action}" for action in _SIGN)


def _referenced(f: FieldSpec, value: Any) -> list[str]:
    """The names a field's value refers to."""
    if value is None or f.ref_style is None:
        return []
    if f.ref_style == "name":
        return [str(value)]
    if f.ref_style == "roles":
        return [role[1:] for role in value if role.startswith("@")]
    return [str(item) for item in value]  # names, or the keys of a map


def _check_references(kind: str, entity: Entity, available: Mapping[str, set[str]],
                      deleted: Mapping[str, set[str]]) -> None:
    for f in entity_fields(kind, entity):
        for name in _referenced(f, entity.get(f.name)):
            assert f.ref is not None
            if name in available.get(f.ref, set()):
                continue
            why = " (--prune deletes it: the file does not define it)" if name in deleted.get(f.ref, set()) else ""
            raise ModelError(f"{kind} {entity['name']!r}: {f.name}: no {words(REGISTRY[f.ref].singular)} named "
                             f"{name!r}{why}")


def _without_default_references(kind: str, entity: Entity, current: Current) -> Entity:
    """Naming the row a reference has by default (an identity's default auth policy) says what leaving the
    reference out says."""
    cleared = {f.name: None for f in entity_fields(kind, entity) if f.default_id is not None and f.ref is not None
               and entity.get(f.name) is not None
               and current.ids.get(f.ref, {}).get(entity[f.name]) == f.default_id}
    return {**entity, **cleared} if cleared else entity


def _update(kind: str, desired: Entity, existing: Entity) -> Change | None:
    changed = []
    for f in entity_fields(kind, desired):
        if not f.compared or desired.get(f.name) == existing.get(f.name):
            continue
        if f.create_only:
            raise ModelError(f"{kind} {desired['name']!r}: {f.name} cannot change once created "
                             f"({_shown(existing.get(f.name))} -> {_shown(desired.get(f.name))}); delete it first")
        changed.append(FieldChange(f.name, existing.get(f.name), desired.get(f.name)))
    return Change("update", kind, desired["name"], desired, tuple(changed)) if changed else None


def plan(desired: Model, current: Current, *, prune: bool = False) -> Plan:
    """The changes that make ``current`` what ``desired`` says (pure: no I/O).

    Args:
        desired: the model file's entities (canonical), by kind and name.
        current: the controller's state.
        prune: also delete the entities of the model's kinds that ``desired`` does not name (never reserved or
            built-in ones, see :mod:`controller.admin.export`).

    Returns:
        The plan; empty when the controller already holds what ``desired`` says.

    Raises:
        ModelError: before anything is planned: ``desired`` defines a reserved entity, refers to a name that will
            not exist (none such, or deleted by the prune), or changes a field that cannot change once created.
    """
    for kind in KIND_ORDER:
        clash = sorted(set(desired.get(kind, {})) & current.reserved.get(kind, frozenset()))
        if clash:
            raise ModelError(f"{kind} {clash[0]!r}: belongs to the controller (the default admin or a system "
                             "entity); the file may refer to it but not define it")
    deleted: dict[str, set[str]] = {kind: set() for kind in KIND_ORDER}
    if prune:
        for kind in KIND_ORDER:
            builtin = current.builtin.get(kind, {})
            deleted[kind] = {name for name in current.entities.get(kind, {})
                             if name not in desired.get(kind, {}) and name not in builtin}
    available = {kind: (set(current.ids.get(kind, {})) | set(desired.get(kind, {}))) - deleted.get(kind, set())
                 for kind in {*current.ids, *desired}}
    changes: list[Change] = []
    for kind in KIND_ORDER:
        existing = current.entities.get(kind, {})
        for name in sorted(desired.get(kind, {})):
            entity = desired[kind][name]
            _check_references(kind, entity, available, deleted)
            entity = _without_default_references(kind, entity, current)
            if name not in existing:
                changes.append(Change("create", kind, name, entity))
            elif (update := _update(kind, entity, existing[name])) is not None:
                changes.append(update)
    for kind in reversed(KIND_ORDER):
        changes.extend(Change("delete", kind, name) for name in sorted(deleted[kind]))
    return Plan(tuple(changes))


def wire_body(kind: str, entity: Entity, fields: Iterable[FieldSpec], resolve: Callable[[str, str], str], *,
              creating: bool) -> dict[str, Any]:
    """The API request body that sets ``fields`` of ``entity``.

    Args:
        kind: the entity's kind.
        entity: the canonical entity.
        fields: the fields to send.
        resolve: the id of a row from its kind and name.
        creating: True for a create, whose body leaves out what is null (the API's default) and carries the
            ``enroll`` request; False for an update (a PATCH, which sets null fields to null).

    Returns:
        The body, with wire field names and ids.
    """
    body: dict[str, Any] = {}
    for f in fields:
        value = entity.get(f.name)
        if not f.compared:  # a request only a create reads (``enroll``)
            if creating and value is not None:
                body[f.wire_name] = f.write(value) if f.write is not None else value
            continue
        if value is not None and f.ref is not None:
            target = f.ref
            if f.ref_style == "name":
                value = resolve(target, value)
            elif f.ref_style == "names":
                value = [resolve(target, item) for item in value]
            elif f.ref_style == "roles":
                value = ["@" + resolve(target, role[1:]) if role.startswith("@") else role for role in value]
            else:
                value = {resolve(target, key): item for key, item in value.items()}
        if value is None and creating:
            continue
        body[f.wire_name] = value
    return body


class ModelWrites(Protocol):
    """The writes carrying out a plan takes: the Management API's create, update (PATCH) and delete of one row."""

    def create(self, kind: str, body: Mapping[str, Any]) -> str:
        """Create a row of ``kind``; its id."""

    def update(self, kind: str, id: str, body: Mapping[str, Any]) -> None:
        """Change the fields in ``body`` of one row."""

    def delete(self, kind: str, id: str) -> None:
        """Delete one row."""


@dataclass(frozen=True, slots=True)
class Request:
    """The Management API request that makes one change of a plan.

    Attributes:
        change: the plan's change.
        action: ``create`` (``POST /{kind}``), ``update`` (``PATCH /{kind}/{id}``) or ``delete``.
        kind: the kind's path segment.
        id: the row's id (None for a create).
        body: the request body with wire names and ids (None for a delete).
    """

    change: Change
    action: Action
    kind: str
    id: str | None = None
    body: dict[str, Any] | None = None


def requests(the_plan: Plan, current: Current) -> Generator[Request, str | None, None]:
    """The requests that carry out ``the_plan`` (made against ``current``), in order.

    Send the new row's id back into the generator after each create (``generator.send(id)``): later requests
    refer to it. A caller stops at the first request the controller refuses.
    """
    ids = {kind: dict(names) for kind, names in current.ids.items()}

    def resolve(kind: str, name: str) -> str:
        return ids[kind][name]

    for change in the_plan.changes:
        if change.action == "delete":
            yield Request(change, "delete", change.kind, ids[change.kind].pop(change.name))
        elif change.action == "create":
            assert change.entity is not None
            body = wire_body(change.kind, change.entity, entity_fields(change.kind, change.entity), resolve,
                             creating=True)
            created = yield Request(change, "create", change.kind, body=body)
            ids.setdefault(change.kind, {})[change.name] = str(created)
        else:
            assert change.entity is not None
            # A PATCH names the entity's variant, whose fields it may carry.
            discriminator = KINDS[change.kind].discriminator
            names = {c.field for c in change.fields} | ({discriminator} if discriminator is not None else set())
            fields = [f for f in entity_fields(change.kind, change.entity) if f.name in names]
            yield Request(change, "update", change.kind, ids[change.kind][change.name],
                          wire_body(change.kind, change.entity, fields, resolve, creating=False))


class ApplyFailed(Exception):
    """The controller refused a change (or could not be reached) part-way through a plan.

    Attributes:
        done: the changes made before the failure.
        failed: the change that failed.
        error: what the writes raised (the CLI's AdminError or ConnectionProblem, the console's ApiError).
    """

    def __init__(self, done: tuple[Change, ...], failed: Change, error: Exception) -> None:
        super().__init__(f"{' / '.join(failed.lines())}: {error}")
        self.done = done
        self.failed = failed
        self.error = error


def execute(client: ModelWrites, the_plan: Plan, current: Current,
            on_done: Callable[[Change], None] | None = None,
            failures: tuple[type[Exception], ...] = (Exception,)) -> None:
    """Make the plan's changes, in order, stopping at the first the controller refuses.

    Args:
        client: the writes (a logged-in :class:`~controller.admin.admin_client.AdminClient`).
        the_plan: the plan (made against ``current``).
        current: the state the plan was made against; its ids resolve names.
        on_done: called after each change is made.
        failures: the exceptions of ``client`` that mean the controller refused or could not be reached.

    Raises:
        ApplyFailed: a change failed; the changes before it are made, none after it is tried.
    """
    done: list[Change] = []
    steps = requests(the_plan, current)
    answer: str | None = None
    while True:
        try:
            request = steps.send(answer)
        except StopIteration:
            return
        try:
            answer = None
            if request.action == "delete":
                assert request.id is not None
                client.delete(request.kind, request.id)
            elif request.action == "create":
                answer = client.create(request.kind, request.body or {})
            else:
                assert request.id is not None
                client.update(request.kind, request.id, request.body or {})
        except failures as exc:
            raise ApplyFailed(tuple(done), request.change, exc) from exc
        done.append(request.change)
        if on_done is not None:
            on_done(request.change)
