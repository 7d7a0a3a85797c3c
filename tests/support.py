"""Test support: settings for a controller on a temporary directory and an in-process client for both APIs."""

from __future__ import annotations

import base64
import math
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h11
import msgspec
import pyotp
import trio
from trio.testing import MockClock

from controller.certificates import ensure_pki
from controller.clock import Clock
from controller.runtime.composition import Controller
from controller.runtime.settings import Settings
from controller.runtime.task_tree import serve_controller, start_services

__all__ = ["ADMIN_PASSWORD", "ADMIN_USERNAME", "CLIENT", "MGMT", "TOTP_STEP_SECONDS", "Api", "Reply", "make_settings",
           "make_user", "next_totp", "read_http_response", "running", "seed_pki", "serving", "start_controller", "totp",
           "virtual_time_stands_still"]

ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = "admin-password"
MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"
TOTP_STEP_SECONDS = 30


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {"data_dir": data_dir, "tls": False, "worker_threads": False, "durable": False,
                            "admin_username": ADMIN_USERNAME, "admin_password": ADMIN_PASSWORD}
    base.update(overrides)
    return Settings(**base)


@dataclass
class Reply:
    """A response: status, headers and the decoded JSON body (None when the body is empty or not JSON)."""

    status: int
    headers: Any
    body: Any
    raw: bytes = b""

    @property
    def data(self) -> Any:
        return self.body["data"]

    @property
    def error(self) -> Any:
        return self.body["error"]


@dataclass
class Api:
    """An in-process client; ``token`` is sent as ``zt-session`` when set."""

    app: Any
    base: str = MGMT
    token: str | None = None
    controller: Controller | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)

    async def request(self, method: str, path: str, json: Any = None, *, raw: bytes | None = None,
                      headers: dict[str, str] | None = None, query: dict[str, Any] | None = None,
                      base: str | None = None, certificate: str | None = None) -> Reply:
        """One request; ``certificate`` (PEM) is presented as the TLS client certificate of the connection, as
        web/server.py records it for real connections."""
        client = self.app.test_client()
        all_headers = dict(self.extra_headers)
        if self.token:
            all_headers["zt-session"] = self.token
        if headers:
            all_headers.update(headers)
        data = raw
        if json is not None:
            data = msgspec.json.encode(json)
            all_headers.setdefault("Content-Type", "application/json")
        scope = {"extensions": {"tls": {"client_cert_chain": [certificate]}}} if certificate else None
        response = await client.open((base if base is not None else self.base) + path, method=method, data=data,
                                     headers=all_headers, query_string=query, scope_base=scope)
        body_bytes = await response.get_data()
        try:
            body = msgspec.json.decode(body_bytes) if body_bytes else None
        except msgspec.DecodeError:
            body = None
        return Reply(response.status_code, response.headers, body, body_bytes)

    async def get(self, path: str, **kw: Any) -> Reply:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, json: Any = None, **kw: Any) -> Reply:
        return await self.request("POST", path, json, **kw)

    async def put(self, path: str, json: Any = None, **kw: Any) -> Reply:
        return await self.request("PUT", path, json, **kw)

    async def patch(self, path: str, json: Any = None, **kw: Any) -> Reply:
        return await self.request("PATCH", path, json, **kw)

    async def delete(self, path: str, **kw: Any) -> Reply:
        return await self.request("DELETE", path, **kw)

    def as_client(self) -> Api:
        return Api(self.app, CLIENT, self.token, self.controller)

    def with_token(self, token: str | None) -> Api:
        return Api(self.app, self.base, token, self.controller)

    async def login(self, username: str, password: str) -> Api:
        """A new client logged in as ``username``; fails the test if the login fails."""
        reply = await self.with_token(None).post("/authenticate", {"username": username, "password": password},
                                                 query={"method": "password"})
        assert reply.status == 200, reply.body
        return self.with_token(reply.data["token"])

    async def create(self, path: str, body: dict[str, Any]) -> str:
        """POST a resource and return its id; fails the test unless 201."""
        reply = await self.post(path, body)
        assert reply.status == 201, reply.body
        return str(reply.data["id"])


_TEMPLATE_PKI: list[Path] = []


