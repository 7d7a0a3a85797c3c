"""The create/update flags of the admin CLI: each is one option that sets one field of a request body.

A :class:`Flag` names its option, the wire field it sets (dotted for a nested field: ``process.path``) and how the
option's text becomes the field's value. Converters that name other rows (``--config-type NAME``,
``--identity-roles @alice``) resolve names to ids through the client; a converter rejects bad text with
:class:`click.BadParameter`, a usage error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from controller.admin.admin_client import AdminClient
from controller.check_types.bodies import OS_TYPES

__all__ = ["ENROLL_METHODS", "Converter", "Flag", "FlagContext", "as_list", "enrollment", "json_document",
           "operating_systems", "processes", "reference", "references", "roles", "tags", "text", "text_or_file"]

ENROLL_METHODS = ("ott", "updb")
"""The enrolments :func:`enrollment` makes: the methods of an identity's ``enrollment`` request it can fill in."""


@dataclass(frozen=True)
class FlagContext:
    """What a converter may need besides the option's text.

    Attributes:
        client: the logged-in client, to resolve names to ids.
        name: the name of the row being created, or None on update.
        option: the option's spelling, for error messages (``--config-type``).
    """

    client: AdminClient
    name: str | None
    option: str


Converter = Callable[[Any, FlagContext], Any]
"""Turns an option's parsed value (text, a number, a flag, or a tuple for repeatable options) into a field value."""


def text(value: Any, _context: FlagContext) -> Any:
    """The value unchanged."""
    return value


@dataclass(frozen=True)
class Flag:
    """One option of ``tollgate create KIND`` / ``tollgate update KIND``.

    Attributes:
        name: the long option without dashes (``role-attributes``).
        field: the wire field it sets; dots for nested objects (``process.osType``).
        help: the option's help text.
        convert: how the option's value becomes the field's value.
        metavar: what the help shows for the value.
        kind: click's parameter type (``click.INT``, a ``click.Choice``), text when None.
        switch: a boolean ``--NAME/--no-NAME`` pair instead of an option with a value.
        multiple: the option repeats; the converter receives the tuple of values.
        variants: for kinds with a discriminator (posture checks' ``typeId``): the values the flag belongs to;
            empty for every value.
    """

    name: str
    field: str
    help: str
    convert: Converter = text
    metavar: str | None = None
    kind: click.ParamType[Any, Any] | None = None
    switch: bool = False
    multiple: bool = False
    variants: frozenset[str] = frozenset()

    @property
    def option(self) -> str:
        """The option as typed, ``--NAME``."""
        return "--" + self.name

    @property
    def parameter(self) -> str:
        """The name click passes the value under."""
        return self.name.replace("-", "_")

    def click_option(self) -> click.Option:
        """The click option this flag declares (its default None means "not given")."""
        if self.switch:
            return click.Option([f"{self.option}/--no-{self.name}", self.parameter], default=None, help=self.help)
        return click.Option([self.option, self.parameter], type=self.kind, metavar=self.metavar, help=self.help,
                            multiple=self.multiple, default=None)


def as_list(value: Any, _context: FlagContext) -> list[str]:
    """``a,b,c`` as a list; an empty text is the empty list (which clears a list on update)."""
    return [item.strip() for item in str(value).split(",") if item.strip()]


def _read_argument(value: str, context: FlagContext) -> str:
    """The text of ``@FILE`` (``@-`` is standard input), or ``value`` itself."""
    if not value.startswith("@"):
        return value
    if value == "@-":
        return sys.stdin.read()
    try:
        return Path(value[1:]).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot read {value[1:]}: {exc.strerror}", param_hint=context.option) from exc


def text_or_file(value: Any, context: FlagContext) -> str:
    """A text given inline or as ``@FILE`` (a PEM certificate...)."""
    return _read_argument(str(value), context)


