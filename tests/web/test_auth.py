"""``POST /authenticate?method=password`` on both APIs, the caller's own session and identity, and admin-only
session operations (behaviour note §8.1, §7.3)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.clock import parse_time
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, CLIENT, MGMT, Api, Reply, make_user


async def _authenticate(api: Api, body: Any, query: dict[str, Any] | None = None, *, base: str = MGMT) -> Reply:
    return await api.with_token(None).post("/authenticate", body, base=base,
                                           query={"method": "password"} if query is None else query)


def _assert_cause(reply: Reply, status: int, code: str, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    assert reply.error["code"] == code
    if field is not None:
        assert reply.error["cause"]["field"] == field
    assert "zt-session" not in reply.headers


@pytest.mark.parametrize("base", [MGMT, CLIENT])
async def test_password_login_answers_the_session_detail(anon: Api, controller: Controller, base: str) -> None:
    reply = await _authenticate(anon, {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD}, base=base)

    assert reply.status == 200
    data = reply.data
    assert reply.body["meta"] == {}
    assert reply.headers["zt-session"] == data["token"]
    assert reply.headers["expiration-seconds"] == "1800"
    assert reply.headers["expires-at"] == data["expiresAt"]
    assert reply.headers["ziti-instance-id"] == controller.instance_id
    with controller.store.read() as txn:
        admin_id = txn.meta("defaultAdminId")
        authenticator_id = txn.by_unique("authenticators", "username", ADMIN_USERNAME)
    assert data["identityId"] == admin_id
    assert data["identity"] == {"id": admin_id, "name": "Default Admin", "entity": "identities",
                                "_links": {"self": {"href": f"./identities/{admin_id}"}}}
    assert data["authenticatorId"] == authenticator_id
    assert data["authQueries"] == []
    assert data["isMfaRequired"] is False
    assert data["isMfaComplete"] is False
    assert data["configTypes"] == []
    assert data["expirationSeconds"] == 1800
    assert data["ipAddress"] == "<local>"
    assert data["cachedLastActivityAt"] == data["lastActivityAt"]
    assert parse_time(data["expiresAt"]) - parse_time(data["lastActivityAt"]) == pytest.approx(1800, abs=0.002)
    assert data["_links"] == {"self": {"href": f"./api-sessions/{data['id']}"}}
    for key in ("createdAt", "updatedAt", "tags"):
        assert key in data
    # The token works on both APIs.
    me = await anon.with_token(data["token"]).get("/current-identity", base=CLIENT)
    assert me.status == 200 and me.data["id"] == admin_id


async def test_method_is_required_and_must_be_known(anon: Api) -> None:
    body = {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD}
    _assert_cause(await _authenticate(anon, body, query={}), 400, "COULD_NOT_VALIDATE", "method")
    _assert_cause(await _authenticate(anon, body, query={"method": "telepathy"}), 400, "INVALID_AUTH_METHOD")


@pytest.mark.parametrize(("body", "field"), [
    (None, "auth"),
    ({"password": ADMIN_PASSWORD}, "username"),
    ({"username": ADMIN_USERNAME}, "password"),
    ({"username": "", "password": ADMIN_PASSWORD}, "username"),
    ({"username": 1234, "password": ADMIN_PASSWORD}, "username"),
    ({"username": "abc", "password": ADMIN_PASSWORD}, "username"),
    ({"username": "a" * 101, "password": ADMIN_PASSWORD}, "username"),
    ({"username": ADMIN_USERNAME, "password": "abcd"}, "password"),
    ({"username": ADMIN_USERNAME, "password": "p" * 101}, "password"),
])
async def test_bad_login_bodies_are_400_naming_the_field(anon: Api, body: Any, field: str) -> None:
    reply = await _authenticate(anon, body)
    _assert_cause(reply, 400, "COULD_NOT_VALIDATE", field)
    if field == "password" and isinstance((body or {}).get("password"), str):
        # The rejected password is never echoed back.
        assert body["password"] not in reply.raw.decode()


async def test_limits_are_inclusive(admin: Api) -> None:
    identity_id = await admin.create("/identities", {"name": "edge", "type": "User", "isAdmin": False})
    await admin.create("/authenticators", {"identityId": identity_id, "method": "updb", "username": "abcd",
                                           "password": "12345"})
    assert (await _authenticate(admin, {"username": "abcd", "password": "12345"})).status == 200


@pytest.mark.parametrize("body", [
    {"username": ADMIN_USERNAME, "password": "wrong-password"},
    {"username": "nobody-here", "password": ADMIN_PASSWORD},
])
async def test_wrong_credentials_are_401_invalid_auth(anon: Api, body: dict[str, str]) -> None:
    _assert_cause(await _authenticate(anon, body), 401, "INVALID_AUTH")


async def test_updb_refused_by_the_auth_policy_is_401(admin: Api) -> None:
    policy = {"name": "no-passwords",
              "primary": {"cert": {"allowed": True, "allowExpiredCerts": True},
                          "extJwt": {"allowed": False, "allowedSigners": []},
                          "updb": {"allowed": False, "minPasswordLength": 5, "requireSpecialChar": False,
                                   "requireNumberChar": False, "requireMixedCase": False, "maxAttempts": 0,
                                   "lockoutDurationMinutes": 0}},
              "secondary": {"requireTotp": False, "requireExtJwtSigner": None}}
    policy_id = await admin.create("/auth-policies", policy)
    identity_id, _ = await make_user(admin, "carol")
    assert (await admin.patch(f"/identities/{identity_id}", {"authPolicyId": policy_id})).status == 200

    _assert_cause(await _authenticate(admin, {"username": "carol", "password": "user-password"}), 401, "INVALID_AUTH")


async def test_config_types_keep_all_and_drop_unknown(anon: Api, controller: Controller) -> None:
    reply = await _authenticate(anon, {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD,
                                       "configTypes": ["all", "no-such-config-type", "all"]})
    assert reply.status == 200
    assert reply.data["configTypes"] == ["all"]
    stored = await anon.with_token(reply.data["token"]).get("/current-api-session")
    assert stored.data["configTypes"] == ["all"]


async def test_config_type_names_resolve_to_ids(admin: Api, controller: Controller) -> None:
    config_type_id = await admin.create("/config-types", {"name": "intercept.v9", "schema": {}})
    reply = await _authenticate(admin, {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD,
                                        "configTypes": ["intercept.v9", config_type_id, "all", "unknown"]})
    assert reply.status == 200
    assert reply.data["configTypes"] == [config_type_id, "all"]


async def test_current_api_session_and_logout(admin: Api) -> None:
    _, user = await make_user(admin, "dave")

    current = await user.get("/current-api-session")
    assert current.status == 200
    assert current.data["token"] == user.token
    assert current.data["identity"]["name"] == "dave"
    assert current.data["expirationSeconds"] == 1800

    logout = await user.delete("/current-api-session")
    assert logout.status == 200
    assert logout.body == {"data": {}, "meta": {}}
    for path in ("/current-api-session", "/current-identity"):
        after = await user.get(path)
        assert after.status == 401 and after.error["code"] == "UNAUTHORIZED"
    # The session row is gone too.
    assert (await admin.get(f"/api-sessions/{current.data['id']}")).status == 404


async def test_current_identity(admin: Api) -> None:
    identity_id, user = await make_user(admin, "erin")
    reply = await user.get("/current-identity")
    assert reply.status == 200
    assert reply.data["id"] == identity_id
    assert reply.data["name"] == "erin"
    assert reply.data["isAdmin"] is False


@pytest.mark.parametrize("token", [None, "", "not-a-uuid", "00000000-0000-0000-0000-000000000000"])
async def test_missing_or_unknown_tokens_are_401(anon: Api, token: str | None) -> None:
    reply = await anon.with_token(None).get("/current-identity", headers={"zt-session": token} if token else None)
    assert reply.status == 401
    assert reply.error["code"] == "UNAUTHORIZED"


async def test_admin_lists_and_filters_api_sessions(admin: Api) -> None:
    identity_id, user = await make_user(admin, "frank")
    await admin.login("frank", "user-password")

    everything = await admin.get("/api-sessions")
    assert everything.status == 200
    assert everything.body["meta"]["pagination"]["totalCount"] == 3  # the admin's and frank's two

    franks = await admin.get("/api-sessions", query={"filter": f'identityId = "{identity_id}"'})
    assert sorted(s["identityId"] for s in franks.data) == [identity_id, identity_id]
    # Another identity's token is never shown, not even to an admin: the store keeps only its digest.
    assert [s["token"] for s in franks.data] == ["", ""]
    mine = (await user.get("/current-api-session")).data
    assert mine["id"] in {s["id"] for s in franks.data}


async def test_admin_deletes_an_api_session_and_its_token_stops_working(admin: Api) -> None:
    _, user = await make_user(admin, "grace")
    session_id = (await user.get("/current-api-session")).data["id"]

    detail = await admin.get(f"/api-sessions/{session_id}")
    assert detail.status == 200 and detail.data["token"] == ""

    assert (await admin.delete(f"/api-sessions/{session_id}")).body == {"data": {}, "meta": {}}
    assert (await user.get("/current-identity")).status == 401
    gone = await admin.get(f"/api-sessions/{session_id}")
    assert gone.status == 404 and gone.error["code"] == "NOT_FOUND"
    assert (await admin.delete(f"/api-sessions/{session_id}")).status == 404


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api-sessions"),
    ("GET", "/api-sessions/{id}"),
    ("DELETE", "/api-sessions/{id}"),
    ("POST", "/identities/{identity}/disable"),
    ("POST", "/identities/{identity}/enable"),
])
async def test_admin_operations_are_401_for_non_admins(admin: Api, method: str, path: str) -> None:
    identity_id, user = await make_user(admin, "heidi")
    session_id = (await admin.get("/current-api-session")).data["id"]
    body = {"durationMinutes": 0} if path.endswith("disable") else None

    reply = await user.request(method, path.format(id=session_id, identity=identity_id), body)

    assert reply.status == 401
    assert reply.error["code"] == "UNAUTHORIZED"
    assert (await admin.get("/current-api-session")).status == 200  # the admin's session was not deleted
    assert (await user.get("/current-identity")).status == 200  # heidi was not disabled
