"""The posture engine through the Client API: posture responses, session decisions, revocation, MFA timers.

Time-dependent cases run on Trio's virtual clock and assert exact instants.
"""

from __future__ import annotations

import trio

from controller.runtime.composition import Controller
from tests.support import Api, make_user, next_totp, totp
from tests.web.test_mfa import enrol


async def network(admin: Api) -> dict[str, str]:
    """An edge router reachable by every identity for every service, a service and a user with a password."""
    ids: dict[str, str] = {}
    ids["router"] = await admin.create("/edge-routers", {"name": "er1", "roleAttributes": ["er"]})
    await admin.create("/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                 "edgeRouterRoles": ["#all"]})
    await admin.create("/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf",
                                                         "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    ids["service"] = await admin.create("/services", {"name": "svc", "encryptionRequired": True,
                                                      "roleAttributes": ["s"]})
    return ids


async def dial_policy(admin: Api, name: str, checks: list[str], policy_type: str = "Dial") -> str:
    return await admin.create("/service-policies", {"name": name, "type": policy_type, "semantic": "AllOf",
                                                    "identityRoles": ["#u"], "serviceRoles": ["#s"],
                                                    "postureCheckRoles": checks})


async def user(admin: Api, name: str = "user1") -> tuple[str, Api]:
    identity_id, api = await make_user(admin, name, roleAttributes=["u"])
    return identity_id, api.as_client()


MAC_OK = {"id": "c", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]}
MAC_BAD = {"id": "c", "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]}


async def test_session_granted_refused_and_revoked_by_posture(admin: Api) -> None:
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                   "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    policy = await dial_policy(admin, "p-mac", ["#mac"])
    identity_id, client = await user(admin)

    refused = await client.post("/sessions", {"serviceId": ids["service"], "type": "Dial"})
    assert refused.status == 409
    assert refused.error["code"] == "INVALID_POSTURE"
    assert refused.error["cause"]["data"] == {policy: [{"id": check, "typeId": "MAC", "isPassing": False}]}
    failures = (await admin.get(f"/identities/{identity_id}/failed-service-requests")).data
    assert len(failures) == 1
    assert failures[0]["serviceId"] == ids["service"] and failures[0]["sessionType"] == "Dial"
    assert failures[0]["policyFailures"][0]["policyId"] == policy
    assert failures[0]["policyFailures"][0]["checks"][0]["expectedValue"] == ["aa-bb-cc-dd-ee-ff"]

    before = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    reply = await client.post("/posture-response", MAC_OK)
    assert reply.status == 201 and reply.data == {"services": []}
    granted = await client.post("/sessions", {"serviceId": ids["service"]})
    assert granted.status == 201, granted.body
    session_id = granted.data["id"]
    assert granted.data["type"] == "Dial" and granted.data["edgeRouters"][0]["id"] == ids["router"]
    assert (await admin.get(f"/sessions/{session_id}")).status == 200
    again = await client.post("/sessions", {"serviceId": ids["service"], "type": "Dial"})
    assert again.status == 201 and again.data["id"] == session_id  # idempotent per API session

    await trio.sleep(0.01)
    assert (await client.post("/posture-response", MAC_BAD)).status == 201
    assert (await admin.get(f"/sessions/{session_id}")).status == 404
    after = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    assert after > before
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    assert data["mac"]["addresses"] == ["11-22-33-44-55-66"]


async def test_policy_without_checks_always_passes_and_permissions_are_checked(admin: Api) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                           "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    await dial_policy(admin, "p-mac", ["#mac"])
    await dial_policy(admin, "p-open", [])
    _, client = await user(admin)
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 201
    bind = await client.post("/sessions", {"serviceId": ids["service"], "type": "Bind"})
    assert bind.status == 400
    assert bind.error["cause"]["field"] == "ServiceId"
    unknown = await client.post("/sessions", {"serviceId": "nope"})
    assert unknown.status == 404
    services = await client.get("/services")
    assert [s["id"] for s in services.data] == [ids["service"]]
    entry = services.data[0]
    assert entry["permissions"] == ["Dial"]
    by_policy = {q["policyType"] + ":" + str(q["isPassing"]): q for q in entry["postureQueries"]}
    assert set(by_policy) == {"Dial:False", "Dial:True"}


async def test_no_edge_routers_available(admin: Api) -> None:
    service = await admin.create("/services", {"name": "lonely", "encryptionRequired": True,
                                               "roleAttributes": ["s"]})
    await dial_policy(admin, "p", [])
    _, client = await user(admin)
    reply = await client.post("/sessions", {"serviceId": service})
    assert reply.status == 400
    assert reply.error["code"] == "NO_EDGE_ROUTERS_AVAILABLE"


async def test_posture_response_validation(admin: Api) -> None:
    _, client = await user(admin)
    mfa = await client.post("/posture-response", {"id": "x", "typeId": "MFA"})
    assert mfa.status == 400 and mfa.error["code"] == "COULD_NOT_PARSE_BODY"
    assert mfa.error["cause"]["message"] == 'invalid typeId value: "MFA"'
    multi = await client.post("/posture-response", {"id": "x", "typeId": "PROCESS_MULTI"})
    assert multi.error["code"] == "COULD_NOT_PARSE_BODY"
    missing = await client.post("/posture-response", {"id": "x"})
    assert missing.status == 400 and missing.error["cause"]["field"] == "typeId"
    os_missing = await client.post("/posture-response", {"id": "x", "typeId": "OS", "type": "Linux"})
    assert os_missing.error["cause"]["field"] == "version"
    bulk = await client.post("/posture-response-bulk", [MAC_OK, {"id": "d", "typeId": "DOMAIN", "domain": "corp"}])
    assert bulk.status == 201


async def enrol_mfa(client: Api, controller: Controller) -> str:
    """Enrol and verify MFA for the client's identity; returns the TOTP secret."""
    secret, _ = await enrol(client, controller)
    return secret


async def test_mfa_timeout_revokes_at_exactly_the_deadline(admin: Api, controller: Controller,
                                                           autojump_clock: trio.testing.MockClock) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                           "timeoutSeconds": 600})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    _, client = await user(admin)
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
    await enrol_mfa(client, controller)
    start = controller.clock.now()
    granted = await client.post("/sessions", {"serviceId": ids["service"]})
    assert granted.status == 201
    session_id = granted.data["id"]
    await trio.sleep(599.5)
    assert (await admin.get(f"/sessions/{session_id}")).status == 200
    await trio.sleep(0.5)
    # The deadline's work is done at this instant (no virtual time passes) before the request looks.
    await trio.testing.wait_all_tasks_blocked()
    assert controller.clock.now() == start + 600
    assert (await admin.get(f"/sessions/{session_id}")).status == 404
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409


