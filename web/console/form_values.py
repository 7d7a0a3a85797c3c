"""A form's values both ways: a row shown in a form (:func:`to_form`), a submitted form read back as a request body
(:func:`parse`), and both laid out for the template with their options and errors (:func:`bind`).

A submitted form is kept as its raw text (``Raw``: each input's name and values), so a form the domain refuses is
shown again exactly as it was typed, with the API's message beside the field it names (:func:`place_error`). Input
names are the paths the API's error causes use: ``process.osType``, ``operatingSystems[0].versions``. A repeatable
group's items are numbered from 0 and counted in ``NAME~count``; what is typed beside a role selector's or a multiple
choice's options (roles, names) is in ``NAME~more``.

Reading a form decides nothing the domain decides: it turns text into the JSON the API takes (numbers, lists, JSON
objects, names of rows into their ids) and leaves every rule to the domain. What a form cannot say as JSON (a number
that is not one, JSON that does not parse, a name no row has) is an error on that field, and nothing is sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from web.console.widgets import Widget

__all__ = ["Bound", "Choices", "Raw", "bind", "dom_id", "parse", "place_error", "to_form"]

Raw = dict[str, list[str]]
_OMIT: Any = object()


class Choices(Protocol):
    """What the forms offer and resolve from the store."""

    def rows(self, kind: str) -> list[tuple[str, str]] | None:
        """``(id, name)`` of the rows of ``kind`` by name, or None when there are too many to offer."""

    def attributes(self, kind: str) -> list[str]:
        """The role attributes the rows of ``kind`` hold."""

    def resolve(self, kind: str, text: str) -> str | None:
        """The id of the row of ``kind`` whose id, or else whose name, is ``text``; None when none is."""


def dom_id(path: str) -> str:
    """The element id of the input for ``path``."""
    return "f-" + re.sub(r"[^A-Za-z0-9_-]", "-", path)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# Values to raw form text ------------------------------------------------------------------------------------------

def to_form(widgets: Sequence[Widget], values: Mapping[str, Any], prefix: str = "") -> Raw:
    """The raw form that shows ``values`` (a stored row, or a default) in ``widgets``."""
    raw: Raw = {}
    for w in widgets:
        path = _join(prefix, w.name)
        value = values.get(w.name)
        if value is None:
            if w.kind == "repeat":
                raw[f"{path}~count"] = ["1"]
            continue
        match w.kind:
            case "checkbox":
                if value:
                    raw[path] = ["on"]
            case "lines":
                raw[path] = ["\n".join(str(item) for item in value)]
            case "json":
                raw[path] = [json.dumps(value, indent=2, sort_keys=True)]
            case "roles" | "multiselect":
                raw[path] = [str(item) for item in value]
            case "group":
                raw.update(to_form(w.children, value if isinstance(value, Mapping) else {}, path))
            case "repeat":
                items = value if isinstance(value, list) else []
                raw[f"{path}~count"] = [str(max(1, len(items)))]
                for index, item in enumerate(items):
                    raw.update(to_form(w.children, item if isinstance(item, Mapping) else {}, f"{path}[{index}]"))
            case _:
                raw[path] = [str(value)]
    return raw


# Raw form text to a request body ----------------------------------------------------------------------------------

def _first(raw: Raw, path: str) -> str:
    values = raw.get(path)
    return values[0].strip() if values else ""


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _count(raw: Raw, path: str) -> int:
    try:
        return max(0, min(int(_first(raw, f"{path}~count") or "0"), 256))
    except ValueError:
        return 0


def _blank(widgets: Sequence[Widget], raw: Raw, prefix: str) -> bool:
    """Whether nothing was entered in ``widgets`` under ``prefix``."""
    for w in widgets:
        path = _join(prefix, w.name)
        if w.kind == "group" and not _blank(w.children, raw, path):
            return False
        if w.kind == "repeat" and any(not _blank(w.children, raw, f"{path}[{i}]") for i in range(_count(raw, path))):
            return False
        if w.kind not in ("group", "repeat", "hidden") and any(v.strip() for v in raw.get(path, ())):
            return False
        if w.kind in ("roles", "multiselect") and _first(raw, f"{path}~more"):
            return False
    return True


def _roles(w: Widget, raw: Raw, path: str, choices: Choices, errors: dict[str, str]) -> list[str]:
    roles = [v for v in raw.get(path, ()) if v]
    for line in _lines(_first(raw, f"{path}~more")):
        if line.startswith("@") and w.target is not None:
            found = choices.resolve(w.target, line[1:])
            roles.append(f"@{found}" if found is not None else line)
        elif line.startswith("#"):
            roles.append(line)
        else:
            errors[path] = f"{line!r}: start a role with # (an attribute, or #all) or @ (a name)"
    return list(dict.fromkeys(roles))


def _picked(w: Widget, raw: Raw, path: str, choices: Choices, errors: dict[str, str]) -> list[str]:
    """The ids a multiple choice picked, and those of the rows named (or given by id) one per line beside it."""
    picked = [v for v in raw.get(path, ()) if v]
    for line in _lines(_first(raw, f"{path}~more")):
        found = choices.resolve(w.target, line) if w.target is not None else None
        if found is None:
            errors[path] = f"no row named or with the id {line!r}"
        else:
            picked.append(found)
    return list(dict.fromkeys(picked))


def _value(w: Widget, raw: Raw, path: str, choices: Choices, errors: dict[str, str], editing: bool) -> Any:
    """The JSON value of one widget, or ``_OMIT`` to leave the field out of the body."""
    cleared = None if editing and w.nullable else _OMIT
    text = _first(raw, path)
    match w.kind:
        case "checkbox":
            return bool(raw.get(path))
        case "lines":
            return _lines(raw[path][0]) if raw.get(path) else []
        case "roles":
            return _roles(w, raw, path, choices, errors)
        case "multiselect":
            return _picked(w, raw, path, choices, errors)
        case "group":
            if not w.required and _blank(w.children, raw, path):
                return cleared
            return _object(w.children, raw, path, choices, errors, editing=False)
        case "repeat":
            return [_object(w.children, raw, f"{path}[{i}]", choices, errors, editing=False)
                    for i in range(_count(raw, path)) if not _blank(w.children, raw, f"{path}[{i}]")]
        case "password":
            return text if text else _OMIT
    if not text:
        return cleared
    if w.kind == "number":
        try:
            return int(text)
        except ValueError:
            errors[path] = f"{text!r} is not a whole number"
            return _OMIT
    if w.kind == "json":
        try:
            return json.loads(text)
        except ValueError as exc:
            errors[path] = f"not valid JSON: {exc}"
            return _OMIT
    if w.kind == "select" and w.target is not None and choices.rows(w.target) is None:
        found = choices.resolve(w.target, text)
        if found is None:
            errors[path] = f"no row named or with the id {text!r}"
            return _OMIT
        return found
    return text


def _object(widgets: Sequence[Widget], raw: Raw, prefix: str, choices: Choices, errors: dict[str, str], *,
            editing: bool) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for w in widgets:
        value = _value(w, raw, _join(prefix, w.name), choices, errors, editing)
        if value is not _OMIT:
            body[w.name] = value
    return body


def parse(widgets: Sequence[Widget], raw: Raw, choices: Choices, *, editing: bool) -> tuple[dict[str, Any],
                                                                                             dict[str, str]]:
    """The request body a submitted form stands for, and the errors of the fields that cannot be read (path ->
    message; the body must not be sent when there are any).

    Args:
        widgets: the form's fields.
        raw: what was submitted.
        choices: resolves the names typed for references and roles.
        editing: an edit (a PATCH of every field shown: an emptied optional field is cleared) rather than a create
            (an empty field is left out, so the API's default applies).
    """
    errors: dict[str, str] = {}
    return _object(widgets, raw, "", choices, errors, editing=editing), errors


# Laid out for the template ----------------------------------------------------------------------------------------

@dataclass(slots=True)
class Bound:
    """One widget with what the template shows: its input name and id, value, options and error.

    ``options`` are ``(value, label)`` pairs; ``selected`` the values chosen among them (a role selector's and a
    multiple choice's); ``more`` the roles typed beside them. ``children`` are a group's fields, ``items`` a
    repeatable group's, each a list of its fields.
    """

    widget: Widget
    path: str
    id: str
    value: str = ""
    checked: bool = False
    options: list[tuple[str, str]] = field(default_factory=list)
    selected: frozenset[str] = frozenset()
    more: str = ""
    error: str = ""
    free_text: bool = False
    children: list[Bound] = field(default_factory=list)
    items: list[list[Bound]] = field(default_factory=list)


def _options(w: Widget, choices: Choices) -> tuple[list[tuple[str, str]], bool]:
    """The options of a choice and whether it is typed instead (too many rows to offer)."""
    if w.kind == "select" and w.target is None:
        return [(c, c) for c in w.choices], False
    if w.target is None:
        return [], False
    rows = choices.rows(w.target)
    if w.kind == "roles":
        offered = [("#all", "#all")] + [(f"#{a}", f"#{a}") for a in choices.attributes(w.target)]
        return offered + [(f"@{row_id}", f"@{name}") for row_id, name in rows or ()], False
    if rows is None:
        return [], True
    return [(row_id, name or row_id) for row_id, name in rows], False


def bind(widgets: Sequence[Widget], raw: Raw, errors: Mapping[str, str], choices: Choices,
         prefix: str = "") -> list[Bound]:
    """``widgets`` with the values of ``raw`` and the messages of ``errors`` (by input path), ready to render."""
    bound: list[Bound] = []
    for w in widgets:
        path = _join(prefix, w.name)
        options, free_text = _options(w, choices)
        b = Bound(w, path, dom_id(path), value=raw.get(path, [""])[0] if raw.get(path) else "",
                  checked=bool(raw.get(path)), options=options, error=errors.get(path, ""), free_text=free_text)
        if w.kind in ("roles", "multiselect"):
            chosen = [v for v in raw.get(path, ()) if v]
            offered = {value for value, _ in options}
            b.selected = frozenset(chosen)
            typed = [v for v in chosen if v not in offered]
            b.more = "\n".join([*typed, *_lines(_first(raw, f"{path}~more"))])
        elif w.kind == "group":
            b.children = bind(w.children, raw, errors, choices, path)
        elif w.kind == "repeat":
            b.items = [bind(w.children, raw, errors, choices, f"{path}[{i}]") for i in range(max(1, _count(raw, path)))]
        bound.append(b)
    return bound


def place_error(bound: Sequence[Bound], field_path: str, message: str) -> bool:
    """Show ``message`` on the input that ``field_path`` (a path of the API's error cause: ``tags.x``,
    ``operatingSystems[0].versions[1]``) names or lies within; False when no input of the form does."""
    best: Bound | None = None
    stack = list(bound)
    while stack:
        b = stack.pop()
        stack.extend(b.children)
        for item in b.items:
            stack.extend(item)
        p = b.path
        if (field_path == p or field_path.startswith((p + ".", p + "["))) and (best is None or len(p) > len(best.path)):
            best = b
    if best is None:
        return False
    best.error = message
    return True
