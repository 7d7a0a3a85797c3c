"""The data-integrity check and its repairs, as plain synchronous functions over a transaction (nothing here
awaits or touches anything but the store).

What can really go wrong in our store, and what the fix does about it:

* **A row missing from one of its indexes** (``storage/index_audit.py``): lookups by that value miss the row. The fix
  puts the entry back. For a unique index whose key another row holds, two rows share a value that must be unique:
  nothing can choose between them, so that one is reported and left for the operator.
* **A stray index entry** (its row is gone or no longer holds the value): lookups find what is not there. The fix
  deletes the entry.
* **A reference to a missing row**: a field a resource spec declares as a reference (``Field.ref``), which the
  write path checks on every write and settles on every delete (``controller/data/write_path.py``). The fix does what
  deleting the referenced row would have done: ``cascade`` deletes the referring row through the write path (so
  its own dependants go too, and the API-session cache and the identity actors hear of it: a session whose API
  session is gone, an API session whose identity is gone), ``nullify`` clears the field. A ``refuse`` reference
  could never have lost its row: the fix sets the field's default when that row exists (an identity's auth policy
  back to ``default``), clears it when the field may be null, and otherwise leaves it for the operator (a config
  whose config type is gone).
* **A role selector ``@id`` naming a missing row** (a policy's ``identityRoles``, ``serviceRoles``...), and the
  id lists that hooks maintain rather than the specs (a service's ``configs``, a session's ``servicePolicies``):
  the fix removes the entry, as deleting that row does for role selectors and configs.
* **Per-identity rows of a missing identity**: MFA enrolments, posture state and pending MFA removals. The fix
  deletes them. (The posture engine may store an identity's state just after the identity is deleted and drops it
  in its next write; a check at that instant reports it.)
* **A row that cannot be decoded**: reported (the check goes on with the other rows) and left for the operator,
  who may restore it from a snapshot; its index entries are not reported as stray, since what it holds is unknown.

:func:`check_chunk` finds problems in one bounded part of the store within one read snapshot, so that a large
store is checked in short transactions; every problem is true of the snapshot it was found in. :func:`repair`
fixes one problem in a write transaction, re-checking it there first: the store may have changed since.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from controller.authentication.mfa import KIND as MFA_KIND
from controller.data.write_path import delete_row, write_internal
from controller.model.field import Field
from controller.model.spec import Kinds, ReadContext, WriteContext
from controller.posture.engine import PENDING_KIND, STATE_KIND
from storage.index_audit import (
    IndexEntry,
    IndexPosition,
    index_names,
    missing_entries,
    remove_entry,
    restore_entry,
    rows_after,
    stray_entries,
    unique_rival,
)
from storage.rows import decode_row
from storage.store import ReadTxn

__all__ = [
    "CHUNK_SIZE",
    "IDENTITY_KEYED",
    "DeleteOrphan",
    "DeleteRow",
    "DropListEntry",
    "Problem",
    "RemoveIndexEntry",
    "Repair",
    "RestoreIndexEntry",
    "ScanPosition",
    "SetField",
    "check_all",
    "check_chunk",
    "repair",
]

CHUNK_SIZE = 256
"""Rows or index entries :func:`check_chunk` looks at by default: a few milliseconds of reads."""

IDENTITY_KEYED = (MFA_KIND, STATE_KIND, PENDING_KIND)
"""Internal kinds whose row id is an identity's id (they live and die with the identity)."""

# Lists of row ids that hooks keep, not the specs (which declare references one id per field): list field ->
# the kind its ids name.
_ID_LISTS: Mapping[tuple[str, str], str] = {
    ("services", "configs"): "configs",
    ("sessions", "servicePolicies"): "service-policies",
}
_IDENTITIES = "identities"


@dataclass(frozen=True, slots=True)
class RestoreIndexEntry:
    """Put back an index entry a row lacks."""

    entry: IndexEntry


@dataclass(frozen=True, slots=True)
class RemoveIndexEntry:
    """Delete an index entry whose row is gone or no longer holds the value."""

    entry: IndexEntry


@dataclass(frozen=True, slots=True)
class DeleteRow:
    """Delete a row (through the write path, with what depends on it) whose ``field`` names the missing row
    ``missing`` of ``target``."""

    kind: str
    row_id: str
    field: str
    target: str
    missing: str


