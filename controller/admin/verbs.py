"""The ``tollgate`` click group of every admin verb (``controller/cli.py`` adds ``serve`` to it).

``cli`` is the group. Reads: ``list``, ``show``; writes: ``create``, ``update``, ``delete``, ``apply``; views:
``policy-advice``, ``posture``, ``access``, ``events``; sessions: ``login``, ``logout``, ``controllers``, ``use``;
upkeep: ``db``, ``export``.
"""

from __future__ import annotations

from typing import Any

import click

from controller.admin.apply_command import apply_command, export_command
from controller.admin.database import db
from controller.admin.edit_verbs import create, update
from controller.admin.exits import EXIT_HELP
from controller.admin.insight_verbs import access, events
from controller.admin.invocation import (
    AdminGroup,
    State,
    controller_option,
    emit,
    emit_rows,
    output_options,
    pass_state,
)
from controller.admin.kinds import KINDS, Kind, find_kind
from controller.admin.login_verbs import controllers, login, logout, use
from controller.admin.views import policy_advice, posture

__all__ = ["KindType", "cli"]


class KindType(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click releases
    """A kind's path or singular name (``service-policies``, ``service-policy``), converted to its :class:`Kind`."""

    name = "KIND"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Kind:
        if isinstance(value, Kind):
            return value
        kind = find_kind(str(value))
        if kind is None:
            self.fail(f"unknown kind {value!r}; one of: {', '.join(k.path for k in KINDS)}", param, ctx)
        return kind


_KIND = KindType()


@click.group(cls=AdminGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP)
@click.option("--controller", metavar="NAME", envvar="TOLLGATE_CONTROLLER",
              help="the saved controller to use (the default one; or $TOLLGATE_CONTROLLER)")
@click.pass_context
def cli(ctx: click.Context, controller: str | None) -> None:
    """Tollgate: run the controller (serve) or administer one.

    Log in once with `tollgate login URL`; the other verbs use that session. Wherever an ID is asked for, a
    NAME works too. KIND is a collection such as identities, services, service-policies, edge-routers,
    edge-router-policies, service-edge-router-policies, configs, config-types, posture-checks, authenticators,
    enrollments, cas, external-jwt-signers, auth-policies, terminators, api-sessions, sessions (or its singular).
    """
    ctx.ensure_object(State).controller = controller


@cli.command("list")
@controller_option
@click.argument("kind", type=_KIND)
@click.argument("filter", required=False)
@click.option("--limit", type=int, help="rows per page (the API's default 10; at most 500; -1 for all)")
@click.option("--offset", type=int, help="rows to skip")
@click.option("--sort", metavar="FIELD [asc|desc]", help="sort order, e.g. 'name desc'")
@click.option("--all", "every", is_flag=True, help="page through every row")
@output_options
@pass_state
def list_rows(state: State, kind: Kind, filter: str | None, limit: int | None, offset: int | None, sort: str | None,
              every: bool, output: str) -> None:
    """List rows of KIND, optionally matching FILTER (ZitiQL: 'name contains "web"', 'isAdmin = true')."""
    client = state.client()
    if every:
        if limit is not None or offset is not None:
            raise click.UsageError("--all pages through every row: leave out --limit and --offset")
        rows = client.list_all(kind.path, filter, sort)
        emit_rows(rows, output, kind.columns if rows else ())
        return
    rows, meta = client.page(kind.path, filter=filter, limit=limit, offset=offset, sort=sort)
    emit_rows(rows, output, kind.columns if rows else ())
    pagination = meta.get("pagination") or {}
    total, start = pagination.get("totalCount"), int(pagination.get("offset") or 0)
    if not rows:
        click.echo(f"no {kind.path}" + (f" (of {total})" if total else ""), err=True)
    elif isinstance(total, int | float) and start + len(rows) < total:
        click.echo(f"showing {start + 1}-{start + len(rows)} of {int(total)} {kind.path}; "
                   f"more with --offset {start + len(rows)} or --all", err=True)


@cli.command()
@controller_option
@click.argument("kind", type=_KIND)
@click.argument("target", metavar="ID|NAME")
@output_options
@pass_state
def show(state: State, kind: Kind, target: str, output: str) -> None:
    """Show one row of KIND."""
    client = state.client()
    emit(client.get(kind.path, client.resolve(kind.path, target)), output)


@cli.command()
@controller_option
@click.argument("kind", type=_KIND)
@click.argument("targets", metavar="ID|NAME...", nargs=-1, required=True)
@pass_state
def delete(state: State, kind: Kind, targets: tuple[str, ...]) -> None:
    """Delete rows of KIND, in the order given; stops at the first that cannot be deleted."""
    if not kind.deletable:
        raise click.BadParameter(f"{kind.path} cannot be deleted", param_hint="KIND")
    client = state.client()
    for target in targets:
        row_id = client.resolve(kind.path, target)
        client.delete(kind.path, row_id)
        click.echo(f"deleted {kind.singular} {row_id}")



for _command in (login, logout, controllers, use, create, update, policy_advice, posture, access, events, db,
                 apply_command, export_command):
    cli.add_command(_command)
