"""Every operation of both APIs against every kind of caller, generated from the application's route table.

Each operation declares its access level (``RouteInfo.access``) and ``Routes.add`` serves it behind the check of
that level. This file asserts that the declaration is what happens (behaviour note §7.3, §8.2): for every served
operation and each caller below, 401 UNAUTHORIZED exactly where the level refuses the caller, and no 401 at all
where it admits the caller (admitted callers get whatever a placeholder id and an empty body earn: 400, 404, 409,
...). It also asserts that nothing is served outside the route table, so no operation can skip the check, and
that each declared level is the one the rules give (the lists below: the anonymous operations, those a partially
authenticated session may call, the management operations open to any identity).

Callers: no ``zt-session`` header; a malformed token; the token of a session that expired; a session still owing
its MFA code; a non-admin identity's full session; the default admin's. The expired session ends on Trio's virtual
clock; every request after that runs at one virtual instant, so no other session ages.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest
import trio
from trio.testing import MockClock

from controller.runtime.composition import Controller
from tests.support import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    CLIENT,
    MGMT,
    Api,
    Reply,
    make_settings,
    make_user,
    start_controller,
    totp,
)
from web.guards import Access
from web.route_table import RouteInfo

TIMEOUT = 60
USER_PASSWORD = "user-password"
BASES = {"management": MGMT, "client": CLIENT}

NO_TOKEN = "no token"
MALFORMED = "malformed token"
EXPIRED = "expired token"
MFA_PENDING = "MFA pending"
NON_ADMIN = "non-admin"
ADMIN = "admin"
CALLERS = (NO_TOKEN, MALFORMED, EXPIRED, MFA_PENDING, NON_ADMIN, ADMIN)

# Who each level lets in, stated here rather than read from web/guards.py, so a change to the check shows.
ADMITTED: dict[Access, frozenset[str]] = {
    Access.ANYONE: frozenset(CALLERS),
    Access.PARTIAL_SESSION: frozenset({MFA_PENDING, NON_ADMIN, ADMIN}),
    Access.SESSION: frozenset({NON_ADMIN, ADMIN}),
    Access.ADMIN: frozenset({ADMIN}),
}

Key = tuple[str, str, str]  # (api, method, path as the route table writes it)

# The operations open to a caller without a full session, or to a non-admin on the management API. Every other
# management operation needs an admin, every other client operation a full session (mission: operations need a
# session unless stated otherwise; the management API is the administrators'). Pinned here so that opening or
# closing an operation is a deliberate change of this list, not a slip in a route module.
_INFORMATIONAL = ("GET /version", "GET /", "GET /enumerated-capabilities", "GET /specs", "GET /specs/{id}",
                  "GET /specs/{id}/spec", "GET /.well-known/est/cacerts")
ANONYMOUS = {
    "management": frozenset({"POST /authenticate", *_INFORMATIONAL}),
    # Enrolment is how a client gets its first credential; a client finds its identity provider before logging in.
    "client": frozenset({"POST /authenticate", *_INFORMATIONAL, "GET /protocols", "POST /enroll", "POST /enroll/ott",
                         "POST /enroll/ottca", "POST /enroll/ca", "POST /enroll/updb", "POST /enroll/erott",
                         "POST /enroll/extend/router", "POST /enroll/challenge", "GET /enroll/jwks",
                         "GET /external-jwt-signers"}),
}
# Behaviour note §8.2: all a session still owing its MFA code may call, on both APIs.
PARTIAL = frozenset({"GET /current-api-session", "DELETE /current-api-session", "POST /authenticate/mfa",
                     "GET /current-identity/mfa", "POST /current-identity/mfa", "POST /current-identity/mfa/verify",
                     "GET /current-identity/mfa/qr-code"})
MANAGEMENT_FOR_ANY_IDENTITY = frozenset({
    "GET /identity-types", "GET /identity-types/{id}", "GET /posture-check-types", "GET /posture-check-types/{id}",
    "GET /current-identity", "DELETE /current-identity/mfa", "GET /current-identity/mfa/recovery-codes",
    "POST /current-identity/mfa/recovery-codes", "GET /current-identity/authenticators",
    "GET /current-identity/authenticators/{id}", "PUT /current-identity/authenticators/{id}",
    "PATCH /current-identity/authenticators/{id}", "POST /current-identity/authenticators/{id}/extend",
    "POST /current-identity/authenticators/{id}/extend-verify",
})

# Operations whose handler checks a credential of its own after the access check admitted the caller, and may
# refuse with 401 for it. Their admitted callers are not held to "no 401"; instead all of them must get the same
# answer, which shows the answer does not come from the caller's session.
OWN_CREDENTIAL_CHECK: dict[Key, str] = {
    **{(api, "POST", "/authenticate"): "a login refuses wrong credentials (password, certificate, external JWT) "
       "with 401 INVALID_AUTH" for api in BASES},
    **{(api, "POST", "/current-identity/authenticators/{id}/extend"): "the connection must also present the "
       "certificate being extended" for api in BASES},
    **{(api, method, "/current-identity/authenticators/{id}"): "a password change needs the current password"
       for api in BASES for method in ("PUT", "PATCH")},
    ("client", "POST", "/enroll/extend/router"): "a router authenticates by its TLS client certificate alone",
}

# Operations that end the caller's own session: each session-holding caller calls them with a session of its own
# kind made for that one request, so the sessions the rest of the matrix uses stay alive.
ENDS_OWN_SESSION: dict[Key, str] = {
    (api, "DELETE", "/current-api-session"): "logout" for api in BASES
}


# Operations whose answer is a stream that lasts as long as the client listens: an admitted caller's request reads
# the status and the first part of the answer, then hangs up.
STREAMS: dict[Key, str] = {("management", "GET", "/events/stream"): "Server-Sent Events of the event log"}


async def first_part(app: Any, path: str, token: str | None) -> Reply:
    """A GET of a streamed operation, straight through the application's ASGI interface: its status and the first
    part of its answer (the whole of an error's, decoded), then the client goes away (which ends the stream)."""
    headers = [(b"host", b"localhost"), *([(b"zt-session", token.encode())] if token else [])]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 40000), "server": ("localhost", 80), "extensions": {}}
    to_app, app_receives = trio.open_memory_channel[dict[str, Any]](4)
    app_sends, from_app = trio.open_memory_channel[dict[str, Any]](64)
    await to_app.send({"type": "http.request", "body": b"", "more_body": False})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, scope, app_receives.receive, app_sends.send)
        start = await from_app.receive()
        first = await from_app.receive()
        await to_app.send({"type": "http.disconnect"})
    data = bytes(first.get("body", b""))
    status = int(start["status"])
    try:
        body = msgspec.json.decode(data) if status != 200 else None
    except msgspec.DecodeError:
        body = None
    return Reply(status, dict(start.get("headers") or ()), body, data)


