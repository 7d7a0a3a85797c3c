"""The value checks of the model file (``controller/admin/model_file.py``): each takes a value read from the file and
the place it was read (``services[2].configs``), and returns the value's canonical form or raises
:class:`ModelError` naming that place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from storage.rows import MAX_INT, MIN_INT

__all__ = [
    "Check",
    "ModelError",
    "boolean",
    "choice",
    "enroll",
    "entity_name",
    "fail",
    "integer",
    "json_value",
    "map_of",
    "mapping",
    "name_set",
    "optional_string",
    "passed",
    "roles",
    "string",
]

Check = Callable[[Any, str], Any]


class ModelError(Exception):
    """A model file (or a plan made from one) cannot be applied; the message is one line naming where and why."""


def fail(where: str, reason: str) -> ModelError:
    return ModelError(f"{where}: {reason}")


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise fail(where, "must be a string")
    return value


def optional_string(value: Any, where: str) -> str | None:
    return string(value, where) or None


def entity_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise fail(where, "must be a non-empty string")
    return value


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise fail(where, "must be true or false")
    return value


def integer(minimum: int | None = None, maximum: int | None = None) -> Check:
    """Whole numbers within the bounds given, and within the 64 bits the controller stores in any case."""
    low = MIN_INT if minimum is None else max(minimum, MIN_INT)
    high = MAX_INT if maximum is None else min(maximum, MAX_INT)
    bounds = f" from {minimum} to {maximum}" if minimum is not None and maximum is not None else (
        f" of at least {minimum}" if minimum is not None else f" of at most {maximum}" if maximum is not None else "")

    def check(value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise fail(where, f"must be a whole number{bounds}")
        return value
    return check


def choice(*allowed: str) -> Check:
    def check(value: Any, where: str) -> str:
        if value not in allowed:
            raise fail(where, "must be one of " + ", ".join(allowed))
        return str(value)
    return check


def name_set(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise fail(where, "must be a list of names")
    return sorted({entity_name(item, f"{where}[{i}]") for i, item in enumerate(value)})


def roles(value: Any, where: str) -> list[str]:
    entries = name_set(value, where)
    bad = [entry for entry in entries if len(entry) < 2 or entry[0] not in "#@"]
    if bad:
        raise fail(where, f"{bad[0]!r} is neither #attribute nor @name")
    if "#all" in entries and len(entries) > 1:
        raise fail(where, "#all must be the only entry")
    return entries


def json_value(value: Any, where: str) -> Any:
    """``value`` if it is JSON (YAML also reads dates, sets and non-string keys, which the API cannot take)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise fail(where, "must be a finite number")
        return value
    if isinstance(value, list):
        return [json_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise fail(where, f"key {key!r} must be a string (quote it)")
        return {key: json_value(item, f"{where}.{key}") for key, item in value.items()}
    raise fail(where, f"{type(value).__name__} is not a JSON value (quote it)")


def mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(where, "must be a mapping")
    checked: dict[str, Any] = json_value(value, where)
    return checked


def map_of(check: Check, keys: str) -> Check:
    """A mapping whose keys are names of ``keys`` (``service``) and whose values pass ``check``."""
    def check_map(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise fail(where, f"must be a mapping of {keys} names")
        return {entity_name(key, where): check(item, f"{where}.{key}") for key, item in value.items()}
    return check_map


def enroll(value: Any, where: str) -> str:
    if value != "ott":
        raise fail(where, "must be ott (a one-time-token enrollment)")
    return "ott"


def passed(value: Any, where: str) -> Any:
    """Posture-check fields are checked together by :func:`normalize_check` once the entity is read."""
    return json_value(value, where)