@dataclass(frozen=True, slots=True)
class SetField:
    """Set ``field`` of a row to ``value`` where it names the missing row ``missing`` of ``target``."""

    kind: str
    row_id: str
    field: str
    target: str
    missing: str
    value: str | None


@dataclass(frozen=True, slots=True)
class DropListEntry:
    """Remove ``entry`` (a selector ``@<missing>`` or the id ``missing``) from the list ``field`` of a row."""

    kind: str
    row_id: str
    field: str
    entry: str
    target: str
    missing: str


@dataclass(frozen=True, slots=True)
class DeleteOrphan:
    """Delete the row of an identity-keyed internal kind whose identity is missing."""

    kind: str
    identity_id: str


Repair = RestoreIndexEntry | RemoveIndexEntry | DeleteRow | SetField | DropListEntry | DeleteOrphan


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency: what a person reads, and what the fix does about it (None: nothing safe can be done)."""

    description: str
    repair: Repair | None


@dataclass(frozen=True, slots=True)
class _Rows:
    kind: str


@dataclass(frozen=True, slots=True)
class _Index:
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class ScanPosition:
    """Where a check stopped: the step (the rows of a kind, or one index) and the last key looked at in it."""

    step: int
    after: bytes | IndexPosition | None


def _steps(txn: ReadTxn, registry: Kinds) -> list[_Rows | _Index]:
    """The whole check in a fixed order: each kind's rows, then each index of each kind."""
    kinds = [*registry.resources, *(kind for kind in IDENTITY_KEYED if kind in registry.internal)]
    indexed = [*registry.resources, *registry.internal]
    return [*(_Rows(kind) for kind in kinds),
            *(_Index(kind, name) for kind in indexed for name in index_names(txn, kind))]


def check_chunk(ctx: ReadContext, position: ScanPosition | None,
                limit: int = CHUNK_SIZE) -> tuple[list[Problem], ScanPosition | None]:
    """Check at most ``limit`` rows or index entries of one step, from ``position`` (the start when None).

    Returns:
        The problems found, and where the next chunk starts (None once the whole store is checked).
    """
    steps = _steps(ctx.txn, ctx.registry)
    step, after = (0, None) if position is None else (position.step, position.after)
    if step >= len(steps):
        return [], None
    current = steps[step]
    following = ScanPosition(step + 1, None) if step + 1 < len(steps) else None
    if isinstance(current, _Index):
        assert after is None or isinstance(after, tuple)
        entries, last = stray_entries(ctx.txn, current.kind, current.name, after, limit)
        problems = [_stray(ctx.txn, entry) for entry in entries]
        return problems, following if last is None else ScanPosition(step, last)
    assert after is None or isinstance(after, bytes)
    rows = rows_after(ctx.txn, current.kind, after, limit)
    problems = []
    for key, data in rows:
        row_id = key.decode(errors="replace")
        if current.kind in IDENTITY_KEYED:
            problems += _orphan(ctx.txn, current.kind, row_id)
            continue
        try:
            row = decode_row(data)
        except msgspec.DecodeError as exc:
            # The damage under examination, not a failure of the check: reported, and the check goes on.
            problems.append(Problem(f"{current.kind} row {row_id} cannot be decoded ({exc})", None))
            continue
        problems += _row_problems(ctx, current.kind, row_id, row)
    return problems, following if len(rows) < limit else ScanPosition(step, rows[-1][0])


def check_all(ctx: ReadContext, limit: int = CHUNK_SIZE) -> list[Problem]:
    """Every problem of the store, in one snapshot (:func:`check_chunk` until the end)."""
    problems, position = check_chunk(ctx, None, limit)
    while position is not None:
        found, position = check_chunk(ctx, position, limit)
        problems += found
    return problems


def _stray(txn: ReadTxn, entry: IndexEntry) -> Problem:
    fate = "does not exist" if not txn.exists(entry.kind, entry.row_id) else "does not hold that value"
    return Problem(f"index {entry.index} maps {entry.value_text!r} to {entry.kind} row {entry.row_id}, which {fate}",
                   RemoveIndexEntry(entry))


def _orphan(txn: ReadTxn, kind: str, identity_id: str) -> list[Problem]:
    if txn.exists(_IDENTITIES, identity_id):
        return []
    return [Problem(f"{kind} row {identity_id} belongs to identities row {identity_id}, which does not exist",
                    DeleteOrphan(kind, identity_id))]