def key(info: RouteInfo) -> Key:
    return info.api, info.method, info.path


def expected_level(info: RouteInfo) -> Access:
    """The level the lists above give an operation."""
    operation = f"{info.method} {info.path}"
    if operation in ANONYMOUS[info.api]:
        return Access.ANYONE
    if operation in PARTIAL:
        return Access.PARTIAL_SESSION
    if info.api == "client" or operation in MANAGEMENT_FOR_ANY_IDENTITY:
        return Access.SESSION
    return Access.ADMIN


def placeholder_path(info: RouteInfo) -> str:
    """The route's path with every ``{name}`` replaced by an id that names nothing."""
    return re.sub(r"{(\w+)}", r"no-such-\1", info.path)


def error_code(reply: Reply) -> str | None:
    body = reply.body
    return body["error"].get("code") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery,
                     autojump_clock: MockClock) -> AsyncIterator[Controller]:
    yield await start_controller(make_settings(tmp_path, session_timeout=TIMEOUT), nursery)


@dataclass
class Callers:
    """One token per caller, and how to log in again as each session-holding caller."""

    anon: Api
    tokens: dict[str, str | None]
    logins: dict[str, tuple[str, str]]

    async def fresh_token(self, caller: str) -> str | None:
        """A new session of ``caller``'s kind, or the caller's usual token when it holds no live session."""
        if caller not in self.logins:
            return self.tokens[caller]
        return (await self.anon.login(*self.logins[caller])).token


async def enrol_mfa(api: Api, controller: Controller) -> None:
    """Start and verify an MFA enrolment with a TOTP at the controller's clock."""
    assert (await api.post("/current-identity/mfa")).status == 201
    detail = (await api.get("/current-identity/mfa")).data
    secret = parse_qs(urlsplit(detail["provisioningUrl"]).query)["secret"][0]
    code = totp(controller, secret)
    assert (await api.post("/current-identity/mfa/verify", {"code": code})).status == 200


async def make_callers(anon: Api, controller: Controller) -> Callers:
    admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
    _, expiring = await make_user(admin, "expiring")
    assert (await expiring.get("/current-identity")).status == 200
    await trio.sleep(TIMEOUT)  # every session made so far ends now
    assert (await expiring.get("/current-api-session")).status == 401

    admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
    _, user = await make_user(admin, "plain-user")
    _, mfa_user = await make_user(admin, "mfa-user")
    await enrol_mfa(mfa_user, controller)
    pending = await anon.login("mfa-user", USER_PASSWORD)
    detail = (await pending.get("/current-api-session")).data
    assert (detail["isMfaRequired"], detail["isMfaComplete"]) == (True, False)
    return Callers(anon, {NO_TOKEN: None, MALFORMED: "not-a-session-token", EXPIRED: expiring.token,
                          MFA_PENDING: pending.token, NON_ADMIN: user.token, ADMIN: admin.token},
                   {MFA_PENDING: ("mfa-user", USER_PASSWORD), NON_ADMIN: ("plain-user", USER_PASSWORD),
                    ADMIN: (ADMIN_USERNAME, ADMIN_PASSWORD)})