def seed_pki(data_dir: Path) -> None:
    """Copy one PKI made for the whole test run into a new data directory: generating RSA keys for each of the
    hundreds of controllers the suite opens would cost tens of seconds, and ``ensure_pki`` accepts what it finds."""
    target = data_dir / "pki"
    if target.exists():
        return
    if not _TEMPLATE_PKI:
        template = Path(tempfile.mkdtemp(prefix="tollgate-pki-")) / "pki"
        ensure_pki(template)
        _TEMPLATE_PKI.append(template)
    shutil.copytree(_TEMPLATE_PKI[0], target)


async def start_controller(settings: Settings, nursery: trio.Nursery, clock: Clock | None = None) -> Controller:
    """Open a controller and start its services in ``nursery`` (cancel the nursery to stop it)."""
    seed_pki(settings.data_dir)
    controller = Controller.open(settings, clock)
    await start_services(controller, nursery)
    return controller


async def make_user(admin: Api, name: str, password: str = "user-password", **fields: Any) -> tuple[str, Api]:
    """Create a non-admin identity with a password and return (identity id, logged-in client)."""
    identity_id = await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False, **fields})
    await admin.create("/authenticators", {"identityId": identity_id, "method": "updb", "username": name,
                                           "password": password})
    return identity_id, await admin.login(name, password)


def totp(controller: Controller, secret: str, steps: int = 0) -> str:
    """The TOTP code of the step ``steps`` 30-second steps from the current one at the controller's clock.

    Args:
        controller: the controller whose clock says what "now" is (Trio's clock, virtual under ``autojump_clock``).
        secret: the base32 secret of the enrolment.
        steps: steps from the current one (negative: earlier).

    Returns:
        The six-digit code.
    """
    return pyotp.TOTP(secret).at(int(controller.clock.now()), counter_offset=steps)


async def next_totp(controller: Controller, secret: str) -> str:
    """Move to the next 30-second step and return its code, for a test that needs another good code.

    The controller accepts each TOTP step once per identity (a code of a step at or before the last one accepted is
    refused), so a second good code must come from a later step. The test must take the ``autojump_clock`` fixture:
    the sleep then passes instantly on Trio's virtual clock, which the controller's clock follows.

    Returns:
        The code of the current step after the sleep.
    """
    await trio.sleep(TOTP_STEP_SECONDS)
    return totp(controller, secret)


@asynccontextmanager
async def running(data_dir: Path, clock: Clock | None = None, **overrides: Any) -> AsyncIterator[Controller]:
    """A controller on ``data_dir`` for the duration of the block, then stopped as ``main`` stops it (flush,
    cancel, close); the next block on the same directory is a restart. ``overrides`` change the settings."""
    async with trio.open_nursery() as nursery:
        controller = await start_controller(make_settings(data_dir, **overrides), nursery, clock)
        try:
            yield controller
            await controller.sessions.flush()
        finally:
            nursery.cancel_scope.cancel()
    controller.close()


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[Controller, list[str]]]:
    """Run ``serve_controller`` with ``settings`` (as ``tollgate serve`` does: sockets, TLS, every service) until the
    block ends, then shut it down as on SIGTERM; yields the controller and its bound base URLs."""
    stop, ready = trio.Event(), trio.Event()
    found: list[tuple[Controller, list[str]]] = []

    def on_ready(controller: Controller, urls: list[str]) -> None:
        found.append((controller, urls))
        ready.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_controller(settings, on_ready=on_ready, shutdown_trigger=stop.wait))
        await ready.wait()
        try:
            yield found[0]
        finally:
            stop.set()


@contextmanager
def virtual_time_stands_still(clock: MockClock) -> Iterator[None]:
    """No autojump while real sockets talk: a server timeout must not fire in a jump while bytes are in flight."""
    clock.autojump_threshold = math.inf
    try:
        yield
    finally:
        clock.autojump_threshold = 0


async def read_http_response(stream: trio.abc.ReceiveStream, connection: h11.Connection) -> tuple[int, bytes]:
    """Read one whole HTTP/1.1 response from ``stream`` through the client side ``connection``: its status and
    body."""
    status, body = 0, b""
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some())
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return status, body


def websocket_upgrade() -> dict[str, str]:
    """The headers of a WebSocket opening request (a fresh key each time), for an HTTP client to send."""
    return {"connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
            "sec-websocket-key": base64.b64encode(os.urandom(16)).decode()}
