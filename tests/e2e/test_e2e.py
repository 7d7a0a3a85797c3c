"""End to end: ``serve_controller`` on a real hypercorn socket (127.0.0.1, port 0, HTTPS from the controller's own
PKI, worker threads, fsync), driven with httpx; graceful shutdown with a request in flight; restart on the same data
directory."""

from __future__ import annotations

import ipaddress
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import httpx
import trio
import trio.testing
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from controller.runtime.composition import Controller
from controller.runtime.settings import Settings
from controller.runtime.task_tree import serve_controller
from tests.support import read_http_response

ADMIN = {"username": "admin", "password": "e2e-admin-password"}
MGMT = "/edge/management/v1"


@dataclass
class Server:
    """A running controller: its objects, base URL, and how its shutdown is going."""

    controller: Controller
    url: str
    stop: trio.Event
    triggered: trio.Event
    finished: trio.Event

    def client(self, base_url: str | None = None) -> httpx.AsyncClient:
        context = ssl.create_default_context(cafile=str(self.controller.settings.data_dir / "pki" / "ca.pem"))
        return httpx.AsyncClient(base_url=(base_url or self.url) + MGMT, verify=context, timeout=30)


def _settings(data_dir: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {"data_dir": data_dir, "host": "127.0.0.1", "port": 0, "tls": True,
                            "worker_threads": True, "durable": True, "admin_username": ADMIN["username"],
                            "admin_password": ADMIN["password"]}
    return Settings(**{**base, **overrides})


@asynccontextmanager
async def running(data_dir: Path, **overrides: Any) -> AsyncIterator[Server]:
    """Serve until the block ends, then shut down gracefully and wait until the controller has stopped."""
    stop, triggered, finished, ready = trio.Event(), trio.Event(), trio.Event(), trio.Event()
    found: list[tuple[Controller, list[str]]] = []

    def on_ready(controller: Controller, urls: list[str]) -> None:
        found.append((controller, urls))
        ready.set()

    async def trigger() -> None:
        await stop.wait()
        triggered.set()

    async def serve() -> None:
        await serve_controller(_settings(data_dir, **overrides), on_ready=on_ready, shutdown_trigger=trigger)
        finished.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            await ready.wait()
            controller, urls = found[0]
            try:
                yield Server(controller, urls[0], stop, triggered, finished)
            finally:
                stop.set()


async def _login(client: httpx.AsyncClient) -> str:
    reply = await client.post("/authenticate", params={"method": "password"}, json=ADMIN)
    assert reply.status_code == 200, reply.text
    token = reply.json()["data"]["token"]
    assert reply.headers["zt-session"] == token
    return str(token)


async def test_https_login_create_list_and_restart(tmp_path: Path) -> None:
    async with running(tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1])
        assert server.url == f"https://127.0.0.1:{port}" and port > 0
        async with server.client() as client:
            token = await _login(client)
            created = await client.post("/identities", headers={"zt-session": token},
                                        json={"name": "laptop", "type": "User", "isAdmin": False})
            assert created.status_code == 201, created.text
            identity_id = created.json()["data"]["id"]
            listed = await client.get("/identities", headers={"zt-session": token},
                                      params={"filter": 'name = "laptop"'})
            assert listed.status_code == 200
            assert [i["id"] for i in listed.json()["data"]] == [identity_id]
            assert listed.headers["ziti-instance-id"] == server.controller.instance_id

    assert server.finished.is_set()
    async with running(tmp_path) as again, again.client() as client:
        # The API session survived the restart, and so did the identity.
        listed = await client.get("/identities", headers={"zt-session": token},
                                  params={"filter": 'name = "laptop"'})
        assert listed.status_code == 200, listed.text
        assert [i["id"] for i in listed.json()["data"]] == [identity_id]


async def test_the_server_certificate_is_rsa_for_localhost_and_loopback(tmp_path: Path) -> None:
    async with running(tmp_path) as server:
        port = server.url.rsplit(":", 1)[1]
        # Hostname verification on: both names the certificate claims are accepted by a strict TLS client.
        for base in (f"https://localhost:{port}", f"https://127.0.0.1:{port}"):
            async with server.client(base) as client, client.stream("GET", "/version") as reply:
                assert reply.status_code == 200
                der = reply.extensions["network_stream"].get_extra_info("ssl_object").getpeercert(True)
        certificate = x509.load_der_x509_certificate(der)
        assert isinstance(certificate.public_key(), rsa.RSAPublicKey)
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "localhost" in names.get_values_for_type(x509.DNSName)
        assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)


async def test_graceful_shutdown_finishes_the_request_in_flight(tmp_path: Path) -> None:
    first_half_sent, go_on = trio.Event(), trio.Event()
    body = b'{"name": "in-flight", "type": "Device", "isAdmin": false}'
    outcome: list[httpx.Response] = []

    async def slow_body() -> AsyncIterator[bytes]:
        yield body[:20]
        first_half_sent.set()
        await go_on.wait()
        yield body[20:]

    async with running(tmp_path) as server:
        async with server.client() as client:
            token = await _login(client)

            async def upload() -> None:
                outcome.append(await client.post("/identities", content=slow_body(),
                                                 headers={"zt-session": token, "content-type": "application/json"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(upload)
                await first_half_sent.wait()
                server.stop.set()
                # Let every task run until all wait: hypercorn has taken the trigger and is draining.
                await trio.testing.wait_all_tasks_blocked()
                assert server.triggered.is_set()
                assert not server.finished.is_set()  # held open by the upload
                go_on.set()

        assert outcome[0].status_code == 201, outcome[0].text
        identity_id = outcome[0].json()["data"]["id"]
        with trio.fail_after(30):
            await server.finished.wait()

    async with running(tmp_path) as again, again.client() as client:
        token = await _login(client)
        detail = await client.get(f"/identities/{identity_id}", headers={"zt-session": token})
        assert detail.status_code == 200
        assert detail.json()["data"]["name"] == "in-flight"


async def test_chunked_uploads_over_the_limit_are_refused_over_the_wire(tmp_path: Path) -> None:
    """A chunked upload (no Content-Length) that passes ``max_body_bytes`` gets 413 and creates nothing.

    Written with h11 on a raw TLS stream so that the whole upload is on the wire before the answer: a client that
    is still sending when the server refuses would see the connection close instead (HTTP/1.1 has no way out).
    """
    async with running(tmp_path, max_body_bytes=1024) as server:
        async with server.client() as client:
            token = await _login(client)
        host, port = server.url.removeprefix("https://").rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.pem"))
        stream = trio.SSLStream(await trio.open_tcp_stream(host, int(port)), context, server_hostname=host)
        connection = h11.Connection(h11.CLIENT)
        chunks = [b'{"name": "huge", "type": "User", "isAdmin": false, "tags": {"pad": "', b"x" * 600,
                  b"y" * 600, b'"}}']
        wire = connection.send(h11.Request(method="POST", target=MGMT + "/identities", headers=[
            ("host", host), ("zt-session", token), ("content-type", "application/json"),
            ("transfer-encoding", "chunked")]))
        for chunk in chunks:
            wire += connection.send(h11.Data(data=chunk))
        wire += connection.send(h11.EndOfMessage())
        await stream.send_all(wire)
        status, body = await read_http_response(stream, connection)
        await stream.aclose()
        assert status == 413
        assert json.loads(body)["error"]["code"] == "REQUEST_TOO_LARGE"
        async with server.client() as client:
            listed = await client.get("/identities", headers={"zt-session": token})
            assert listed.json()["meta"]["pagination"]["totalCount"] == 1  # only the default admin
