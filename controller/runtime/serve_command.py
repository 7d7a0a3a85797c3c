"""``tollgate serve [--data-dir DIR] [--host H] [--port P] [--no-tls] ...``: the command that runs the controller, and
the settings its options and environment make (``controller/cli.py`` puts it in one group with the admin verbs)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from controller.runtime.logs import configure_logging
from controller.runtime.settings import Settings

__all__ = ["parse_settings", "serve"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The reference controller's limits for the default admin's credentials (``ziti controller edge init``).
_USERNAME_LENGTH = (4, 100)
_PASSWORD_LENGTH = (5, 100)
# The server key types ensure_pki accepts (controller.certificates.pki.SERVER_KEY_TYPES), spelled out here so that
# parsing the command line does not import the controller.
_SERVER_KEY_TYPES = ("rsa", "ec")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise click.BadParameter("must be a whole number between 0 and 65535") from None
    if not 0 <= value <= 65535:
        raise click.BadParameter("must be between 0 and 65535 (0 picks a free port)")
    return value


def _host_port(text: str) -> str:
    """A listen address ``HOST:PORT`` (``[IPv6]:PORT``), as hypercorn binds it; returned unchanged."""
    host, _, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    name = host[1:-1] if bracketed else host
    if (not name or any(c in name for c in "[]") or (":" in name and not bracketed)
            or not (port.isascii() and port.isdigit()) or int(port) > 65535):
        raise click.BadParameter("must be HOST:PORT ([ADDRESS]:PORT for IPv6), the port between 0 and 65535")
    return text


class _Positive(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click releases
    """A positive whole number of ``unit``."""

    name = "N"

    def __init__(self, unit: str) -> None:
        self.unit = unit

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"must be a positive number of {self.unit}", param, ctx)
        if number <= 0:
            self.fail(f"must be a positive number of {self.unit}", param, ctx)
        return number


def _etcd_urls(text: str) -> tuple[str, ...]:
    """``URL[,URL...]``: etcd's client URLs, each ``http://`` or ``https://`` with a host."""
    urls = tuple(url.strip() for url in text.split(",") if url.strip())
    if not urls or not all(url.startswith(("http://", "https://")) and len(url.split("://", 1)[1]) > 0
                           for url in urls):
        raise click.BadParameter("must be etcd client URLs (http://HOST:PORT or https://HOST:PORT), comma-separated")
    return urls


def _prefix(text: str) -> str:
    if not text.startswith("/") or not text.endswith("/") or "//" in text:
        raise click.BadParameter("must start and end with '/' and have no empty part, such as /tollgate/")
    return text


def _backups(value: int) -> int:
    if value < 0:
        raise click.BadParameter("must be 0 or more")
    return value


def _heartbeat(value: float) -> float:
    if not value > 0:
        raise click.BadParameter("must be a positive number of seconds")
    return value


def _checked(convert: Any) -> Any:
    """A click callback running ``convert`` on a given value (None stays None)."""
    return lambda ctx, param, value: None if value is None else convert(value)


@click.command("serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("data"),
              help="LMDB, PKI and credentials (./data)")
