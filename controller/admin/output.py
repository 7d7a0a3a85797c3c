"""How the admin CLI shows answers: aligned tables and key/value details for people, JSON or YAML for scripts.

Tables and details render each value on one line: lists joined with commas, booleans as ``true``/``false``, null as
``-``, entity references by name, other objects as compact JSON. JSON and YAML output is the ``data`` of the
answer's envelope, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

import yaml

__all__ = ["Column", "Format", "cell", "details", "dump", "error_line", "lookup", "table"]

Column = tuple[str, str]
"""A table column: its header and the dotted path of its value in a row (``identity.name``)."""

_NONE = "-"


class Format(Enum):
    """What a verb prints: a table or details for people, or the raw data as JSON or YAML."""

    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


def lookup(row: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``row`` (``configType.name``), or None when a step is missing."""
    value: Any = row
    for step in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def cell(value: Any) -> str:
    """One value as one line of text."""
    if value is None:
        return _NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping) and isinstance(value.get("entity"), str) and "name" in value:
        return str(value["name"])  # an entity reference
    if isinstance(value, list | tuple):
        if all(isinstance(item, str | int | float) and not isinstance(item, bool) for item in value):
            return ",".join(str(item) for item in value) if value else _NONE
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, Mapping):
        return json.dumps(value, separators=(",", ":")) if value else _NONE
    return " ".join(str(value).split())


def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[Column]) -> str:
    """Rows as an aligned table with a header line; columns are separated by at least two spaces.

    Returns:
        The table's lines joined with newlines, without a trailing newline.
    """
    grid = [[header.upper() for header, _ in columns]]
    grid.extend([cell(lookup(row, path)) for _, path in columns] for row in rows)
    widths = [max(len(line[index]) for line in grid) for index in range(len(columns))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
                     for line in grid)


def _flatten(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping) and value and not isinstance(value.get("entity"), str):
        for key, item in value.items():
            if key != "_links":
                yield from _flatten(f"{prefix}.{key}" if prefix else str(key), item)
    else:
        yield prefix, value


def details(row: Mapping[str, Any]) -> str:
    """One object as ``key: value`` lines, nested objects flattened to dotted keys, ``_links`` left out.

    Returns:
        The lines joined with newlines, without a trailing newline.
    """
    pairs = list(_flatten("", row))
    if not pairs:
        return ""
    width = max(len(key) for key, _ in pairs) + 1
    return "\n".join(f"{key + ':':<{width}} {cell(value)}".rstrip() for key, value in pairs)


def dump(data: Any, output: Format) -> str:
    """``data`` as JSON (indented) or YAML, without a trailing newline; TEXT is not a dump format.

    Raises:
        ValueError: ``output`` is TEXT.
    """
    if output is Format.JSON:
        return json.dumps(data, indent=2)
    if output is Format.YAML:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n")
    raise ValueError("TEXT output is rendered as a table or details, not dumped")


def _cause_text(cause: Any) -> str:
    if isinstance(cause, Mapping):
        if "field" in cause:
            reason = cause.get("reason") or "invalid"
            return f"{cause['field']}: {reason}"
        if cause.get("message"):
            return str(cause["message"])
        if cause.get("causeMessage"):
            return str(cause["causeMessage"])
        return ""
    return str(cause) if cause else ""


def error_line(code: str, message: str, cause: Any = None) -> str:
    """The one line a failed verb prints: ``error: <code>: <message> (<cause>)``, cause when there is one."""
    text = " ".join(f"error: {code}: {message}".split())
    detail = " ".join(_cause_text(cause).split())
    return f"{text} ({detail})" if detail else text
