"""``tollgate create KIND`` and ``tollgate update KIND``: one subcommand per writable kind, derived from its flags.

A request body is built from, in order: the generic ``--body JSON|@FILE`` (also ``--data`` on every kind but configs,
whose ``--data`` is the config's data), the kind's flags (which win over the generic body), ``--tag KEY=VALUE``,
and on create the defaults of the fields the API requires.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from controller.admin.admin_client import AdminClient
from controller.admin.flags import FlagContext, json_document, tags
from controller.admin.invocation import State, common_parameters, emit
from controller.admin.kinds import KINDS, Kind, find_kind
from controller.admin.output import lookup

__all__ = ["build_body", "create", "update"]


class KindGroup(click.Group):
    """A group of one subcommand per kind that also accepts a kind's singular name (``create service-policy``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        kind = find_kind(cmd_name)
        return super().get_command(ctx, kind.path if kind is not None else cmd_name)


def _generic_option(kind: Kind) -> click.Option:
    names = ["--body"] if kind.flag("data") is not None else ["--body", "--data"]
    return click.Option([*names, "body"], metavar="JSON|@FILE",
                        help="request body fields as a JSON object (the flags win over it)")


def _tag_option() -> click.Option:
    return click.Option(["--tag", "tag"], metavar="KEY=VALUE", multiple=True,
                        help="a tag, repeatable (replaces all the tags)")


def _set_field(body: dict[str, Any], path: str, value: Any, existing: Mapping[str, Any] | None) -> None:
    """Set ``body[path]``; a nested field starts from the row's current object so that PATCH keeps its siblings."""
    *parents, last = path.split(".")
    target = body
    walked: list[str] = []
    for step in parents:
        walked.append(step)
        if not isinstance(target.get(step), dict):
            current = lookup(existing, ".".join(walked)) if existing is not None else None
            target[step] = copy.deepcopy(current) if isinstance(current, dict) else {}
        target = target[step]
    target[last] = value


def build_body(kind: Kind, values: Mapping[str, Any], client: AdminClient, *, name: str | None,
               existing: Mapping[str, Any] | None) -> dict[str, Any]:
    """The request body the options of ``tollgate create/update KIND`` describe.

    Args:
        kind: the kind being written.
        values: click's parameter values (None or an empty tuple for options not given).
        client: resolves names given for references and roles.
        name: the name of the row being created (create), else None.
        existing: the row being updated, when its current values matter (discriminator, nested fields).

    Returns:
        The body, without the create defaults.

    Raises:
        click.UsageError: a flag that does not belong to the row's variant, or a generic body that is not an object.
    """
    body: dict[str, Any] = {}
    if values.get("body") is not None:
        generic = json_document(values["body"], FlagContext(client, name, "--body"))
        if not isinstance(generic, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--body")
        body.update(generic)
    given = [flag for flag in kind.flags if values.get(flag.parameter) not in (None, ())]
    # The discriminator first: the variant it names decides which of the other flags apply.
    given.sort(key=lambda flag: flag.field != kind.discriminator)
    for flag in given:
        if flag.variants:
            variant = body.get(str(kind.discriminator), (existing or {}).get(str(kind.discriminator)))
            if variant not in flag.variants:
                raise click.UsageError(f"{flag.option} applies to {' and '.join(sorted(flag.variants))} checks only")
        value = flag.convert(values[flag.parameter], FlagContext(client, name, flag.option))
        _set_field(body, flag.field, value, existing)
    if values.get("tag"):
        body["tags"] = tags(values["tag"], FlagContext(client, name, "--tag"))
    return body


def _write_enrollment_jwt(client: AdminClient, identity_id: str, target: Path) -> None:
    detail = client.get("identities", identity_id)
    enrollments = detail.get("enrollment") or {}
    jwt = next((item.get("jwt") for item in enrollments.values() if isinstance(item, dict) and item.get("jwt")), None)
    if jwt is None:
        raise click.UsageError("the identity has no enrolment JWT (give --enroll ott or updb)")
    # The JWT's token lets whoever holds it enrol as this identity: only the owner may read the file.
    try:
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), 0o600)  # an existing file keeps its mode through open()
            stream.write(str(jwt) + "\n")
    except OSError as exc:
        raise click.FileError(str(target), exc.strerror) from exc


def _a(kind: Kind) -> str:
    return f"{'an' if kind.singular[0] in 'aeiou' else 'a'} {kind.singular}"


def _create_command(kind: Kind) -> click.Command:
    params: list[click.Parameter] = []
    if kind.named:
        params.append(click.Argument(["name"]))
    params.extend(flag.click_option() for flag in kind.flags)
    if kind.path == "identities":
        params.append(click.Option(["--jwt-out", "jwt_out"], type=click.Path(dir_okay=False, path_type=Path),
                                   help="write the enrolment JWT of the new identity to this file (mode 0600)"))
    params.extend((_generic_option(kind), _tag_option(), *common_parameters(output=True)))

    def run(**values: Any) -> None:
        state = click.get_current_context().ensure_object(State)
        client = state.client()
        name = values.get("name")
        if values.get("jwt_out") is not None and values.get("enroll") is None:
            raise click.UsageError("--jwt-out needs --enroll")
        body = build_body(kind, values, client, name=name, existing=None)
        if name is not None:
            body["name"] = name
        for field, default in kind.create_defaults.items():
            body.setdefault(field, copy.deepcopy(default))
        created = client.request("POST", kind.path, json=body) or {}
        if values.get("jwt_out") is not None:
            _write_enrollment_jwt(client, str(created.get("id")), values["jwt_out"])
        emit(created, values["output"], lambda data: str(data.get("id", "")))

    command = click.Command(kind.path, params=params, callback=run,
                            help=f"Create {_a(kind)}{' called NAME' if kind.named else ''}; prints its id.")
    return command


def _update_command(kind: Kind) -> click.Command:
    params: list[click.Parameter] = [click.Argument(["target"], metavar="ID|NAME" if kind.named else "ID")]
    if kind.named:
        params.append(click.Option(["--name", "new_name"], metavar="NAME", help="rename it"))
    params.extend(flag.click_option() for flag in kind.flags)
    params.extend((_generic_option(kind), _tag_option(), *common_parameters(output=False)))
    nested = any("." in flag.field for flag in kind.flags)

    def run(**values: Any) -> None:
        client = click.get_current_context().ensure_object(State).client()
        row_id = client.resolve(kind.path, values["target"])
        existing = client.get(kind.path, row_id) if kind.discriminator or nested else None
        body = build_body(kind, values, client, name=None, existing=existing)
        if values.get("new_name") is not None:
            body["name"] = values["new_name"]
        if not body:
            raise click.UsageError("nothing to change: give at least one flag, --tag or --body")
        if kind.discriminator and existing is not None:
            body.setdefault(kind.discriminator, existing.get(kind.discriminator))  # PATCH names the variant
        client.update(kind.path, row_id, body)
        click.echo(f"updated {kind.singular} {row_id}")

    command = click.Command(kind.path, params=params, callback=run,
                            help=f"Change the given fields of {_a(kind)} (PATCH); others keep their values.")
    return command


create = KindGroup("create", help="Create a row of KIND (see tollgate create KIND --help for its flags).",
                   commands=[_create_command(kind) for kind in KINDS if kind.creatable])
update = KindGroup("update", help="Change fields of a row of KIND (see tollgate update KIND --help for its flags).",
                   commands=[_update_command(kind) for kind in KINDS if kind.updatable])