async def test_wake_grace_period_and_new_mfa(admin: Api, controller: Controller,
                                             autojump_clock: trio.testing.MockClock) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                           "timeoutSeconds": -1, "promptOnWake": True, "promptOnUnlock": True})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    _, client = await user(admin)
    secret = await enrol_mfa(client, controller)
    session_id = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]
    await trio.sleep(1000)  # no timeout: still there
    assert (await admin.get(f"/sessions/{session_id}")).status == 200
    woke_at = controller.clock.now()
    woke = await client.post("/posture-response", {"id": "x", "typeId": "ENDPOINT_STATE", "woken": True})
    assert woke.data["services"] == [{"id": ids["service"], "name": "svc", "postureQueryType": "MFA",
                                      "timeout": -1, "timeoutRemaining": 300}]
    await trio.sleep(299)
    assert (await admin.get(f"/sessions/{session_id}")).status == 200
    await trio.sleep(1)
    # The deadline's work is done at this instant (no virtual time passes) before the request looks.
    await trio.testing.wait_all_tasks_blocked()
    assert controller.clock.now() == woke_at + 300
    assert (await admin.get(f"/sessions/{session_id}")).status == 404

    # A new MFA inside the grace period of an unlock keeps the session.
    code = totp(controller, secret)
    assert (await client.post("/authenticate/mfa", {"code": code})).status == 200
    session_id = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]
    await client.post("/posture-response", {"id": "x", "typeId": "ENDPOINT_STATE", "unlocked": True})
    await trio.sleep(100)
    await trio.sleep(1)  # step past the 30 s TOTP window so the next code differs from the last one
    code = totp(controller, secret)
    assert (await client.post("/authenticate/mfa", {"code": code})).status == 200
    await trio.sleep(400)
    assert (await admin.get(f"/sessions/{session_id}")).status == 200


async def test_login_with_mfa_is_partial_until_the_code(admin: Api, anon: Api, controller: Controller,
                                                        autojump_clock: trio.testing.MockClock) -> None:
    _, client = await user(admin)
    secret = await enrol_mfa(client, controller)
    partial = await anon.login("user1", "user-password")
    detail = (await partial.get("/current-api-session")).data
    assert detail["isMfaRequired"] is True and detail["isMfaComplete"] is False
    assert detail["authQueries"][0]["typeId"] == "MFA"
    assert (await partial.get("/current-identity")).status == 401
    assert (await partial.post("/authenticate/mfa", {"code": "000000"})).status == 400
    assert (await partial.post("/authenticate/mfa", {"code": await next_totp(controller, secret)})).status == 200
    assert (await partial.get("/current-identity")).status == 200
