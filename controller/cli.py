"""The ``tollgate`` command line: ``tollgate serve [--data-dir DIR] [--host H] [--port P] [--no-tls] ...``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from controller.logs import configure_logging
from controller.settings import Settings

__all__ = ["main", "parse_settings"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The reference controller's limits for the default admin's credentials (``ziti controller edge init``).
_USERNAME_LENGTH = (4, 100)
_PASSWORD_LENGTH = (5, 100)
# The server key types ensure_pki accepts (controller.authentication.pki.SERVER_KEY_TYPES), spelled out here so that
# parsing the command line does not import the controller.
_SERVER_KEY_TYPES = ("rsa", "ec")


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535 (0 picks a free port)")
    return value


def _host_port(text: str) -> str:
    """A listen address ``HOST:PORT`` (``[IPv6]:PORT``), as hypercorn binds it; returned unchanged."""
    host, _, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    name = host[1:-1] if bracketed else host
    if (not name or any(c in name for c in "[]") or (":" in name and not bracketed)
            or not (port.isascii() and port.isdigit()) or int(port) > 65535):
        raise argparse.ArgumentTypeError("must be HOST:PORT ([ADDRESS]:PORT for IPv6), the port between 0 and 65535")
    return text


def _positive(unit: str) -> Callable[[str], int]:
    """An argument type for a positive whole number of ``unit``."""
    def parse(text: str) -> int:
        value = int(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be a positive number of {unit}")
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tollgate", description="Tollgate zero-trust overlay controller")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve", help="run the controller",
        description="Serve the management and client APIs. The default admin's credentials on first start come "
                    "from TOLLGATE_ADMIN_USERNAME (admin) and TOLLGATE_ADMIN_PASSWORD (random when unset, printed "
                    "once and written to DATA_DIR/admin-credentials).")
    serve.add_argument("--data-dir", type=Path, default=Path("data"), help="LMDB, PKI and credentials (./data)")
    serve.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    serve.add_argument("--port", type=_port, default=1280, help="listen port; 0 picks a free one (1280)")
    serve.add_argument("--no-tls", action="store_true", help="serve plain HTTP instead of HTTPS")
    serve.add_argument("--san", action="append", default=[], help="extra server certificate name (repeatable)")
    serve.add_argument("--session-timeout", type=float, default=1800.0,
                       help="idle seconds before an API session ends (1800; under 60 means 1800)")
    serve.add_argument("--max-body-bytes", type=_positive("bytes"), default=1 << 20,
                       help="request body size cap (1 MiB)")
    serve.add_argument("--no-posture-evaluation", action="store_true",
                       help="grant sessions on service policies alone; posture checks never refuse or revoke")
    serve.add_argument("--server-key", choices=_SERVER_KEY_TYPES, default="rsa",
                       help="server key type: rsa (RS256 JWTs, needed by libziti 0.29 SDKs) or ec (P-256, ES256) "
                            "(rsa); a change replaces the server certificate, never the CA")
    serve.add_argument("--cert-validity-days", type=_positive("days"), default=365,
                       help="lifetime of issued identity and router certificates, in days (365)")
    serve.add_argument("--max-connections", type=_positive("connections"), default=1000,
                       help="connections served at once; more are closed at once (1000)")
    serve.add_argument("--read-timeout", type=_positive("seconds"), default=30,
                       help="seconds to wait for a request head, between requests, and for a body (30)")
    serve.add_argument("--address", default=None,
                       help="the URL endpoints reach the controller at, written into enrolment JWTs "
                            "(https://HOST:PORT from --host and --port)")
    serve.add_argument("--metrics-address", type=_host_port, default=None, metavar="HOST:PORT",
                       help="serve GET /metrics (Prometheus text format, plain HTTP, no session needed) on this "
                            "separate listener; port 0 picks a free one (off: no metrics listener)")
    serve.add_argument("--log-level", type=str.upper, choices=_LEVELS, default="INFO", help="log level (INFO)")
    return parser


def parse_settings(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[Settings, str]:
    """Settings from the command line and the ``TOLLGATE_ADMIN_*`` environment variables.

    Bad arguments (including admin credentials outside the login limits, which could never log in) print a usage
    error and exit with status 2.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    username = env.get("TOLLGATE_ADMIN_USERNAME") or "admin"
    password = env.get("TOLLGATE_ADMIN_PASSWORD") or None
    for name, value, (low, high) in (("TOLLGATE_ADMIN_USERNAME", username, _USERNAME_LENGTH),
                                     ("TOLLGATE_ADMIN_PASSWORD", password, _PASSWORD_LENGTH)):
        if value is not None and not low <= len(value) <= high:
            parser.error(f"{name} must be {low} to {high} characters long")
    settings = Settings(
        data_dir=args.data_dir, host=args.host, port=args.port, tls=not args.no_tls, sans=tuple(args.san),
        session_timeout=args.session_timeout, max_body_bytes=args.max_body_bytes,
        admin_username=username, admin_password=password, evaluate_posture=not args.no_posture_evaluation,
        server_key_type=args.server_key, client_cert_days=args.cert_validity_days, address=args.address,
        max_connections=args.max_connections, read_timeout=args.read_timeout, metrics_address=args.metrics_address,
    )
    return settings, str(args.log_level)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tollgate`` script; returns the process exit status.

    ``tollgate serve ...`` runs the controller; every other verb, and ``tollgate --help``, belongs to the admin CLI
    (``controller.admin.verbs.cli``, whose help documents its exit statuses).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "serve":
        from controller.admin.verbs import cli

        try:
            cli.main(args, prog_name="tollgate")
        except SystemExit as stopped:  # click ends every run with sys.exit
            return stopped.code if isinstance(stopped.code, int) else (0 if stopped.code is None else 1)
        return 0
    settings, level = parse_settings(args)
    configure_logging(level)
    from controller.main import run
    from storage.store import StoreInUse

    try:
        run(settings)
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        logging.getLogger("tollgate").warning("interrupted")
        return 130
    except StoreInUse as exc:  # a second controller on the same data directory
        logging.getLogger("tollgate").error(str(exc))
        return 1
    return 0
