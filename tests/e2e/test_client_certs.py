"""Client certificates over a real TLS socket: ``web.server.serve`` with a small app that answers what
``client_certificate(request.scope)`` gives it, driven by httpx presenting (or not) certificates made here."""

from __future__ import annotations

import datetime as dt
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from hypercorn.config import Config
from quart import request
from quart_trio import QuartTrio

from controller.certificates import Pki, ensure_pki
from controller.certificates.tls_contexts import TlsContexts
from tests.support import seed_pki
from web.client_certs import PEER_CONNECTIONS, TlsExtension, client_certificate
from web.server import serve

NOW = dt.datetime.now(dt.UTC)


@dataclass
class Issued:
    """A certificate and its key, also written to files for an ``ssl`` client context."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_path: Path
    key_path: Path

    @property
    def sha1(self) -> str:
        return self.cert.fingerprint(hashes.SHA1()).hex()  # the fingerprint OpenZiti matches

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()


def issue(directory: Path, name: str, issuer: x509.Certificate | None, issuer_key: CertificateIssuerPrivateKeyTypes
          | None, *, ca: bool = False, not_after: dt.datetime | None = None) -> Issued:
    """A certificate for ``name`` signed by ``issuer`` (self-signed when ``None``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, name)])
    not_after = not_after or NOW + dt.timedelta(days=1)
    cert = (x509.CertificateBuilder().subject_name(subject)
            .issuer_name(issuer.subject if issuer is not None else subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_after - dt.timedelta(days=30)).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(issuer_key if issuer_key is not None else key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Issued(cert, key, cert_path, key_path)


@dataclass
class Running:
    url: str
    pki: Pki
    trust: TlsContexts
    calls: list[str]  # the path of every request the app received
    both_arrived: trio.Event

    def issue(self, directory: Path, name: str, **kw: Any) -> Issued:
        return issue(directory, name, self.pki.ca_cert, self.pki.load_ca_key(), **kw)

    def client(self, certificate: Issued | None = None, *,
               tls: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED) -> httpx.AsyncClient:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert_path))
        context.maximum_version = tls
        if certificate is not None:
            context.load_cert_chain(certificate.cert_path, certificate.key_path)
        return httpx.AsyncClient(base_url=self.url, verify=context, timeout=10)


def _app(calls: list[str], both_arrived: trio.Event) -> QuartTrio:
    app = QuartTrio("client-certs")
    app.asgi_app = TlsExtension(app.asgi_app)  # type: ignore[method-assign]
    waiting: list[None] = []

    @app.get("/peer")
    async def peer() -> dict[str, Any]:
        calls.append(request.path)
        cert = client_certificate(request.scope)
        tls = request.scope["extensions"].get("tls")
        return {"sha1": cert.fingerprint(hashes.SHA1()).hex() if cert else None,
                "client": list(request.scope["client"] or ()), "tls": tls}

    @app.get("/together")
    async def together() -> dict[str, Any]:
        # Answers only once two requests are in here at the same time.
        waiting.append(None)
        if len(waiting) == 2:
            both_arrived.set()
        await both_arrived.wait()
        return await peer()

    return app


@asynccontextmanager
async def running(data_dir: Path, *, tls: bool = True) -> AsyncIterator[Running]:
    seed_pki(data_dir)
    pki = ensure_pki(data_dir / "pki")
    trust = TlsContexts(pki.ca_pem.decode())
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    if tls:
        config.certfile, config.keyfile = str(pki.server_cert_path), str(pki.server_key_path)
    calls: list[str] = []
    stop, both_arrived = trio.Event(), trio.Event()
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(lambda task_status: serve(_app(calls, both_arrived), config, trust=trust,
                                                                 shutdown_trigger=stop.wait, task_status=task_status))
            try:
                yield Running(urls[0], pki, trust, calls, both_arrived)
            finally:
                stop.set()


async def _no_connection_left() -> None:
    """The server forgets a connection when it sees it close: wait until it has seen every close.

    The close travels through the kernel to the server's read, which signals nothing the test could wait on.
    """
    with trio.fail_after(5):
        while len(PEER_CONNECTIONS):  # noqa: ASYNC110
            await trio.sleep(0.01)


