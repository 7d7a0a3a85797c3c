"""``tollgate db snapshot``, ``db check [--fix] [--wait]`` and ``db results``: the controller's database upkeep."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import click

from controller.admin.exits import ExitCode, stop
from controller.admin.invocation import State, controller_option, emit, output_options, pass_state
from controller.admin.output import cell

__all__ = ["db", "integrity_report"]

_RESULTS = "database/data-integrity-results"
_FIRST_POLL_SECONDS = 0.1
_LONGEST_POLL_SECONDS = 1.0


def integrity_report(results: Mapping[str, Any]) -> str:
    """The data-integrity results (``GET /database/data-integrity-results``) as people read them."""
    if results.get("inProgress"):
        status = "in progress"
    elif results.get("error"):
        status = f"failed: {results['error']}"
    elif results.get("endTime"):
        status = "finished"
    else:
        status = "never run"
    problems = list(results.get("results") or [])
    lines = [f"started:  {cell(results.get('startTime'))}", f"ended:    {cell(results.get('endTime'))}",
             f"status:   {status}", f"fixing:   {'yes' if results.get('fixingErrors') else 'no'}"]
    count = f"{len(problems)}" + (" (too many: the rest were not kept)" if results.get("tooManyErrors") else "")
    lines.append(f"problems: {count}")
    lines.extend(f"  {'fixed' if item.get('fixed') else 'found'}  {item.get('description', '')}" for item in problems)
    return "\n".join(lines)


@click.group()
def db() -> None:
    """The controller's database: snapshots and integrity checks."""


@db.command()
@controller_option
@pass_state
def snapshot(state: State) -> None:
    """Write a consistent copy of the database beside it on the controller (at most one a minute)."""
    data = state.client().request("POST", "database/snapshot") or {}
    where = data.get("path") if isinstance(data, dict) else None
    click.echo(f"snapshot written{f' to {where}' if where else ''}")


def _run_of(results: Mapping[str, Any]) -> tuple[Any, Any]:
    return results.get("startTime"), results.get("endTime")


@db.command()
@controller_option
@click.option("--fix", is_flag=True, help="also repair what can be repaired")
@click.option("--wait", is_flag=True, help="wait for the run to end and print its results")
@click.option("--timeout", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="seconds --wait waits at most")
@output_options
@pass_state
def check(state: State, fix: bool, wait: bool, timeout: float, output: str) -> None:
    """Start a data-integrity check of the database (with --fix, a repair); one run at a time.

    Without --wait it only starts the run; see its results with `tollgate db results`.
    """
    client = state.client()
    before = _run_of(client.request("GET", _RESULTS) or {}) if wait else (None, None)
    client.request("POST", "database/fix-data-integrity" if fix else "database/check-data-integrity")
    if not wait:
        click.echo(f"integrity {'repair' if fix else 'check'} started; see its results with: tollgate db results")
        return
    deadline = time.monotonic() + timeout
    pause = _FIRST_POLL_SECONDS
    while True:
        results = client.request("GET", _RESULTS) or {}
        # The run is ours once the results describe a run other than the one before it, and it has ended.
        if not results.get("inProgress") and results.get("endTime") and _run_of(results) != before:
            break
        if time.monotonic() + pause > deadline:
            raise stop(f"the integrity run is still going after {timeout:g} s; see its results later with: "
                       "tollgate db results", ExitCode.API_ERROR)
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_POLL_SECONDS)
    emit(results, output, integrity_report)
    if results.get("error"):
        raise stop(f"the integrity run failed: {results['error']}", ExitCode.API_ERROR)


@db.command()
@controller_option
@output_options
@pass_state
def results(state: State, output: str) -> None:
    """Show the results of the last (or current) data-integrity run."""
    emit(state.client().request("GET", _RESULTS) or {}, output, integrity_report)