def _row_problems(ctx: ReadContext, kind: str, row_id: str, row: dict[str, Any]) -> list[Problem]:
    txn = ctx.txn
    problems = []
    for entry in missing_entries(txn, kind, row_id, row):
        rival = unique_rival(txn, entry)
        if rival is not None:
            problems.append(Problem(f"{kind} rows {row_id} and {rival} hold the same {entry.index} value "
                                    f"{entry.value_text!r}, which must be unique", None))
        else:
            problems.append(Problem(f"{kind} row {row_id} is missing from index {entry.index} (value "
                                    f"{entry.value_text!r})", RestoreIndexEntry(entry)))
    resource = ctx.registry[kind]
    for f in resource.linked_fields():
        value = row.get(f.name)
        if f.ref and value is not None and not txn.exists(f.ref, value):
            problems.append(Problem(f"{kind} row {row_id}: {f.name} names {f.ref} row {value}, which does not exist",
                                    _reference_repair(txn, kind, row_id, f, str(value))))
        if f.roles and isinstance(value, list):
            for selector in value:
                if isinstance(selector, str) and selector.startswith("@") and not txn.exists(f.roles, selector[1:]):
                    problems.append(Problem(
                        f"{kind} row {row_id}: {f.name} selects {selector}, but {f.roles} row {selector[1:]} does not "
                        f"exist", DropListEntry(kind, row_id, f.name, selector, f.roles, selector[1:])))
    for (owner, list_field), target in _ID_LISTS.items():
        if owner != kind:
            continue
        for listed in row.get(list_field) or ():
            if isinstance(listed, str) and not txn.exists(target, listed):
                problems.append(Problem(f"{kind} row {row_id}: {list_field} lists {target} row {listed}, which does "
                                        f"not exist", DropListEntry(kind, row_id, list_field, listed, target, listed)))
    return problems


def _reference_repair(txn: ReadTxn, kind: str, row_id: str, f: Field, missing: str) -> Repair | None:
    """What deleting the referenced row would have done to this one (see the module docstring)."""
    assert f.ref is not None
    if f.on_delete == "cascade":
        return DeleteRow(kind, row_id, f.name, f.ref, missing)
    if f.on_delete == "nullify":
        return SetField(kind, row_id, f.name, f.ref, missing, None)
    default = f.default
    if isinstance(default, str) and txn.exists(f.ref, default):
        return SetField(kind, row_id, f.name, f.ref, missing, default)
    if f.nullable or default is None:
        return SetField(kind, row_id, f.name, f.ref, missing, None)
    return None


def repair(ctx: WriteContext, problem: Problem) -> bool:
    """Fix ``problem`` in the write transaction of ``ctx``, if it is still there.

    Rows are written and deleted through the write path (``controller/data/write_path.py``), so their indexes stay in
    step and the changes are recorded for the controller's listeners; no hook refuses these writes, since they are
    what the controller itself does when a referenced row is deleted.

    Returns:
        Whether the problem is gone now (fixed here, or already gone); False when nothing safe can be done.

    Raises:
        controller.errors.ApiError: a delete the store's rules refuse (a referenced row that may not be deleted);
            the caller's transaction must then be rolled back, as the writer does with a failed mutation.
    """
    txn = ctx.txn
    match problem.repair:
        case RestoreIndexEntry(entry):
            return restore_entry(txn, entry)
        case RemoveIndexEntry(entry):
            remove_entry(txn, entry)
            return True
        case DeleteRow(kind, row_id, field, target, missing):
            row = txn.get(kind, row_id)
            if row is not None and row.get(field) == missing and not txn.exists(target, missing):
                delete_row(ctx, ctx.registry[kind], row_id)
            return True
        case SetField(kind, row_id, field, target, missing, value):
            row = txn.get(kind, row_id)
            if row is not None and row.get(field) == missing and not txn.exists(target, missing):
                write_internal(ctx, ctx.registry[kind], {**row, field: value}, row)
            return True
        case DropListEntry(kind, row_id, field, entry, target, missing):
            row = txn.get(kind, row_id)
            listed = row.get(field) if row is not None else None
            if row is not None and isinstance(listed, list) and entry in listed and not txn.exists(target, missing):
                write_internal(ctx, ctx.registry[kind], {**row, field: [e for e in listed if e != entry]}, row)
            return True
        case DeleteOrphan(kind, identity_id):
            if not txn.exists(_IDENTITIES, identity_id):
                txn.delete_raw(kind, identity_id)
            return True
        case None:
            return False
