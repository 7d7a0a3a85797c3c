"""The crash scenario's model and load: 32 concurrent HTTPS clients, and a ledger of every write acknowledged to them.

:func:`create_model` builds the model through the management API: an edge router and its policies (sessions need
one), four Dial services (``open`` with no posture check, ``mac`` behind a MAC check, ``mfa-long`` behind an MFA
check with a one-hour timeout, ``mfa-short`` behind an MFA check timing out after a few seconds), their service
policies, and one user with a password per client. A user is in the ``long`` or the ``short`` group: a ``long`` user
may dial ``open``, ``mac`` and ``mfa-long``, a ``short`` user ``open``, ``mac`` and ``mfa-short``, so that the
sticky MFA time-out of a short user's API session (``controller/posture/rules.py``) never touches a session that
must outlive the crash.

:class:`Load` runs the clients. Each works through users of its own, one after another: log in (reporting the SDK
info of a C SDK), report posture in bulk (the good MAC and a PROCESS response under a report id of its own), dial
``open`` and ``mac``, enrol and verify MFA with a TOTP computed at the wall clock (the controller's clock is the same
wall clock), dial its group's MFA service, report posture once more; then the admin creates its next user (identity,
then password authenticator). Between two steps a client may have the admin create a plain identity. Every answer
in 2xx is recorded in the :class:`Ledger` with what must be there afterwards; a refusal is counted by status and
error code. Which client does what, and in what order, follows from the seed; only the timing is the machine's.
"""

from __future__ import annotations

import json
import random
import ssl
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pyotp
import trio

__all__ = ["CLIENT", "GOOD_MAC", "MGMT", "SDK_INFO", "Endpoint", "Ledger", "Load", "Model", "SessionAck", "User",
           "UserAck", "admin_login", "create_model"]

MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"
GOOD_MAC = "aa:bb:cc:dd:ee:ff"
SDK_INFO = {"type": "ziti-sdk-c", "version": "0.29.3", "appId": "crash-bench"}  # what every login reports
USER_PASSWORD = "crash-user-password"
EXTRA_IDENTITY_SHARE = 0.35  # the chance that a client has the admin create a plain identity between two steps
_TIMEOUT = httpx.Timeout(120.0)  # generous: a loaded two-core machine serves 32 clients and hashes passwords


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A running controller as its clients reach it: the base URL and the CA bundle its certificate chains to."""

    url: str
    ca: Path

    def client(self) -> httpx.AsyncClient:
        """A new HTTPS client of this controller (close it after use)."""
        context = ssl.create_default_context(cafile=str(self.ca))
        return httpx.AsyncClient(base_url=self.url, verify=context, timeout=_TIMEOUT)


@dataclass(frozen=True, slots=True)
class User:
    """A user with a password, in the ``long`` or ``short`` MFA group."""

    identity_id: str
    name: str
    group: str


@dataclass(frozen=True, slots=True)
class Model:
    """What :func:`create_model` made: the admin's token, the services by role (``open``, ``mac``, ``mfa-long``,
    ``mfa-short``), one user per client and their password authenticators, and the short MFA check's timeout
    (seconds)."""

    admin_token: str
    services: dict[str, str]
    users: list[User]
    authenticators: list[str]
    short_timeout: int


@dataclass(frozen=True, slots=True)
class SessionAck:
    """An acknowledged Dial session: whose, on which API session, and the role of its service."""

    identity_id: str
    api_session_id: str
    service: str


@dataclass(slots=True)
class UserAck:
    """An acknowledged login and what the user's API session had acknowledged since."""

    identity_id: str
    group: str
    token: str
    reports: list[str] = field(default_factory=list)  # PROCESS report ids
    mfa_started: bool = False
    mfa_verified: bool = False