@click.option("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
@click.option("--port", metavar="PORT", default="1280", callback=_checked(_port),
              help="listen port; 0 picks a free one (1280)")
@click.option("--no-tls", is_flag=True, help="serve plain HTTP instead of HTTPS")
@click.option("--san", multiple=True, help="extra server certificate name (repeatable)")
@click.option("--session-timeout", type=float, default=1800.0,
              help="idle seconds before an API session ends (1800; under 60 means 1800)")
@click.option("--max-body-bytes", type=_Positive("bytes"), default=1 << 20, help="request body size cap (1 MiB)")
@click.option("--no-posture-evaluation", is_flag=True,
              help="grant sessions on service policies alone; posture checks never refuse or revoke")
@click.option("--server-key", type=click.Choice(_SERVER_KEY_TYPES), default="rsa",
              help="server key type: rsa (RS256 JWTs, needed by libziti 0.29 SDKs) or ec (P-256, ES256) (rsa); a "
                   "change replaces the server certificate, never the CA")
@click.option("--cert-validity-days", type=_Positive("days"), default=365,
              help="lifetime of issued identity and router certificates, in days (365)")
@click.option("--max-connections", type=_Positive("connections"), default=1000,
              help="connections served at once; more are closed at once (1000)")
@click.option("--read-timeout", type=_Positive("seconds"), default=30,
              help="seconds to wait for a request head, between requests, and for a body (30)")
@click.option("--address", default=None,
              help="the URL endpoints reach the controller at, written into enrolment JWTs (https://HOST:PORT from "
                   "--host and --port)")
@click.option("--metrics-address", metavar="HOST:PORT", default=None, callback=_checked(_host_port),
              help="serve GET /metrics (Prometheus text format, plain HTTP, no session needed) on this separate "
                   "listener; port 0 picks a free one (off: no metrics listener)")
@click.option("--events-file", type=click.Path(path_type=Path), default=None,
              help="write every event as a JSON line to this file, behind the engine (off: no file)")
@click.option("--events-file-max-bytes", type=_Positive("bytes"), default=64 << 20,
              help="rotate the event file at this size (64 MiB)")
@click.option("--events-file-backups", type=int, default=5, callback=_checked(_backups),
              help="rotated event files kept, FILE.1 the newest (5)")
@click.option("--events-keep", type=_Positive("events"), default=10_000,
              help="latest events the store keeps for GET /events, stream resumes and the file's catch-up (10000)")
@click.option("--events-heartbeat", type=float, default=15.0, callback=_checked(_heartbeat),
              help="seconds after which a quiet event stream sends a heartbeat comment (15)")
@click.option("--no-events", is_flag=True, help="record no events (what benchmarks compare against)")
@click.option("--log-level", type=click.Choice(_LEVELS, case_sensitive=False), default="INFO",
              help="log level (INFO)")
@click.option("--etcd", metavar="URL[,URL...]", default=None, callback=_checked(_etcd_urls),
              help="cluster mode: the client URLs of the etcd cluster the controllers of this network share (off: "
                   "a single controller on its own store)")
@click.option("--etcd-ca", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="CA certificate (PEM) of the etcd members' TLS certificates")
@click.option("--etcd-cert", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="this controller's client certificate for etcd (PEM)")
@click.option("--etcd-key", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="the key of --etcd-cert (PEM)")
@click.option("--etcd-prefix", default="/tollgate/", callback=_checked(_prefix),
              help="the network's key prefix in etcd (/tollgate/)")
@click.option("--node-name", default=None, help="this controller's name in the cluster (HOST:PORT)")
@click.option("--lease-ttl", type=_Positive("seconds"), default=3,
              help="seconds this controller's etcd lease lives without a keepalive; at least 2 (3)")
@click.option("--etcd-max-txn-ops", type=_Positive("operations"), default=128,
              help="etcd's --max-txn-ops, as its members are configured (128)")
@click.option("--etcd-max-request-bytes", type=_Positive("bytes"), default=1536 * 1024,
              help="etcd's --max-request-bytes, as its members are configured (1572864)")
@click.pass_context
def serve(ctx: click.Context, /, **options: Any) -> None:
    """Serve the management and client APIs. The default admin's credentials on first start come from
    TOLLGATE_ADMIN_USERNAME (admin) and TOLLGATE_ADMIN_PASSWORD (random when unset, printed once and written to
    DATA_DIR/admin-credentials)."""
    settings = _settings(options, os.environ)
    configure_logging(str(options["log_level"]).upper())
    # Imported here, not at the top: every admin verb parses its command line through this module's group, and
    # none of them should pay for importing the server (Trio, hypercorn, Quart, the whole controller).
    from controller.cluster import ClusterUnreachable
    from controller.runtime.task_tree import run
    from storage.store import StoreInUse

    try:
        run(settings)
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        logging.getLogger("tollgate").warning("interrupted")
        ctx.exit(130)
    except (StoreInUse, ClusterUnreachable) as exc:  # a second controller on the directory; etcd unreachable
        logging.getLogger("tollgate").error(str(exc))
        ctx.exit(1)
    except BaseExceptionGroup as group:  # the same, raised under a cluster node's own tasks
        refused, rest = group.split((StoreInUse, ClusterUnreachable))
        if refused is None or rest is not None:
            raise
        for error in _leaves(refused):
            logging.getLogger("tollgate").error(str(error))
        ctx.exit(1)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    return [leaf for error in group.exceptions
            for leaf in (_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])]


