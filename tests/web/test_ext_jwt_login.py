"""External JWT login over HTTP: ``POST /authenticate?method=ext-jwt``, the external JWT second factor an auth policy
may require, and the Client API's anonymous list of enabled signers.

Signers verify with a certificate made here for an EC key (certPem); one test logs in through a JWKS signer served by
the HTTPS test server of tests/controller/test_jwks.py. The wall clock starts at a round epoch so that token expiries
are stated exactly; timed tests take ``autojump_clock`` and assert the instant the second factor lapses.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import msgspec
import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from jwt.algorithms import ECAlgorithm
from trio.testing import MockClock
from werkzeug.datastructures import Headers

from controller.authentication.external_jwt import CLOCK_LEEWAY_SECONDS
from controller.authentication.jwks import JwksCache
from controller.clock import Clock
from controller.resources.sessions import DEFAULT_AUTH_POLICY
from controller.runtime.composition import Controller
from tests.controller.test_jwks import JwksServer, make_pki, start_jwks_server
from tests.support import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    CLIENT,
    Api,
    Reply,
    make_settings,
    next_totp,
    start_controller,
    totp,
)
from web.app import create_app

EPOCH = 1_700_000_000.0
AUDIENCE = "tollgate"
LOGIN_URL = "https://idp.example/login"
CLIENT_FIELDS = {"id", "createdAt", "updatedAt", "tags", "_links", "name", "externalAuthUrl"}


@dataclass(frozen=True)
class Idp:
    """An identity provider: its issuer and signing key, and the certificate a certPem signer holds."""

    issuer: str
    key: ec.EllipticCurvePrivateKey
    cert_pem: str

    def token(self, exp: float, kid: str | None = None, **claims: Any) -> str:
        """A JWT for this provider's audience expiring at ``exp``; ``claims`` adds or overrides (None removes)."""
        payload = {"iss": self.issuer, "aud": AUDIENCE, "exp": int(exp)} | claims
        headers = {"kid": kid} if kid is not None else None
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, self.key, algorithm="ES256",
                          headers=headers)


@functools.cache
def idp(name: str) -> Idp:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} signing")])
    start = dt.datetime.fromtimestamp(EPOCH, dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start - dt.timedelta(days=1))
            .not_valid_after(start + dt.timedelta(days=30)).sign(key, hashes.SHA256()))
    return Idp(f"https://{name}.example", key, cert.public_bytes(serialization.Encoding.PEM).decode())


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Controller]:
    yield await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=EPOCH))


async def add_signer(admin: Api, provider: Idp, **fields: Any) -> str:
    body = {"name": provider.issuer, "enabled": True, "issuer": provider.issuer, "audience": AUDIENCE,
            "certPem": provider.cert_pem, **fields}
    return await admin.create("/external-jwt-signers", body)


async def add_policy(admin: Api, name: str, *, ext_jwt: dict[str, Any] | None = None,
                     require_signer: str | None = None, require_totp: bool = False) -> str:
    primary = {**DEFAULT_AUTH_POLICY["primary"], "extJwt": ext_jwt or {"allowed": True, "allowedSigners": []}}
    secondary = {"requireTotp": require_totp, "requireExtJwtSigner": require_signer}
    return await admin.create("/auth-policies", {"name": name, "primary": primary, "secondary": secondary})


async def add_identity(admin: Api, name: str, **fields: Any) -> str:
    return await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False, **fields})


async def authenticate(api: Api, tokens: list[str], method: str = "ext-jwt", body: Any = None) -> Reply:
    """``POST /authenticate`` on the client API with one ``Authorization: Bearer`` header per token."""
    headers = Headers([("Authorization", f"Bearer {token}") for token in tokens])
    data = None
    if body is not None:
        data = msgspec.json.encode(body)
        headers.add("Content-Type", "application/json")
    response = await api.app.test_client().post(f"{CLIENT}/authenticate", headers=headers, data=data,
                                                query_string={"method": method})
    raw = await response.get_data()
    return Reply(response.status_code, response.headers, msgspec.json.decode(raw) if raw else None, raw)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def in_minutes(controller: Controller, minutes: float) -> float:
    return controller.clock.now() + 60 * minutes


def assert_refused(reply: Reply) -> None:
    assert (reply.status, reply.error["code"]) == (401, "INVALID_AUTH"), reply.body
    assert "zt-session" not in reply.headers


