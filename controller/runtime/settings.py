"""Controller settings: one frozen value built by the CLI (or a test) and handed to the composition root."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the controller can be told at start.

    Attributes:
        data_dir: LMDB environment, PKI and admin credentials live here.
        host, port: where HTTPS (or HTTP with ``tls=False``) listens.
        tls: serve HTTPS with the controller's own PKI.
        sans: extra subject alternative names for the server certificate.
        session_timeout: idle seconds before an API session ends (values under a minute fall back to 30 minutes).
        max_body_bytes: request bodies above this are refused before any other work.
        worker_threads: commit on the writer's pinned thread and hash in worker threads. Tests on a virtual clock
            turn it off so that virtual time cannot jump while a thread runs.
        durable: fsync every commit (only tests and benchmark baselines turn it off).
        admin_username, admin_password: the default admin's credentials on first start (random password if None).
        max_concurrent_hashes: password verifications allowed at once (each scrypt holds 16 MiB and a core).
        evaluate_posture: the global posture switch. Off, sessions are granted on service policies alone and no
            posture check (MFA timeouts included) ever refuses or revokes one; the checks are still stored and
            listed.
        server_key_type: ``"rsa"`` (RSA 2048, RS256 JWTs: what libziti 0.29 SDKs require) or ``"ec"`` (EC P-256,
            ES256 JWTs) for the server key, which serves TLS and signs the controller's JWTs. Changing it on an
            existing data directory replaces the server key and certificate at the next start; the CA stays.
        client_cert_days: lifetime in days of the client certificates the CA issues to identities and routers
            (never beyond the CA's own expiry).
        read_timeout: seconds the server waits for a request's head, between requests, and for a request's body.
        max_connections: connections served at once; more are closed as soon as they are accepted.
        address: the URL endpoints reach the controller at (``https://host:port``), the issuer of enrolment JWTs,
            which OpenZiti SDKs connect to; None derives it from ``host`` and the bound port (:meth:`address_for`).
        metrics_address: ``host:port`` (``[v6-address]:port`` for IPv6; port 0 picks a free one) of a separate plain
            HTTP listener serving ``GET /metrics`` in the Prometheus text format to anyone who reaches it, with no
            session: bind it where only the monitoring system can. None (the default) opens no such listener.
        etcd: the client URLs of the etcd cluster this node shares the network through (cluster mode); empty (the
            default): a single node on its own LMDB store.
        etcd_ca, etcd_cert, etcd_key: PEM files for TLS to etcd: the CA of its members' certificates, and this
            node's client certificate and key.
        etcd_prefix: the key prefix of the network in etcd (several networks may share one etcd).
        node_name: this node's name in the cluster (None: ``HOST:PORT`` once it listens).
        lease_ttl: seconds this node's lease lives without a keepalive (etcd's minimum is 2).
        etcd_max_txn_ops, etcd_max_request_bytes: etcd's ``--max-txn-ops`` and ``--max-request-bytes``, as its
            members are configured.
        events: record events (``controller.insight``). Off, no write stores one and the event views are empty:
            the switch benchmarks compare against.
        events_keep: how many of the latest events the store keeps (``GET /events``, stream resumes, the event
            file's catch-up after a restart).
        events_file: where to write every event as a JSON line, behind the engine (None: no file).
        events_file_max_bytes: size at which the event file is rotated.
        events_file_backups: rotated event files kept (``PATH.1`` newest).
        events_heartbeat: seconds of silence after which an event stream sends a heartbeat comment.
    """

    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = 1280
    tls: bool = True
    sans: tuple[str, ...] = ()
    session_timeout: float = 1800.0
    max_body_bytes: int = 1 << 20
    worker_threads: bool = True
    durable: bool = True
    admin_username: str = "admin"
    admin_password: str | None = None
    max_concurrent_hashes: int = 2
    evaluate_posture: bool = True
    server_key_type: str = "rsa"
    client_cert_days: int = 365
    address: str | None = None
    read_timeout: int = 30
    max_connections: int = 1000
    metrics_address: str | None = None
    etcd: tuple[str, ...] = ()
    etcd_ca: Path | None = None
    etcd_cert: Path | None = None
    etcd_key: Path | None = None
    etcd_prefix: str = "/tollgate/"
    node_name: str | None = None
    lease_ttl: int = 3
    etcd_max_txn_ops: int = 128
    etcd_max_request_bytes: int = 1536 * 1024
    events: bool = True
    events_keep: int = 10_000
    events_file: Path | None = None
    events_file_max_bytes: int = 64 << 20
    events_file_backups: int = 5
    events_heartbeat: float = 15.0

    def address_for(self, port: int) -> str:
        """The controller's URL as endpoints reach it, once it listens on ``port``: ``address`` when given, else
        ``https://host:port`` (``http`` without TLS; ``localhost`` for a wildcard host, which no client can dial;
        brackets around an IPv6 host)."""
        if self.address:
            return self.address.rstrip("/")
        host = "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    @property
    def effective_session_timeout(self) -> float:
        """The idle timeout in force: values under a minute fall back to 30 minutes, as in the reference."""
        return self.session_timeout if self.session_timeout >= 60 else 1800.0
