"""The admin CLI's exit statuses, and the one place a failure becomes a one-line message and a status.

| status | meaning |
|---|---|
| 0 | success |
| 1 | any other error answer from the controller (405, 413, 429, 5xx...) or an unreadable configuration file |
| 2 | usage: a bad command line, option value or input file |
| 3 | not found (404, or no row with that id or name) |
| 4 | not authorized: not logged in, the session ended or expired, bad credentials, not an admin (401, 403) |
| 5 | rejected: validation or conflict (400, 409) |
| 6 | cannot connect: refused, unreachable, timed out, TLS failure or an untrusted controller certificate |
"""

from __future__ import annotations

from enum import IntEnum

import click

from controller.admin.admin_client import AdminError, ConnectionProblem
from controller.admin.config import ConfigProblem, NotLoggedIn
from controller.admin.output import error_line

__all__ = ["EXIT_HELP", "ExitCode", "exit_code_for", "fail", "stop"]


class ExitCode(IntEnum):
    """The status ``tollgate`` exits with, by class of failure."""

    OK = 0
    API_ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    NOT_AUTHORIZED = 4
    REJECTED = 5
    CONNECTION = 6


EXIT_HELP = """\b
Exit status:
  0  success
  1  other error answer from the controller (429, 5xx...), unreadable configuration
  2  usage error: bad command line, option value or input file
  3  not found (404, or no row with that id or name)
  4  not authorized: not logged in, session ended or expired, bad credentials (401, 403)
  5  rejected: validation or conflict (400, 409)
  6  cannot connect: refused, timed out, TLS failure, untrusted certificate"""


def exit_code_for(error: Exception) -> ExitCode:
    """The exit status of a failure raised by a verb."""
    if isinstance(error, ConnectionProblem):
        return ExitCode.CONNECTION
    if isinstance(error, NotLoggedIn):
        return ExitCode.NOT_AUTHORIZED
    if isinstance(error, AdminError):
        if error.status == 404:
            return ExitCode.NOT_FOUND
        if error.status in (401, 403):
            return ExitCode.NOT_AUTHORIZED
        if error.status in (400, 409, 422):
            return ExitCode.REJECTED
    return ExitCode.API_ERROR


def _message(error: Exception, *, had_session: bool) -> str:
    if isinstance(error, AdminError):
        if had_session and error.status == 401 and error.code == "UNAUTHORIZED":
            return error_line(error.code, "the session has ended or expired: log in again (tollgate login URL)")
        return error_line(error.code, error.message, error.cause)
    return "error: " + " ".join(str(error).split())


def fail(error: AdminError | ConnectionProblem | ConfigProblem, *, had_session: bool) -> click.exceptions.Exit:
    """Print the one-line message of ``error`` on standard error; the exception that exits with its status.

    Args:
        error: the failure.
        had_session: the request carried a session token that is no longer valid, so a 401 ``UNAUTHORIZED``
            means "log in again" (rather than "this identity may not do that").

    Returns:
        The ``click.exceptions.Exit`` to raise.
    """
    click.echo(_message(error, had_session=had_session), err=True)
    return click.exceptions.Exit(int(exit_code_for(error)))


def stop(message: str, code: ExitCode) -> click.exceptions.Exit:
    """Print ``error: <message>`` on standard error; the exception that exits with ``code``."""
    click.echo("error: " + " ".join(message.split()), err=True)
    return click.exceptions.Exit(int(code))
