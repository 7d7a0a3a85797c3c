"""The ``tollgate`` command line: ``tollgate serve [--data-dir DIR] [--host H] [--port P] [--no-tls] ...``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from controller.logs import configure_logging
from controller.settings import Settings

__all__ = ["main", "parse_settings"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tollgate", description="Tollgate zero-trust overlay controller")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the controller")
    serve.add_argument("--data-dir", type=Path, default=Path("data"), help="LMDB, PKI and credentials (./data)")
    serve.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    serve.add_argument("--port", type=int, default=1280, help="listen port (1280)")
    serve.add_argument("--no-tls", action="store_true", help="serve plain HTTP instead of HTTPS")
    serve.add_argument("--san", action="append", default=[], help="extra server certificate name (repeatable)")
    serve.add_argument("--session-timeout", type=float, default=1800.0,
                       help="idle seconds before an API session ends (1800; under 60 means 1800)")
    serve.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request body size cap (1 MiB)")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (INFO)")
    return parser


def parse_settings(argv: Sequence[str]) -> tuple[Settings, str]:
    """Settings from the command line and the ``TOLLGATE_ADMIN_*`` environment variables."""
    args = _parser().parse_args(argv)
    settings = Settings(
        data_dir=args.data_dir, host=args.host, port=args.port, tls=not args.no_tls, sans=tuple(args.san),
        session_timeout=args.session_timeout, max_body_bytes=args.max_body_bytes,
        admin_username=os.environ.get("TOLLGATE_ADMIN_USERNAME") or "admin",
        admin_password=os.environ.get("TOLLGATE_ADMIN_PASSWORD") or None,
    )
    return settings, str(args.log_level)


def main(argv: Sequence[str] | None = None) -> int:
    settings, level = parse_settings(sys.argv[1:] if argv is None else argv)
    configure_logging(level)
    from controller.main import run

    try:
        run(settings)
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        logging.getLogger("tollgate").warning("interrupted")
        return 130
    return 0