def _settings(options: Mapping[str, Any], environ: Mapping[str, str]) -> Settings:
    """Settings from ``serve``'s options and the ``TOLLGATE_ADMIN_*`` environment variables.

    Raises:
        click.UsageError: admin credentials outside the login limits (they could never log in).
    """
    if options["lease_ttl"] < 2:
        raise click.UsageError("--lease-ttl must be at least 2 seconds (etcd's minimum)")
    if (options["etcd_cert"] is None) != (options["etcd_key"] is None):
        raise click.UsageError("--etcd-cert and --etcd-key go together")
    if not options["etcd"] and any(options[name] for name in ("etcd_ca", "etcd_cert", "etcd_key", "node_name")):
        raise click.UsageError("--etcd-ca, --etcd-cert, --etcd-key and --node-name need --etcd")
    username = environ.get("TOLLGATE_ADMIN_USERNAME") or "admin"
    password = environ.get("TOLLGATE_ADMIN_PASSWORD") or None
    for name, value, (low, high) in (("TOLLGATE_ADMIN_USERNAME", username, _USERNAME_LENGTH),
                                     ("TOLLGATE_ADMIN_PASSWORD", password, _PASSWORD_LENGTH)):
        if value is not None and not low <= len(value) <= high:
            raise click.UsageError(f"{name} must be {low} to {high} characters long")
    return Settings(
        data_dir=options["data_dir"], host=options["host"], port=options["port"], tls=not options["no_tls"],
        sans=tuple(options["san"]), session_timeout=options["session_timeout"],
        max_body_bytes=options["max_body_bytes"], admin_username=username, admin_password=password,
        evaluate_posture=not options["no_posture_evaluation"], server_key_type=options["server_key"],
        client_cert_days=options["cert_validity_days"], address=options["address"],
        max_connections=options["max_connections"], read_timeout=options["read_timeout"],
        metrics_address=options["metrics_address"], events=not options["no_events"],
        events_keep=options["events_keep"], events_file=options["events_file"],
        events_file_max_bytes=options["events_file_max_bytes"], events_file_backups=options["events_file_backups"],
        events_heartbeat=options["events_heartbeat"], etcd=options["etcd"] or (), etcd_ca=options["etcd_ca"],
        etcd_cert=options["etcd_cert"], etcd_key=options["etcd_key"], etcd_prefix=options["etcd_prefix"],
        node_name=options["node_name"], lease_ttl=options["lease_ttl"],
        etcd_max_txn_ops=options["etcd_max_txn_ops"], etcd_max_request_bytes=options["etcd_max_request_bytes"],
    )


def parse_settings(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[Settings, str]:
    """The settings and log level ``tollgate serve ...`` (``argv`` without the program name) would run with.

    Bad arguments print a usage error and exit with status 2 (SystemExit), as the command itself does; ``--help``
    prints the help and exits with 0.
    """
    args = list(argv)
    try:
        if not args or args[0] != "serve":
            raise click.UsageError("Missing command: tollgate serve [OPTIONS]")
        with serve.make_context("tollgate serve", args[1:]) as ctx:
            settings = _settings(ctx.params, os.environ if environ is None else environ)
            return settings, str(ctx.params["log_level"]).upper()
    except click.exceptions.Exit as done:  # --help
        raise SystemExit(done.exit_code) from None
    except click.ClickException as error:
        error.show()
        raise SystemExit(error.exit_code) from None
