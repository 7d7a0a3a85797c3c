"""The ``tollgate`` command: one click group holding ``serve``, which runs the controller
(``controller/runtime/serve_command.py``), and every verb that administers one (``controller/admin/``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from controller.admin.verbs import cli
from controller.runtime.serve_command import parse_settings, serve

__all__ = ["cli", "main", "parse_settings"]

cli.add_command(serve)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tollgate`` script; returns the process exit status (the admin verbs' help documents
    them)."""
    try:
        cli.main(list(sys.argv[1:] if argv is None else argv), prog_name="tollgate")
    except SystemExit as stopped:  # click ends every run with sys.exit
        return stopped.code if isinstance(stopped.code, int) else (0 if stopped.code is None else 1)
    return 0