def json_document(value: Any, context: FlagContext) -> Any:
    """A JSON document given inline or as ``@FILE``."""
    source = _read_argument(str(value), context)
    try:
        return json.loads(source)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=context.option) from exc


def reference(kind: str) -> Converter:
    """A converter of an id or name of a ``kind`` row to its id."""
    def convert(value: Any, context: FlagContext) -> str:
        return context.client.resolve(kind, str(value))
    return convert


def references(kind: str) -> Converter:
    """A converter of a comma-separated list of ids or names of ``kind`` rows to their ids."""
    def convert(value: Any, context: FlagContext) -> list[str]:
        return [context.client.resolve(kind, item) for item in as_list(value, context)]
    return convert


def roles(kind: str) -> Converter:
    """A converter of a comma-separated role list (``#attribute``, ``#all``, ``@id``, ``@name``) whose ``@`` entries
    name ``kind`` rows: names become ids, as the API stores them."""
    def convert(value: Any, context: FlagContext) -> list[str]:
        selected = []
        for item in as_list(value, context):
            if item.startswith("@"):
                item = "@" + context.client.resolve(kind, item[1:])
            elif not item.startswith("#"):
                raise click.BadParameter(f"{item!r}: a role is #attribute, #all, @id or @name",
                                         param_hint=context.option)
            selected.append(item)
        return selected
    return convert


def tags(values: Sequence[str], context: FlagContext) -> dict[str, str]:
    """Repeated ``KEY=VALUE`` as the tags object."""
    result = {}
    for value in values:
        key, separator, item = value.partition("=")
        if not separator or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint=context.option)
        result[key] = item
    return result


def enrollment(value: Any, context: FlagContext) -> dict[str, Any]:
    """``ott`` (a one-time token) or ``updb`` (a password the endpoint sets, for the username of the identity's
    name) as the identity's ``enrollment`` request."""
    if value == "ott":
        return {"ott": True}
    if context.name is None:
        raise click.BadParameter("an updb enrolment needs the identity's name", param_hint=context.option)
    return {"updb": context.name}


def _os_type(value: str, context: FlagContext) -> str:
    for known in OS_TYPES:
        if value.lower() == known.lower():
            return known
    raise click.BadParameter(f"{value!r} is not one of {', '.join(OS_TYPES)}", param_hint=context.option)


def operating_systems(values: Sequence[str], context: FlagContext) -> list[dict[str, Any]]:
    """Repeated ``TYPE[:VERSION,...]`` (``Windows:>=10.0.19041``, ``Linux``) as an OS check's ``operatingSystems``."""
    result = []
    for value in values:
        os_type, _, versions = value.partition(":")
        result.append({"type": _os_type(os_type.strip(), context), "versions": as_list(versions, context)})
    return result


def processes(values: Sequence[str], context: FlagContext) -> list[dict[str, Any]]:
    """Repeated ``OSTYPE:PATH[|hashes=H,...][|signers=F,...]`` as a PROCESS_MULTI check's ``processes``.

    The OS type ends at the first colon, so Windows paths (``Windows:C:\\app.exe``) keep theirs; ``|`` cannot occur in
    a Windows path.
    """
    result = []
    for value in values:
        head, *extras = value.split("|")
        os_type, separator, path = head.partition(":")
        if not separator or not path:
            raise click.BadParameter(f"{value!r} is not OSTYPE:PATH[|hashes=...][|signers=...]",
                                     param_hint=context.option)
        process: dict[str, Any] = {"osType": _os_type(os_type.strip(), context), "path": path, "hashes": [],
                                   "signerFingerprints": []}
        for extra in extras:
            key, _, items = extra.partition("=")
            wire = {"hashes": "hashes", "signers": "signerFingerprints"}.get(key.strip())
            if wire is None:
                raise click.BadParameter(f"{extra!r}: expected hashes=... or signers=...", param_hint=context.option)
            process[wire] = as_list(items, context)
        result.append(process)
    return result