def assert_unauthorized(reply: Reply) -> None:
    assert (reply.status, reply.error["code"]) == (401, "UNAUTHORIZED"), reply.body


# Primary login ---------------------------------------------------------------------------------------------------

async def test_login_by_identity_id(admin: Api, anon: Api, controller: Controller) -> None:
    provider = idp("corp")
    signer_id = await add_signer(admin, provider)
    identity_id = await add_identity(admin, "alice")
    reply = await authenticate(anon, [provider.token(in_minutes(controller, 5), sub=identity_id)],
                               body={"sdkInfo": {"type": "test"}})
    assert reply.status == 200, reply.body
    assert reply.headers["zt-session"] == reply.data["token"]
    assert (reply.data["identityId"], reply.data["authenticatorId"]) == (identity_id, f"extJwtId:{signer_id}")
    assert (reply.data["authQueries"], reply.data["isMfaRequired"], reply.data["sdkInfo"]) == (
        [], False, {"type": "test"})
    me = await anon.as_client().with_token(reply.data["token"]).get("/current-identity")
    assert (me.status, me.data["id"]) == (200, identity_id)


async def test_login_by_external_id_with_a_custom_claims_property(admin: Api, anon: Api,
                                                                   controller: Controller) -> None:
    provider = idp("corp")
    signer_id = await add_signer(admin, provider, claimsProperty="email", useExternalId=True)
    identity_id = await add_identity(admin, "alice", externalId="alice@corp.example")
    await add_identity(admin, "bob", externalId="bob@corp.example")
    token = provider.token(in_minutes(controller, 5), sub="someone-else", email="alice@corp.example")
    reply = await authenticate(anon, [token])
    assert reply.status == 200, reply.body
    assert (reply.data["identityId"], reply.data["authenticatorId"]) == (identity_id, f"extJwtId:{signer_id}")
    # The id claim is not looked at when the signer uses another claim as external id.
    assert_refused(await authenticate(anon, [provider.token(in_minutes(controller, 5), sub=identity_id)]))


@dataclass
class World:
    """Signers and identities for the refusal cases: each case builds the bearer tokens of one login."""

    controller: Controller
    signer: Idp
    users: dict[str, str]

    def valid(self, user: str = "plain", exp: float | None = None, **claims: Any) -> str:
        expiry = in_minutes(self.controller, 5) if exp is None else exp
        return self.signer.token(expiry, **({"sub": self.users[user]} | claims))


@pytest.fixture
async def world(admin: Api, controller: Controller) -> World:
    provider = idp("corp")
    await add_signer(admin, provider)
    await add_signer(admin, idp("off"), enabled=False)
    other_signer_id = await add_signer(admin, idp("other"))
    no_ext_jwt = await add_policy(admin, "no-ext-jwt", ext_jwt={"allowed": False, "allowedSigners": []})
    other_only = await add_policy(admin, "other-only", ext_jwt={"allowed": True, "allowedSigners": [other_signer_id]})
    users = {"plain": await add_identity(admin, "plain"), "disabled": await add_identity(admin, "disabled"),
             "no-ext-jwt": await add_identity(admin, "no-ext", authPolicyId=no_ext_jwt),
             "other-only": await add_identity(admin, "other-only", authPolicyId=other_only)}
    assert (await admin.post(f"/identities/{users['disabled']}/disable", {"durationMinutes": 0})).status == 200
    return World(controller, provider, users)