@dataclass(slots=True)
class Ledger:
    """Every write a client saw acknowledged (a 2xx answer), and how the other requests ended.

    ``logins`` is keyed by API session id. ``unanswered`` counts requests sent that never got an answer because the
    controller was killed (in flight at the kill: their writes may or may not be there); ``failed_before_kill`` those
    whose connection failed before the kill (a finding).
    """

    identities: set[str] = field(default_factory=set)
    authenticators: set[str] = field(default_factory=set)
    logins: dict[str, UserAck] = field(default_factory=dict)
    sessions: dict[str, SessionAck] = field(default_factory=dict)
    requests: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    unanswered: int = 0
    failed_before_kill: int = 0
    # Set when the first session behind the short MFA check is acknowledged: its deadline is then a moment away.
    short_mfa_dialled: trio.Event = field(default_factory=trio.Event)

    def acknowledged(self) -> dict[str, int]:
        """Acknowledged writes by kind (the kinds the check after the restart verifies)."""
        users = list(self.logins.values())
        return {"identity": len(self.identities), "authenticator": len(self.authenticators),
                "api-session": len(self.logins), "login-sdk-info": len(self.logins), "session": len(self.sessions),
                "posture-report": sum(len(u.reports) for u in users),
                "mfa-enrolment": sum(u.mfa_started and not u.mfa_verified for u in users),
                "mfa-verified": sum(u.mfa_verified for u in users),
                "mfa-pass": sum(u.mfa_verified for u in users)}


