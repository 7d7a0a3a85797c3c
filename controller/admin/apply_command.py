"""``tollgate apply -f FILE [--prune] [--dry-run]`` and ``tollgate export [-o FILE]``: the controller's model as a
file (the format is described in :mod:`controller.admin.model_file`).

``apply`` reads the file, reads the controller's current state, plans (:func:`controller.admin.apply.plan`) and
makes the changes, printing each as a diff line; ``--dry-run`` prints the plan and changes nothing. A bad file
(not YAML, unknown kind or field, a reference to a name that will not exist...) is refused with one line and exit
status 2 before anything is changed. When the controller refuses a change part-way, apply stops: the changes made
are the lines printed so far, the failed change and the controller's error follow on standard error, and the exit
status is the error's (see :mod:`controller.admin.exits`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO

import click

from controller.admin.admin_client import AdminError, ConnectionProblem
from controller.admin.apply import ApplyFailed, Change, execute, plan
from controller.admin.exits import ExitCode, fail
from controller.admin.export import dump_model, read_current
from controller.admin.invocation import State, controller_option, pass_state
from controller.admin.model_file import ModelError, parse_model

__all__ = ["PROGRESS_THRESHOLD", "apply_command", "export_command"]

_REFUSALS = (AdminError, ConnectionProblem)
"""What the client raises when the controller refuses a change or cannot be reached: apply stops there."""

PROGRESS_THRESHOLD = 20
"""Plans with more changes than this show a progress bar instead of one line per change (on a terminal only)."""


def _usage(message: str) -> click.exceptions.Exit:
    click.echo(f"error: {message}", err=True)
    return click.exceptions.Exit(int(ExitCode.USAGE))


def _on_terminal() -> bool:
    return sys.stdout.isatty()


def _done_summary(changes: tuple[Change, ...]) -> str:
    counts = {action: sum(1 for c in changes if c.action == action) for action in ("create", "update", "delete")}
    return f"{counts['create']} created, {counts['update']} updated, {counts['delete']} deleted"


def _print_change(change: Change) -> None:
    for line in change.lines():
        click.echo(line)


@click.command("apply")
@controller_option
@click.option("-f", "--file", "source", type=click.File("r", encoding="utf-8"), required=True, metavar="FILE",
              help="the model file (YAML; - for standard input)")
@click.option("--prune", is_flag=True, help="also delete what the file does not name (of the kinds it can hold)")
@click.option("--dry-run", is_flag=True, help="print the changes as a diff and make none")
@pass_state
def apply_command(state: State, source: IO[str], prune: bool, dry_run: bool) -> None:
    """Make the controller hold what FILE says: create, update and (with --prune) delete entities by name.

    FILE is YAML: config-types, configs, posture-checks, services, identities, service-policies,
    edge-router-policies and service-edge-router-policies, each a list of entities with the API's fields, naming
    what they refer to (configType: NAME, '@NAME' in role lists). `tollgate export` writes one.
    """
    try:
        desired = parse_model(source.read())
    except UnicodeDecodeError:
        raise _usage(f"{source.name} is not UTF-8 text") from None
    except ModelError as exc:
        raise _usage(str(exc)) from None
    client = state.client()
    current = read_current(client)
    try:
        the_plan = plan(desired, current, prune=prune)
    except ModelError as exc:
        raise _usage(str(exc)) from None
    if the_plan.empty:
        click.echo("no changes")
        return
    if dry_run:
        for line in the_plan.lines():
            click.echo(line)
        click.echo(f"dry run: {the_plan.summary()}; nothing changed")
        return
    total = len(the_plan.changes)
    show_bar = total > PROGRESS_THRESHOLD and _on_terminal()
    try:
        if show_bar:
            with click.progressbar(length=total, label="applying") as bar:
                execute(client, the_plan, current, on_done=lambda _change: bar.update(1), failures=_REFUSALS)
        else:
            execute(client, the_plan, current, on_done=_print_change, failures=_REFUSALS)
    except ApplyFailed as exc:
        if show_bar:
            for change in exc.done:
                for line in change.lines():
                    click.echo(line, err=True)
        click.echo(f"stopped after {len(exc.done)} of {total} changes ({_done_summary(exc.done)}); failed:",
                   err=True)
        for line in exc.failed.lines():
            click.echo(f"  {line}", err=True)
        assert isinstance(exc.error, AdminError | ConnectionProblem)  # execute raises for _REFUSALS only
        raise fail(exc.error, had_session=True) from None
    click.echo(f"applied {total} change{'' if total == 1 else 's'}: {_done_summary(the_plan.changes)}")


@click.command("export")
@controller_option
@click.option("-o", "--output", "target", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the model to this file instead of standard output")
@pass_state
def export_command(state: State, target: Path | None) -> None:
    """Write the controller's model in the format `tollgate apply -f` reads (without what a new controller makes by
    itself: the default admin, unchanged built-in config types)."""
    text = dump_model(read_current(state.client()).exported())
    if target is None or str(target) == "-":
        click.echo(text, nl=False)
        return
    try:
        # 0600, as --jwt-out: config data and appData may hold what only operators should read.
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as exc:
        raise _usage(f"cannot write {target}: {exc.strerror}") from None