# Each case: the bearer tokens of one login, and what the log says about why it was refused.
REFUSALS: dict[str, tuple[Callable[[World], list[str]], str]] = {
    "unknown signer": (lambda w: [idp("stranger").token(in_minutes(w.controller, 5), sub=w.users["plain"])],
                       "no external JWT signer has"),
    "disabled signer": (lambda w: [idp("off").token(in_minutes(w.controller, 5), sub=w.users["plain"])],
                        "') is disabled"),
    "wrong audience": (lambda w: [w.valid(aud="someone-else")], "audience"),
    "expired": (lambda w: [w.valid(exp=w.controller.clock.now() - CLOCK_LEEWAY_SECONDS - 1)], "expired at"),
    "identity missing": (lambda w: [w.valid(sub="no-such-identity")], "no identity has id"),
    "identity disabled": (lambda w: [w.valid("disabled")], "identity '"),
    "policy does not allow ext-jwt": (lambda w: [w.valid("no-ext-jwt")], "does not allow external JWT login"),
    "signer not in allowedSigners": (lambda w: [w.valid("other-only")], "does not allow signer"),
    "no bearer token": (lambda w: [], "no bearer token"),
    "not a JWT": (lambda w: ["not-a-jwt"], "not a JWT"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_refusals_are_invalid_auth(world: World, anon: Api, case: str, caplog: pytest.LogCaptureFixture) -> None:
    make_tokens, reason = REFUSALS[case]
    tokens = make_tokens(world)
    with caplog.at_level(logging.INFO, logger="tollgate.auth"):
        assert_refused(await authenticate(anon, tokens))
    logged = [r for r in caplog.records if r.name == "tollgate.auth"]
    assert [r.getMessage() for r in logged] == ["external JWT login refused"]
    assert reason in logged[0].__dict__["reason"]
    assert not any(token in str(vars(r)) for r in logged for token in tokens)  # never the token itself


async def test_allowed_signers_admit_the_listed_signer(world: World, anon: Api) -> None:
    token = idp("other").token(in_minutes(world.controller, 5), sub=world.users["other-only"])
    assert (await authenticate(anon, [token])).status == 200


async def test_the_second_bearer_token_is_tried_and_a_third_is_ignored(world: World, anon: Api) -> None:
    wrong = world.valid(aud="someone-else")
    reply = await authenticate(anon, [wrong, world.valid()])
    assert (reply.status, reply.data["identityId"]) == (200, world.users["plain"])
    assert_refused(await authenticate(anon, [wrong, wrong, world.valid()]))


async def test_login_through_a_jwks_signer(admin: Api, anon: Api, controller: Controller, nursery: trio.Nursery,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    pki = make_pki(tmp_path)
    server = JwksServer()
    base_url = await start_jwks_server(nursery, server, pki)
    controller.jwks = JwksCache(verify=pki.client_context())
    provider = idp("jwks")
    server.publish("/keys", ECAlgorithm.to_jwk(provider.key.public_key(), as_dict=True) | {"kid": "k1"})
    signer_id = await admin.create("/external-jwt-signers", {
        "name": "jwks idp", "enabled": True, "issuer": provider.issuer, "audience": AUDIENCE,
        "jwksEndpoint": f"{base_url}/keys"})
    identity_id = await add_identity(admin, "alice")
    reply = await authenticate(anon, [provider.token(in_minutes(controller, 5), kid="k1", sub=identity_id)])
    assert (reply.status, reply.data["authenticatorId"]) == (200, f"extJwtId:{signer_id}")
    assert_refused(await authenticate(anon, [provider.token(in_minutes(controller, 5), kid="k2", sub=identity_id)]))


# Second factor ---------------------------------------------------------------------------------------------------

@dataclass
class Secondary:
    """A user whose auth policy requires a JWT from ``signer_id`` (``corp``), and a second user under it."""

    controller: Controller
    signer_id: str
    user_id: str
    other_id: str

    def token(self, minutes: float = 5, user: str | None = None, provider: str = "corp") -> str:
        return idp(provider).token(in_minutes(self.controller, minutes), sub=user or self.user_id)


EXT_JWT_QUERY = {"typeId": "EXT-JWT", "provider": "url", "httpUrl": LOGIN_URL}


async def secondary_setup(admin: Api, controller: Controller, *, require_totp: bool = False) -> Secondary:
    signer_id = await add_signer(admin, idp("corp"), externalAuthUrl=LOGIN_URL)
    await add_signer(admin, idp("other"))
    policy_id = await add_policy(admin, "needs-jwt", require_signer=signer_id, require_totp=require_totp)
    user_id = await add_identity(admin, "user1", authPolicyId=policy_id)
    await admin.create("/authenticators", {"identityId": user_id, "method": "updb", "username": "user1",
                                           "password": "user-password"})
    other_id = await add_identity(admin, "user2", authPolicyId=policy_id)
    return Secondary(controller, signer_id, user_id, other_id)


async def password_login(anon: Api, tokens: list[str] | None = None) -> tuple[Reply, Api]:
    reply = await authenticate(anon, tokens or [], "password", {"username": "user1", "password": "user-password"})
    assert reply.status == 200, reply.body
    return reply, anon.as_client().with_token(reply.data["token"])


async def test_a_required_signer_keeps_a_password_session_partial_until_a_jwt_comes(
        admin: Api, anon: Api, controller: Controller) -> None:
    setup = await secondary_setup(admin, controller)
    reply, user = await password_login(anon)
    assert (reply.data["authQueries"], reply.data["isMfaRequired"]) == ([EXT_JWT_QUERY], False)
    assert_unauthorized(await user.get("/current-identity"))
    assert (await user.get("/current-api-session")).data["authQueries"] == [EXT_JWT_QUERY]

    # Tokens that do not satisfy the factor: another signer's, another identity's, an expired one.
    for token in (setup.token(provider="other"), setup.token(user=setup.other_id),
                  setup.token(minutes=-1 - CLOCK_LEEWAY_SECONDS / 60)):
        assert_unauthorized(await user.get("/current-identity", headers=bearer(token)))

    served = await user.get("/current-identity", headers=bearer(setup.token()))
    assert (served.status, served.data["id"]) == (200, setup.user_id)
    assert (await user.get("/current-identity")).status == 200  # no bearer needed while the JWT is valid
    assert (await user.get("/current-api-session")).data["authQueries"] == []


async def test_the_login_request_may_bring_the_jwt(admin: Api, anon: Api, controller: Controller) -> None:
    setup = await secondary_setup(admin, controller)
    reply, user = await password_login(anon, [setup.token(provider="other"), setup.token()])
    assert reply.data["authQueries"] == []
    assert (await user.get("/current-identity")).status == 200
    # An ext-jwt login with the required signer's token satisfies both at once.
    primary = await authenticate(anon, [setup.token()])
    assert (primary.status, primary.data["authQueries"]) == (200, [])


async def test_the_auth_query_has_no_url_when_the_signer_has_none(admin: Api, anon: Api,
                                                                  controller: Controller) -> None:
    setup = await secondary_setup(admin, controller)
    assert (await admin.patch(f"/external-jwt-signers/{setup.signer_id}", {"externalAuthUrl": None})).status == 200
    reply, _ = await password_login(anon)
    assert reply.data["authQueries"] == [{"typeId": "EXT-JWT", "provider": "url"}]


async def test_the_factor_lapses_at_the_jwt_expiry(admin: Api, anon: Api, controller: Controller,
                                                   autojump_clock: MockClock) -> None:
    setup = await secondary_setup(admin, controller)
    _, user = await password_login(anon)
    token = setup.token(minutes=5)
    expiry = int(in_minutes(controller, 5)) + CLOCK_LEEWAY_SECONDS  # the token stops verifying here
    assert (await user.get("/current-identity", headers=bearer(token))).status == 200

    await trio.sleep_until(controller.clock.to_trio(expiry) - 0.001)
    assert (await user.get("/current-identity")).status == 200
    await trio.sleep_until(controller.clock.to_trio(expiry))
    assert_unauthorized(await user.get("/current-identity"))
    assert (await user.get("/current-api-session")).data["authQueries"] == [EXT_JWT_QUERY]
    assert_unauthorized(await user.get("/current-identity", headers=bearer(token)))  # no longer valid
    assert (await user.get("/current-identity", headers=bearer(setup.token(minutes=5)))).status == 200


async def enrol(api: Api, controller: Controller) -> str:
    """Enrol and verify MFA for the caller's identity; returns the TOTP secret."""
    assert (await api.post("/current-identity/mfa")).status == 201
    detail = (await api.get("/current-identity/mfa")).data
    secret = str(parse_qs(urlsplit(detail["provisioningUrl"]).query)["secret"][0])
    assert (await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})).status == 200
    return secret


async def test_mfa_and_the_external_jwt_are_both_owed(admin: Api, anon: Api, controller: Controller,
                                                      autojump_clock: MockClock) -> None:
    setup = await secondary_setup(admin, controller)
    _, first = await password_login(anon)
    secret = await enrol(first, controller)  # the MFA routes are open to a partial session

    reply, user = await password_login(anon)
    mfa_query = {"typeId": "MFA", "provider": "ziti", "httpMethod": "POST", "httpUrl": "./authenticate/mfa",
                 "format": "alphaNumeric", "minLength": 4, "maxLength": 6}
    assert (reply.data["authQueries"], reply.data["isMfaRequired"]) == ([mfa_query, EXT_JWT_QUERY], True)
    assert_unauthorized(await user.get("/current-identity", headers=bearer(setup.token())))
    assert (await user.get("/current-api-session")).data["authQueries"] == [mfa_query]
    assert (await user.post("/authenticate/mfa", {"code": await next_totp(controller, secret)})).status == 200
    assert (await user.get("/current-api-session")).data["authQueries"] == []
    assert (await user.get("/current-identity")).status == 200


@asynccontextmanager
async def running(data_dir: Path, wall: float) -> AsyncIterator[Api]:
    """A controller on ``data_dir`` whose wall clock starts at ``wall``, stopped as ``main`` stops it."""
    async with trio.open_nursery() as nursery:
        controller = await start_controller(make_settings(data_dir), nursery, Clock(wall_base=wall))
        try:
            yield Api(create_app(controller), controller=controller)
            await controller.sessions.flush()
        finally:
            nursery.cancel_scope.cancel()
    controller.close()


async def test_a_restart_keeps_what_each_session_owes(tmp_path: Path) -> None:
    jwt_expiry = EPOCH + 300
    async with running(tmp_path, EPOCH) as anon:
        assert anon.controller is not None
        admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        setup = await secondary_setup(admin, anon.controller)
        _, satisfied = await password_login(anon, [idp("corp").token(jwt_expiry, sub=setup.user_id)])
        _, owing = await password_login(anon)

    async with running(tmp_path, EPOCH + 10) as anon:
        assert (await anon.with_token(satisfied.token).as_client().get("/current-identity")).status == 200
        assert_unauthorized(await anon.with_token(owing.token).as_client().get("/current-identity"))

    # After the JWT's expiry (plus the leeway) the satisfied session owes a fresh one, as it would have running.
    async with running(tmp_path, jwt_expiry + CLOCK_LEEWAY_SECONDS) as anon:
        user = anon.with_token(satisfied.token).as_client()
        assert_unauthorized(await user.get("/current-identity"))
        assert (await user.get("/current-api-session")).data["authQueries"] == [EXT_JWT_QUERY]
        fresh = idp("corp").token(EPOCH + 900, sub=setup.user_id)
        assert (await user.get("/current-identity", headers=bearer(fresh))).status == 200


async def test_a_session_owing_nothing_ignores_bearer_tokens(admin: Api, anon: Api, controller: Controller,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests of sessions that owe no JWT never verify one, whatever they carry."""
    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Awaitable[Any]:
        calls.append("verify")
        raise AssertionError("verified a bearer token")

    monkeypatch.setattr("controller.authentication.ext_jwt_login.verify", refuse)
    reply = await admin.get("/current-identity", headers=bearer(idp("corp").token(in_minutes(controller, 5))))
    assert reply.status == 200 and calls == []


# Client API signer list ------------------------------------------------------------------------------------------

async def test_clients_list_only_enabled_signers_without_a_session(admin: Api, anon: Api) -> None:
    with_url = await add_signer(admin, idp("corp"), name="corp", externalAuthUrl=LOGIN_URL, tags={"team": "a"})
    without_url = await add_signer(admin, idp("other"), name="other")
    await add_signer(admin, idp("off"), name="off", enabled=False)

    listed = await anon.as_client().get("/external-jwt-signers", query={"sort": "name"})
    assert listed.status == 200, listed.body
    assert [s["id"] for s in listed.data] == [with_url, without_url]
    assert all(set(s) == CLIENT_FIELDS for s in listed.data)
    first, second = listed.data
    assert (first["name"], first["externalAuthUrl"], first["tags"]) == ("corp", LOGIN_URL, {"team": "a"})
    assert first["_links"] == {"self": {"href": f"./external-jwt-signers/{with_url}"}}
    assert (second["name"], second["externalAuthUrl"]) == ("other", None)
    assert listed.body["meta"]["pagination"]["totalCount"] == 2

    page = await anon.as_client().get("/external-jwt-signers", query={"limit": 1, "offset": 1, "sort": "name"})
    assert [s["id"] for s in page.data] == [without_url]
    assert page.body["meta"]["pagination"] == {"limit": 1, "offset": 1, "totalCount": 2}
    filtered = await anon.as_client().get("/external-jwt-signers", query={"filter": 'name = "off"'})
    assert (filtered.status, filtered.data) == (200, [])
    # The management API's signers stay admin-only.
    assert_unauthorized(await anon.get("/external-jwt-signers"))