def served_routes(api: Api) -> list[RouteInfo]:
    routes: list[RouteInfo] = list(api.app.extensions["tollgate_routes"])
    return routes


# The route table ----------------------------------------------------------------------------------------------

async def test_everything_served_is_in_the_route_table_with_a_level(anon: Api, autojump_clock: MockClock) -> None:
    routes = served_routes(anon)
    assert routes
    undeclared = [info.operation_id for info in routes if not isinstance(info.access, Access)]
    assert undeclared == []
    declared = {(info.api, info.method, BASES[info.api] + info.path.replace("{", "<").replace("}", ">"))
                for info in routes}
    assert len(declared) == len(routes), "an operation is declared twice"
    # The web console's pages are behind its own gate (tests/console/test_console_pages.py checks every one).
    served = {(rule.endpoint.split(".")[0], method, rule.rule) for rule in anon.app.url_map.iter_rules()
              if rule.endpoint != "static" and not rule.endpoint.startswith("console.")
              for method in rule.methods or () if method not in ("HEAD", "OPTIONS")}
    # A rule added to a blueprint without Routes.add is served without any access check.
    assert served - declared == set()
    assert declared - served == set()


async def test_each_declared_level_is_the_one_the_rules_give(anon: Api, autojump_clock: MockClock) -> None:
    routes = served_routes(anon)
    wrong = [f"{info.api} {info.method} {info.path}: declared {info.access.name}, the rules give "
             f"{expected_level(info).name}" for info in routes if info.access is not expected_level(info)]
    assert wrong == []
    served = {(info.api, f"{info.method} {info.path}") for info in routes}
    listed = {(api, op) for api, ops in ANONYMOUS.items() for op in ops}
    listed |= {(api, op) for api in BASES for op in PARTIAL}
    listed |= {("management", op) for op in MANAGEMENT_FOR_ANY_IDENTITY}
    assert listed - served == set()


async def test_the_listed_exceptions_are_served(anon: Api, autojump_clock: MockClock) -> None:
    served = {key(info) for info in served_routes(anon)}
    assert set(OWN_CREDENTIAL_CHECK) - served == set()
    assert set(ENDS_OWN_SESSION) - served == set()
    assert set(STREAMS) - served == set()


# The matrix ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("api_name", list(BASES))
async def test_each_level_admits_exactly_its_callers(anon: Api, controller: Controller, autojump_clock: MockClock,
                                                     api_name: str) -> None:
    callers = await make_callers(anon, controller)
    routes = [info for info in served_routes(anon) if info.api == api_name]
    problems: list[str] = []
    for info in routes:
        answers: dict[str, int] = {}
        for caller in CALLERS:
            token = (await callers.fresh_token(caller) if key(info) in ENDS_OWN_SESSION
                     else callers.tokens[caller])
            if key(info) in STREAMS:
                reply = await first_part(anon.app, BASES[api_name] + placeholder_path(info), token)
            else:
                reply = await anon.with_token(token).request(info.method, placeholder_path(info),
                                                             base=BASES[api_name])
            outcome = f"{reply.status} {error_code(reply)}"
            where = f"{info.method} {info.path} ({info.access.name}) as {caller}: got {outcome}"
            if caller not in ADMITTED[info.access]:
                if (reply.status, error_code(reply)) != (401, "UNAUTHORIZED"):
                    problems.append(f"{where}, expected 401 UNAUTHORIZED")
                continue
            answers[caller] = reply.status
            if reply.status == 401 and key(info) not in OWN_CREDENTIAL_CHECK:
                problems.append(f"{where}, expected an admitted caller's answer")
        if key(info) in OWN_CREDENTIAL_CHECK and len(set(answers.values())) > 1:
            problems.append(f"{info.method} {info.path}: admitted callers got different answers {answers}")
    assert problems == [], "\n".join(problems)

    # The callers were what they claim to the end: the requests above ended or completed none of their sessions.
    for caller in (MFA_PENDING, NON_ADMIN, ADMIN):
        detail = await anon.with_token(callers.tokens[caller]).get("/current-api-session")
        assert detail.status == 200, caller
        partial = detail.data["isMfaRequired"] and not detail.data["isMfaComplete"]
        assert partial == (caller == MFA_PENDING), caller