async def test_without_a_client_certificate_the_app_sees_none(tmp_path: Path) -> None:
    async with running(tmp_path) as server, server.client() as client:
        reply = (await client.get("/peer")).json()
        assert reply["sha1"] is None
        tls = reply["tls"]
        assert tls["client_cert_chain"] == [] and tls["client_cert_name"] is None
        assert tls["server_cert"] == server.pki.server_cert_pem.decode()
        assert tls["tls_version"] == 0x0304 and tls["cipher_suite"] in (0x1301, 0x1302, 0x1303)
        assert tls["client_cert_error"] is None
    await _no_connection_left()


@pytest.mark.parametrize(("tls", "number"), [(ssl.TLSVersion.TLSv1_2, 0x0303), (ssl.TLSVersion.TLSv1_3, 0x0304)])
async def test_a_certificate_from_the_controllers_ca_is_seen_exactly(tmp_path: Path, tls: ssl.TLSVersion,
                                                                     number: int) -> None:
    async with running(tmp_path) as server:
        laptop = server.issue(tmp_path, "laptop")
        async with server.client(laptop, tls=tls) as client:
            reply = (await client.get("/peer")).json()
            assert reply["sha1"] == laptop.sha1
            assert reply["tls"]["client_cert_chain"] == [laptop.pem]
            assert reply["tls"]["client_cert_name"] == "CN=laptop"
            assert reply["tls"]["tls_version"] == number
            assert len(PEER_CONNECTIONS) == 1
    await _no_connection_left()


async def test_an_expired_certificate_passes_tls_for_the_app_to_judge(tmp_path: Path) -> None:
    async with running(tmp_path) as server:
        expired = server.issue(tmp_path, "expired", not_after=NOW - dt.timedelta(days=2))
        async with server.client(expired) as client:
            assert (await client.get("/peer")).json()["sha1"] == expired.sha1


async def test_a_ca_added_at_run_time_is_trusted_from_the_next_handshake(tmp_path: Path) -> None:
    async with running(tmp_path) as server:
        # The new CA is an intermediate whose root is never trusted: trusting it alone is enough.
        root = issue(tmp_path, "third-party-root", None, None, ca=True)
        intermediate = issue(tmp_path, "third-party-ca", root.cert, root.key, ca=True)
        device = issue(tmp_path, "device", intermediate.cert, intermediate.key)
        async with server.client(device) as client:
            with pytest.raises(httpx.TransportError):
                await client.get("/peer")
        assert server.calls == []

        server.trust.add_ca(intermediate.pem)
        server.trust.add_ca(intermediate.pem)  # twice is once
        assert server.trust.certificates == (server.pki.ca_pem.decode(), intermediate.pem)
        async with server.client(device) as client:
            assert (await client.get("/peer")).json()["sha1"] == device.sha1
    await _no_connection_left()


async def test_concurrent_connections_each_see_their_own_certificate(tmp_path: Path) -> None:
    async with running(tmp_path) as server:
        alice, bob = server.issue(tmp_path, "alice"), server.issue(tmp_path, "bob")
        replies: dict[str, dict[str, Any]] = {}
        async with server.client(alice) as alice_client, server.client(bob) as bob_client:

            async def ask(name: str, client: httpx.AsyncClient) -> None:
                replies[name] = (await client.get("/together")).json()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, "alice", alice_client)
                nursery.start_soon(ask, "bob", bob_client)
            assert server.both_arrived.is_set()
            assert {name: reply["sha1"] for name, reply in replies.items()} == {"alice": alice.sha1,
                                                                                 "bob": bob.sha1}
            assert replies["alice"]["client"] != replies["bob"]["client"]
            assert len(PEER_CONNECTIONS) == 2  # both kept alive; nothing else recorded
        await _no_connection_left()


async def test_plain_http_has_no_tls_extension(tmp_path: Path) -> None:
    async with running(tmp_path, tls=False) as server, httpx.AsyncClient(base_url=server.url) as client:
        assert server.url.startswith("http://")
        reply = (await client.get("/peer")).json()
        assert (reply["sha1"], reply["tls"], reply["client"][0]) == (None, None, "127.0.0.1")
        assert len(PEER_CONNECTIONS) == 0


def test_client_certificate_reads_a_test_clients_extension(tmp_path: Path) -> None:
    own = issue(tmp_path, "self", None, None)
    assert client_certificate({"extensions": {"tls": {"client_cert_chain": [own.pem]}}}) == own.cert
    assert client_certificate({"extensions": {"tls": {"client_cert_chain": []}}}) is None
    assert client_certificate({"extensions": {}}) is None
    assert client_certificate({}) is None
