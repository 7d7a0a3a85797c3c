"""Event-driven revocation: whatever makes a session's service unreachable deletes the session at once.

Every case checks the affected session is gone on the very next request, and that sessions the change does not
affect stay.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.support import Api, make_user, totp
from tests.web.test_client_posture import MAC_BAD, MAC_OK, enrol_mfa, network, user


@dataclass
class Setup:
    """``guarded`` is behind a MAC check (policy ``mac_policy``), ``open`` behind a policy with no checks."""

    guarded: str
    open: str
    check: str
    mac_policy: str
    open_policy: str
    identity_id: str
    client: Api


async def setup(admin: Api) -> Setup:
    ids = await network(admin)
    open_service = await admin.create("/services", {"name": "open-svc", "encryptionRequired": True,
                                                    "roleAttributes": ["o"]})
    check = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                   "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    mac_policy = await admin.create("/service-policies", {
        "name": "p-mac", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"],
        "postureCheckRoles": ["#mac"]})
    open_policy = await admin.create("/service-policies", {
        "name": "p-open", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#o"]})
    identity_id, client = await user(admin)
    assert (await client.post("/posture-response", MAC_OK)).status == 201
    return Setup(ids["service"], open_service, check, mac_policy, open_policy, identity_id, client)


async def dial(client: Api, service_id: str) -> str:
    reply = await client.post("/sessions", {"serviceId": service_id})
    assert reply.status == 201, reply.body
    return str(reply.data["id"])


async def exists(admin: Api, session_id: str) -> bool:
    status = (await admin.get(f"/sessions/{session_id}")).status
    assert status in (200, 404)
    return status == 200


async def test_failing_posture_response_revokes_only_the_unreachable(admin: Api, controller: Controller,
                                                                     autojump_clock: trio.testing.MockClock) -> None:
    s = await setup(admin)
    guarded, open_session = await dial(s.client, s.guarded), await dial(s.client, s.open)
    _, other = await user_with_mac(admin)
    others = await dial(other, s.guarded)
    before = (await s.client.get("/current-api-session/service-updates")).data["lastChangeAt"]

    await trio.sleep(5)
    reported_at = controller.clock.now()
    assert (await s.client.post("/posture-response", MAC_BAD)).status == 201
    assert not await exists(admin, guarded)
    assert await exists(admin, open_session)
    assert await exists(admin, others)  # another identity's posture is its own
    after = (await s.client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    assert after == format_time(reported_at) and after > before
    assert (await other.get("/current-api-session/service-updates")).data["lastChangeAt"] < after

    refused = await s.client.post("/sessions", {"serviceId": s.guarded})
    assert refused.status == 409


async def user_with_mac(admin: Api) -> tuple[str, Api]:
    identity_id, api = await make_user(admin, "user2", roleAttributes=["u"])
    client = api.as_client()
    assert (await client.post("/posture-response", MAC_OK)).status == 201
    return identity_id, client


async def test_patching_a_check_so_it_fails_revokes(admin: Api) -> None:
    s = await setup(admin)
    guarded, open_session = await dial(s.client, s.guarded), await dial(s.client, s.open)
    reply = await admin.patch(f"/posture-checks/{s.check}", {"typeId": "MAC", "macAddresses": ["00-00-00-00-00-01"]})
    assert reply.status == 200
    assert not await exists(admin, guarded)
    assert await exists(admin, open_session)


async def test_patching_a_check_that_still_passes_keeps_the_session(admin: Api) -> None:
    s = await setup(admin)
    guarded = await dial(s.client, s.guarded)
    both = ["AA:BB:CC:DD:EE:FF", "00:00:00:00:00:01"]
    reply = await admin.patch(f"/posture-checks/{s.check}", {"typeId": "MAC", "macAddresses": both})
    assert reply.status == 200
    assert await exists(admin, guarded)


async def test_adding_a_failing_check_to_the_policy_revokes(admin: Api) -> None:
    s = await setup(admin)
    await admin.create("/posture-checks", {"name": "dom", "typeId": "DOMAIN", "roleAttributes": ["dom"],
                                           "domains": ["corp"]})
    guarded, open_session = await dial(s.client, s.guarded), await dial(s.client, s.open)
    reply = await admin.patch(f"/service-policies/{s.mac_policy}", {"postureCheckRoles": ["#mac", "@" + s.check,
                                                                                        "#dom"]})
    assert reply.status == 200
    # AllOf "#mac" and "#dom": no check has both, so only the @ entry selects: the MAC check still passes.
    assert await exists(admin, guarded)
    reply = await admin.patch(f"/service-policies/{s.mac_policy}", {"semantic": "AnyOf"})
    assert reply.status == 200
    assert not await exists(admin, guarded)
    assert await exists(admin, open_session)


async def test_removing_the_identity_role_attribute_revokes(admin: Api) -> None:
    s = await setup(admin)
    guarded, open_session = await dial(s.client, s.guarded), await dial(s.client, s.open)
    reply = await admin.patch(f"/identities/{s.identity_id}", {"roleAttributes": ["something-else"]})
    assert reply.status == 200
    assert not await exists(admin, guarded)
    assert not await exists(admin, open_session)
    assert (await s.client.post("/sessions", {"serviceId": s.open})).status == 404


async def test_deleting_the_policy_revokes(admin: Api) -> None:
    s = await setup(admin)
    guarded, open_session = await dial(s.client, s.guarded), await dial(s.client, s.open)
    assert (await admin.delete(f"/service-policies/{s.open_policy}")).status == 200
    assert not await exists(admin, open_session)
    assert await exists(admin, guarded)


async def test_a_second_policy_keeps_the_session_when_one_goes(admin: Api) -> None:
    s = await setup(admin)
    backup = await admin.create("/service-policies", {
        "name": "p-backup", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"]})
    guarded = await dial(s.client, s.guarded)
    assert (await admin.delete(f"/service-policies/{s.mac_policy}")).status == 200
    assert await exists(admin, guarded)
    assert (await admin.delete(f"/service-policies/{backup}")).status == 200
    assert not await exists(admin, guarded)


async def test_logout_ends_that_api_sessions_sessions_only(admin: Api) -> None:
    s = await setup(admin)
    first = await dial(s.client, s.open)
    second_client = (await admin.login("user1", "user-password")).as_client()
    second = await dial(second_client, s.open)
    assert second != first
    assert (await s.client.delete("/current-api-session")).status == 200
    assert (await s.client.get("/services")).status == 401
    assert not await exists(admin, first)
    assert await exists(admin, second)


async def test_admin_ending_an_api_session_ends_its_sessions(admin: Api) -> None:
    s = await setup(admin)
    session = await dial(s.client, s.open)
    api_session_id = (await s.client.get("/current-api-session")).data["id"]
    assert (await admin.delete(f"/api-sessions/{api_session_id}")).status == 200
    assert not await exists(admin, session)
    assert (await s.client.get("/sessions")).status == 401


async def test_admin_deletes_a_session(admin: Api) -> None:
    s = await setup(admin)
    session, kept = await dial(s.client, s.open), await dial(s.client, s.guarded)
    assert (await admin.delete(f"/sessions/{session}")).status == 200
    assert not await exists(admin, session)
    assert await exists(admin, kept)
    again = await admin.delete(f"/sessions/{session}")
    assert again.status == 404 and again.error["code"] == "NOT_FOUND"
    # A new request creates a new session.
    assert await dial(s.client, s.open) != session


async def test_client_sessions_are_the_callers_own(admin: Api) -> None:
    s = await setup(admin)
    mine = await dial(s.client, s.open)
    _, other = await user_with_mac(admin)
    theirs = await dial(other, s.open)
    # Another API session of the same identity sees the identity's sessions.
    same_identity = (await admin.login("user1", "user-password")).as_client()

    listed = await s.client.get("/sessions")
    assert listed.status == 200 and [x["id"] for x in listed.data] == [mine]
    assert [x["id"] for x in (await same_identity.get("/sessions")).data] == [mine]
    detail = await s.client.get(f"/sessions/{mine}")
    assert detail.status == 200
    assert detail.data["serviceId"] == s.open and detail.data["type"] == "Dial"
    assert (await same_identity.get(f"/sessions/{mine}")).status == 200

    for path in (f"/sessions/{theirs}", "/sessions/unknown"):
        reply = await s.client.get(path)
        assert reply.status == 404 and reply.error["code"] == "NOT_FOUND"
        assert (await s.client.delete(path)).status == 404
    assert await exists(admin, theirs)

    assert (await s.client.delete(f"/sessions/{mine}")).status == 200
    assert not await exists(admin, mine)
    assert (await s.client.get("/sessions")).data == []


async def test_many_sessions_revoked_together(admin: Api) -> None:
    s = await setup(admin)
    ids = [await admin.create("/services", {"name": f"extra{i}", "encryptionRequired": True,
                                            "roleAttributes": ["s"]}) for i in range(5)]
    sessions = [await dial(s.client, sid) for sid in ids]
    await admin.create("/service-policies", {
        "name": "p-bind", "type": "Bind", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"],
        "postureCheckRoles": ["#mac"]})
    binds = [(await s.client.post("/sessions", {"serviceId": sid, "type": "Bind"})).data["id"] for sid in ids[:2]]
    assert all(binds)
    assert (await s.client.post("/posture-response", MAC_BAD)).status == 201
    for session in sessions + binds:
        assert not await exists(admin, session)


async def test_shortening_an_mfa_timeout_revokes_at_the_new_deadline(admin: Api, controller: Controller,
                                                                     autojump_clock: trio.testing.MockClock) -> None:
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                                   "timeoutSeconds": 1000})
    await admin.create("/service-policies", {"name": "p-mfa", "type": "Dial", "semantic": "AllOf",
                                             "identityRoles": ["#u"], "serviceRoles": ["#s"],
                                             "postureCheckRoles": ["#mfa"]})
    _, client = await user(admin)
    secret = await enrol_mfa(client, controller)
    passed_at = controller.clock.now()
    session = await dial(client, ids["service"])
    await trio.sleep(500)
    assert (await admin.patch(f"/posture-checks/{check}", {"typeId": "MFA", "timeoutSeconds": 600})).status == 200
    assert await exists(admin, session)
    await trio.sleep(99.5)
    assert await exists(admin, session)
    await trio.sleep(0.5)
    # The deadline's work is done at this instant (no virtual time passes) before the request looks.
    await trio.testing.wait_all_tasks_blocked()
    assert controller.clock.now() == passed_at + 600
    assert not await exists(admin, session)

    # A timeout shorter than the time already passed revokes at once.
    code_session = await relogin_with_mfa(admin, controller, secret)
    fresh = await dial(code_session, ids["service"])
    await trio.sleep(100)
    assert (await admin.patch(f"/posture-checks/{check}", {"typeId": "MFA", "timeoutSeconds": 50})).status == 200
    assert not await exists(admin, fresh)


async def relogin_with_mfa(admin: Api, controller: Controller, secret: str) -> Api:
    """A new API session of user1 that passes MFA with a fresh TOTP."""
    await trio.sleep(31)  # a new TOTP step, so the code differs from the last one used
    client = (await admin.login("user1", "user-password")).as_client()
    code = totp(controller, secret)
    assert (await client.post("/authenticate/mfa", {"code": code})).status == 200
    return client


async def test_gaining_or_losing_access_moves_service_updates(admin: Api, controller: Controller,
                                                             autojump_clock: trio.testing.MockClock) -> None:
    """An SDK refreshes its services only when lastChangeAt moves: a policy that grants or takes away a service must
    move it, even when no session had to be revoked."""
    ids = await network(admin)
    _, client = await user(admin)
    logged_in = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    assert (await client.get("/services")).data == []

    await trio.sleep(10)
    granted_at = controller.clock.now()
    policy = await admin.create("/service-policies", {"name": "p", "type": "Dial", "semantic": "AllOf",
                                                      "identityRoles": ["#u"], "serviceRoles": ["#s"]})
    assert [s["id"] for s in (await client.get("/services")).data] == [ids["service"]]
    after_grant = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    assert after_grant != logged_in
    assert after_grant == format_time(granted_at)

    await trio.sleep(10)
    lost_at = controller.clock.now()
    assert (await admin.delete(f"/service-policies/{policy}")).status == 200
    assert (await client.get("/services")).data == []
    assert (await client.get("/current-api-session/service-updates")).data["lastChangeAt"] == format_time(lost_at)


async def test_a_service_leaving_the_policy_revokes(admin: Api) -> None:
    s = await setup(admin)
    guarded, open_session = await dial(s.client, s.guarded), await dial(s.client, s.open)
    assert (await admin.patch(f"/services/{s.open}", {"roleAttributes": []})).status == 200
    assert not await exists(admin, open_session)
    assert await exists(admin, guarded)
    assert (await admin.delete(f"/services/{s.guarded}")).status == 200
    assert not await exists(admin, guarded)