def _error_code(reply: httpx.Response) -> str:
    try:
        return str(reply.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "-"


class _Body(httpx.AsyncByteStream):
    """A request body handed to the connection in one chunk by a plain iterator object.

    httpx's own body stream is an async generator: a request cancelled while sending it (every request in flight
    when the load is cancelled at the kill) leaves that generator suspended, and Trio reports its collection with a
    ResourceWarning (an error under the test suite's warning filter). An iterator object has nothing to finalize.
    """

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data


async def _call(client: httpx.AsyncClient, method: str, path: str, token: str | None = None,
                body: Any = None) -> httpx.Response:
    headers = {"zt-session": token} if token else {}
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = client.build_request(method, path, headers=headers, content=data)
    request.stream = _Body(data)
    return await client.send(request)


async def admin_login(endpoint: Endpoint, password: str) -> str:
    """Log the default admin in; returns its API session token.

    Raises:
        RuntimeError: the login was refused.
    """
    async with endpoint.client() as client:
        reply = await _call(client, "POST", f"{MGMT}/authenticate?method=password",
                            body={"username": "admin", "password": password})
    if reply.status_code != 200:
        raise RuntimeError(f"admin login refused: {reply.status_code} {reply.text}")
    return str(reply.json()["data"]["token"])


async def _create(client: httpx.AsyncClient, token: str, path: str, body: dict[str, Any]) -> str:
    reply = await _call(client, "POST", MGMT + path, token, body)
    if reply.status_code != 201:
        raise RuntimeError(f"POST {path} refused while building the model: {reply.status_code} {reply.text}")
    return str(reply.json()["data"]["id"])


async def create_model(endpoint: Endpoint, admin_token: str, users: int, short_timeout: int) -> Model:
    """Build the model (see the module's docstring) with ``users`` users, alternately ``long`` and ``short``.

    Raises:
        RuntimeError: the controller refused a create.
    """
    async with endpoint.client() as client:
        async def create(path: str, body: dict[str, Any]) -> str:
            return await _create(client, admin_token, path, body)

        await create("/edge-routers", {"name": "crash-router"})
        await create("/edge-router-policies", {"name": "crash-erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                               "edgeRouterRoles": ["#all"]})
        await create("/service-edge-router-policies", {"name": "crash-serp", "semantic": "AnyOf",
                                                       "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
        await create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                         "macAddresses": [GOOD_MAC]})
        for role, timeout in (("mfa-long", 3600), ("mfa-short", short_timeout)):
            await create("/posture-checks", {"name": role, "typeId": "MFA", "roleAttributes": [role],
                                             "timeoutSeconds": timeout})
        services = {}
        for role, identities, checks in (("open", "#crash", []), ("mac", "#crash", ["#mac"]),
                                         ("mfa-long", "#long", ["#mfa-long"]), ("mfa-short", "#short", ["#mfa-short"])):
            services[role] = await create("/services", {"name": role, "encryptionRequired": True,
                                                        "roleAttributes": [role]})
            await create("/service-policies", {"name": f"dial-{role}", "type": "Dial", "semantic": "AllOf",
                                               "identityRoles": [identities], "serviceRoles": [f"#{role}"],
                                               "postureCheckRoles": checks})
        made, authenticators = [], []
        for index in range(users):
            name, group = f"user-{index}", "long" if index % 2 == 0 else "short"
            identity_id = await create("/identities", _user_body(name, group))
            authenticators.append(await create("/authenticators", _authenticator_body(identity_id, name)))
            made.append(User(identity_id, name, group))
    return Model(admin_token, services, made, authenticators, short_timeout)


def _user_body(name: str, group: str) -> dict[str, Any]:
    return {"name": name, "type": "User", "isAdmin": False, "roleAttributes": ["crash", group]}


def _authenticator_body(identity_id: str, name: str) -> dict[str, Any]:
    return {"identityId": identity_id, "method": "updb", "username": name, "password": USER_PASSWORD}


class _Killed(Exception):
    """The controller stopped answering: this client has nothing more to do."""


class Load:
    """The clients of one trial; :meth:`run` until cancelled, then read :attr:`ledger`.

    Args:
        endpoint: the controller under load.
        model: what :func:`create_model` made (one user per client).
        seed: every client's choices follow from it.
    """

    def __init__(self, endpoint: Endpoint, model: Model, seed: str) -> None:
        self.endpoint = endpoint
        self.model = model
        self.seed = seed
        self.ledger = Ledger({u.identity_id for u in model.users}, set(model.authenticators))
        self.killed = False  # set by whoever kills the controller, before it cancels the load

    async def run(self, clients: int) -> None:
        """Run ``clients`` clients until cancelled (the controller's death parks a client until then)."""
        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(self._client, index)

    async def _client(self, index: int) -> None:
        rng = random.Random(f"{self.seed}:{index}")
        async with self.endpoint.client() as client:
            try:
                user: User | None = self.model.users[index % len(self.model.users)]
                serial = 0
                while True:
                    if user is not None:
                        await self._user_round(client, rng, user)
                    serial += 1
                    user = await self._new_user(client, f"user-{index}-{serial}", rng.choice(("long", "short")))
            except _Killed:
                await trio.sleep_forever()  # until the load is cancelled: the controller is gone

    async def _request(self, client: httpx.AsyncClient, method: str, path: str, token: str | None = None,
                       body: Any = None) -> Any:
        """Send one request; the answer's ``data`` when it is in 2xx (an acknowledgement), else None.

        Raises:
            _Killed: no answer came (the controller was killed, or died).
        """
        self.ledger.requests += 1
        # Counted until an answer (or a failure before the kill) settles it: a request cancelled with the load, or
        # failing once the controller is killed, stays counted as unanswered.
        self.ledger.unanswered += 1
        try:
            reply = await _call(client, method, path, token, body)
        except httpx.TransportError as exc:
            if not self.killed:
                self.ledger.unanswered -= 1
                self.ledger.failed_before_kill += 1
            raise _Killed from exc
        self.ledger.unanswered -= 1
        if not 200 <= reply.status_code < 300:
            self.ledger.refused[f"{method} {path.split('?')[0]}: {reply.status_code} {_error_code(reply)}"] += 1
            return None
        return reply.json().get("data")

    async def _maybe_extra_identity(self, client: httpx.AsyncClient, rng: random.Random, name: str) -> None:
        if rng.random() < EXTRA_IDENTITY_SHARE:
            body = {"name": name, "type": "Device", "isAdmin": False, "roleAttributes": ["extra"]}
            data = await self._request(client, "POST", f"{MGMT}/identities", self.model.admin_token, body)
            if data is not None:
                self.ledger.identities.add(str(data["id"]))

    async def _new_user(self, client: httpx.AsyncClient, name: str, group: str) -> User | None:
        """The admin creates a user (identity, then password); None when either was refused."""
        data = await self._request(client, "POST", f"{MGMT}/identities", self.model.admin_token,
                                   _user_body(name, group))
        if data is None:
            return None
        identity_id = str(data["id"])
        self.ledger.identities.add(identity_id)
        data = await self._request(client, "POST", f"{MGMT}/authenticators", self.model.admin_token,
                                   _authenticator_body(identity_id, name))
        if data is None:
            return None
        self.ledger.authenticators.add(str(data["id"]))
        return User(identity_id, name, group)

    async def _user_round(self, client: httpx.AsyncClient, rng: random.Random, user: User) -> None:
        """One user's life, from login to its last posture report (see the module's docstring)."""
        login = await self._request(client, "POST", f"{CLIENT}/authenticate?method=password",
                                    body={"username": user.name, "password": USER_PASSWORD, "sdkInfo": SDK_INFO})
        if login is None:
            return
        api_session_id, token = str(login["id"]), str(login["token"])
        ack = self.ledger.logins[api_session_id] = UserAck(user.identity_id, user.group, token)
        steps: list[Callable[[], Awaitable[None]]] = [
            partial(self._report, client, ack, bulk=True), partial(self._dial, client, ack, api_session_id, "open"),
            partial(self._dial, client, ack, api_session_id, "mac"), partial(self._mfa, client, ack),
            partial(self._dial, client, ack, api_session_id, f"mfa-{user.group}"),
            partial(self._report, client, ack, bulk=False)]
        for number, step in enumerate(steps):
            await self._maybe_extra_identity(client, rng, f"{user.name}-extra-{number}")
            await step()

    async def _report(self, client: httpx.AsyncClient, ack: UserAck, *, bulk: bool) -> None:
        report_id = f"report-{ack.identity_id}-{len(ack.reports)}"
        process = {"id": report_id, "typeId": "PROCESS", "path": "/usr/bin/crash-agent", "isRunning": True}
        if bulk:
            mac = {"id": "mac", "typeId": "MAC", "macAddresses": [GOOD_MAC]}
            data = await self._request(client, "POST", f"{CLIENT}/posture-response-bulk", ack.token, [mac, process])
        else:
            data = await self._request(client, "POST", f"{CLIENT}/posture-response", ack.token, process)
        if data is not None:
            ack.reports.append(report_id)

    async def _dial(self, client: httpx.AsyncClient, ack: UserAck, api_session_id: str, role: str) -> None:
        body = {"serviceId": self.model.services[role], "type": "Dial"}
        data = await self._request(client, "POST", f"{CLIENT}/sessions", ack.token, body)
        if data is not None:
            self.ledger.sessions[str(data["id"])] = SessionAck(ack.identity_id, api_session_id, role)
            if role == "mfa-short":
                self.ledger.short_mfa_dialled.set()

    async def _mfa(self, client: httpx.AsyncClient, ack: UserAck) -> None:
        """Enrol in MFA and verify the enrolment with the TOTP of the current 30-second step."""
        if await self._request(client, "POST", f"{CLIENT}/current-identity/mfa", ack.token) is None:
            return
        ack.mfa_started = True
        detail = await self._request(client, "GET", f"{CLIENT}/current-identity/mfa", ack.token)
        if detail is None:
            return
        secret = parse_qs(urlsplit(str(detail["provisioningUrl"])).query)["secret"][0]
        code = pyotp.TOTP(secret).at(int(time.time()))
        if await self._request(client, "POST", f"{CLIENT}/current-identity/mfa/verify", ack.token,
                               {"code": code}) is not None:
            ack.mfa_verified = True
