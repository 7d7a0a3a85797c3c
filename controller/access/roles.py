"""Role selectors: ``#attribute``, ``@id`` and ``#all``, with AllOf/AnyOf semantics.

An entity matches a policy's role list when it is listed by ``@id``, or the list is ``#all``, or (AllOf) it has
every listed attribute, or (AnyOf) it has any of them. Selection runs on the role-attribute index, so it costs one
index read per attribute instead of a scan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.errors import ApiError, FieldError
from storage.store import ReadTxn

__all__ = ["check_attributes", "matches", "normalize_roles", "parse_semantic", "select_ids"]

ALL = "#all"


def normalize_roles(txn: ReadTxn, field_name: str, roles: Sequence[str] | None, target: str,
                    target_singular: str) -> list[str]:
    """Validate a role list against the rules of the reference controller and return it sorted.

    Raises:
        FieldError: an entry without ``#``/``@``, ``#all`` beside other entries, or an ``@id`` that does not exist.
    """
    entries = list(roles or [])
    bad = [r for r in entries if not isinstance(r, str) or not r.startswith(("#", "@")) or len(r) < 2]
    if bad:
        raise FieldError(field_name, "role entries must prefixed with # (to indicate role attributes) or @ "
                         "(to indicate a name or id)", bad)
    if ALL in entries and len(entries) > 1:
        raise FieldError(field_name, "if using #all, it should be the only role specified", entries)
    missing = [r[1:] for r in entries if r.startswith("@") and not txn.exists(target, r[1:])]
    if missing:
        raise FieldError(field_name, f"no {target_singular} found with the given ids", missing)
    return sorted(set(entries))


def check_attributes(field_name: str, attributes: Sequence[str] | None) -> list[str]:
    """Role attributes of identities, services and edge routers may not start with ``#`` or ``@``."""
    values = list(attributes or [])
    bad = [a for a in values if a.startswith(("#", "@"))]
    if bad:
        raise FieldError(field_name, "role attributes may not be prefixed with # or @", bad)
    return values


def parse_semantic(value: str | None, field_name: str = "semantic") -> str:
    """``AllOf`` (default) or ``AnyOf``, case-insensitively."""
    if value is None or value == "":
        return "AllOf"
    for known in ("AllOf", "AnyOf"):
        if value.lower() == known.lower():
            return known
    raise FieldError(field_name, "must be one of AllOf, AnyOf", value)


def select_ids(txn: ReadTxn, kind: str, roles: Sequence[str], semantic: str, *, all_special: bool = True,
               attributes_field: str = "roleAttributes") -> set[str]:
    """Ids of the rows of ``kind`` a role list selects.

    ``all_special`` is False for ``roleFilter`` lists, where ``#all`` is the literal attribute ``all`` and unknown
    ``@id`` entries are ignored.
    """
    if all_special and ALL in roles:
        return set(txn.ids(kind))
    selected = {r[1:] for r in roles if r.startswith("@") and txn.exists(kind, r[1:])}
    attrs = [r[1:] for r in roles if r.startswith("#")]
    if not attrs:
        return selected
    sets = [set(txn.ids_by_set(kind, attributes_field, a)) for a in attrs]
    picked = set.intersection(*sets) if semantic == "AllOf" else set.union(*sets)
    return selected | picked


def matches(row: Mapping[str, Any], roles: Sequence[str], semantic: str) -> bool:
    """Whether one entity row is selected by a role list (the reverse of :func:`select_ids`)."""
    if not roles:
        return False
    if ALL in roles or f"@{row['id']}" in roles:
        return True
    attrs = [r[1:] for r in roles if r.startswith("#")]
    if not attrs:
        return False
    have = set(row.get("roleAttributes") or ())
    return all(a in have for a in attrs) if semantic == "AllOf" else any(a in have for a in attrs)


def require_role_filter_entries(entries: Sequence[str]) -> None:
    """``roleFilter`` entries must carry a prefix."""
    if any(not e.startswith(("#", "@")) for e in entries):
        raise ApiError("COULD_NOT_VALIDATE", {"field": "roleFilter", "reason": "role filter entries must be "
                                              "prefixed with # or @", "value": " ".join(entries)})
