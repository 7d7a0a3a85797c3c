"""Each event type from the action that causes it, in order, with its cause, through the API on Trio's virtual clock.

Every event read here is also held to the catalog (``tests/insight/events_support.py``): exactly its type's fields,
ids one apart.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from controller.authentication.throttle import GuessThrottles
from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.insight.events_support import mark, named, of_type, since
from tests.support import Api, make_user, next_totp, totp
from tests.web.test_client_posture import MAC_BAD, MAC_OK, dial_policy, network, user
from tests.web.test_mfa import enrol, secret_of, start, wrong


async def mac_setup(admin: Api) -> dict[str, str]:
    ids = await network(admin)
    ids["check"] = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                          "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    ids["policy"] = await dial_policy(admin, "p-mac", ["#mac"])
    return ids


async def admin_identity(admin: Api) -> str:
    return str((await admin.get("/current-identity")).data["id"])


async def test_login_and_logout_are_api_session_events(admin: Api, controller: Controller) -> None:
    identity_id, api = await make_user(admin, "alice")
    before = mark(controller)
    client = await api.login("alice", "user-password")
    created = since(controller, before)
    assert named(created) == ["edge.apiSessions.created"]
    session_id = str((await client.get("/current-api-session")).data["id"])
    assert created[0] | {"timestamp": None, "event_src_id": None} == {
        "event_id": before + 1, "namespace": "edge.apiSessions", "event_type": "created", "timestamp": None,
        "event_src_id": None, "id": session_id, "type": "legacy", "identity_id": identity_id,
        "ip_address": created[0]["ip_address"], "authenticator_id": created[0]["authenticator_id"]}
    assert created[0]["event_src_id"] == controller.instance_id

    middle = mark(controller)
    assert (await client.delete("/current-api-session")).status == 200
    ended = since(controller, middle)
    assert named(ended) == ["edge.apiSessions.deleted"]
    assert ended[0]["id"] == session_id and ended[0]["cause"] == {"code": "logout"}


async def test_an_idle_api_session_ends_by_expiry_at_its_deadline(admin: Api, controller: Controller,
                                                                  autojump_clock: MockClock) -> None:
    idle_id, _ = await make_user(admin, "idle")
    client = await admin.login("idle", "user-password")
    assert (await client.get("/current-identity")).status == 200
    last_use = controller.clock.now()
    before = mark(controller)
    await trio.sleep(controller.settings.effective_session_timeout + 1)
    ended = of_type(since(controller, before), "edge.apiSessions.deleted")
    idle = [e for e in ended if e["identity_id"] == idle_id]
    assert [e["cause"] for e in idle] == [{"code": "expiry"}, {"code": "expiry"}]  # make_user's login, and this one
    assert idle[0]["timestamp"] == format_time(last_use + controller.settings.effective_session_timeout)


async def test_a_refused_login_is_an_authentication_failure_without_its_secret(admin: Api,
                                                                               controller: Controller) -> None:
    identity_id, _ = await make_user(admin, "bobby", "right-password")
    before = mark(controller)
    refused = await admin.with_token(None).post("/authenticate", {"username": "bobby", "password": "wrong-password"},
                                                query={"method": "password"})
    assert refused.status == 401
    [failure] = since(controller, before)
    assert failure["namespace"] == "authentication" and failure["event_type"] == "fail"
    assert (failure["type"], failure["identity_id"], failure["success"]) == ("password", identity_id, False)
    assert failure["reason"].startswith("INVALID_AUTH")
    assert failure["auth_policy_id"] == "default" and failure["authenticator_id"]
    assert "wrong-password" not in str(failure) and "bobby" not in str(failure)

    unknown = await admin.with_token(None).post("/authenticate", {"username": "nobody", "password": "whatever1"},
                                                query={"method": "password"})
    assert unknown.status == 401
    [stranger] = since(controller, before + 1)
    assert (stranger["identity_id"], stranger["authenticator_id"]) == (None, None)


async def test_throttled_guesses_record_nothing(admin: Api, controller: Controller,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    await make_user(admin, "carol")
    before = mark(controller)
    for _ in range(controller.throttles.usernames.burst + 1):
        await admin.with_token(None).post("/authenticate", {"username": "carol", "password": "wrong-pass"},
                                          query={"method": "password"})
    events = since(controller, before)
    assert named(events) == ["authentication.fail"] * controller.throttles.usernames.burst


async def test_lockout_ends_api_sessions_and_revokes_their_sessions(admin: Api, controller: Controller,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GuessThrottles, "check_password", lambda self, username, address: None)
    policy = await admin.create("/auth-policies", {
        "name": "strict", "primary": {"cert": {"allowed": True, "allowExpiredCerts": True},
                                      "extJwt": {"allowed": True, "allowedSigners": []},
                                      "updb": {"allowed": True, "minPasswordLength": 5, "requireSpecialChar": False,
                                               "requireNumberChar": False, "requireMixedCase": False,
                                               "maxAttempts": 1, "lockoutDurationMinutes": 5}},
        "secondary": {"requireTotp": False, "requireExtJwtSigner": None}})
    ids = await network(admin)
    await dial_policy(admin, "open", [])
    identity_id, api = await make_user(admin, "dave", authPolicyId=policy, roleAttributes=["u"])
    client = api.as_client()
    session = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]
    before = mark(controller)
    for _ in range(2):
        await admin.with_token(None).post("/authenticate", {"username": "dave", "password": "nope-nope"},
                                          query={"method": "password"})
    events = since(controller, before)
    assert named(events) == ["authentication.fail", "entityChange.updated", "access.revoked",
                             "edge.apiSessions.deleted", "authentication.fail"]
    assert events[1]["entityId"] == identity_id and "disabledAt" in events[1]["changedFields"]
    assert events[1]["metadata"] == {"author.type": "controller"}
    assert events[2]["session_id"] == session and events[2]["cause"] == {"code": "identityLockedOut", "by": None}
    assert events[3]["cause"] == {"code": "lockout", "by": None}


async def test_admin_disable_revokes_with_the_admin_as_author(admin: Api, controller: Controller) -> None:
    ids = await network(admin)
    await dial_policy(admin, "open", [])
    identity_id, client = await user(admin, "erin")
    session = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]
    before = mark(controller)
    assert (await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": 5})).status == 200
    events = since(controller, before)
    assert named(events) == ["entityChange.updated", "access.revoked", "edge.apiSessions.deleted"]
    me = await admin_identity(admin)
    name = (await admin.get(f"/identities/{me}")).data["name"]
    assert events[0]["metadata"] == {"author.type": "identity", "author.id": me, "author.name": name,
                                     "author.apiSessionId": (await admin.get("/current-api-session")).data["id"]}
    assert events[1] | {"event_id": 0, "timestamp": "", "event_src_id": ""} == {
        "event_id": 0, "namespace": "access", "event_type": "revoked", "timestamp": "", "event_src_id": "",
        "identity_id": identity_id, "session_id": session, "api_session_id": events[2]["id"],
        "service_id": ids["service"], "session_type": "Dial", "cause": {"code": "identityDisabled", "by": me}}
    assert events[2]["cause"] == {"code": "disable", "by": me}


async def test_session_decisions_and_a_posture_revocation_name_the_failing_rule(admin: Api, controller: Controller,
                                                                                autojump_clock: MockClock) -> None:
    ids = await mac_setup(admin)
    identity_id, client = await user(admin)
    api_session = str((await client.get("/current-api-session")).data["id"])
    before = mark(controller)
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
    [denied] = since(controller, before)
    assert named([denied]) == ["posture.denied"]
    assert (denied["identity_id"], denied["api_session_id"], denied["service_id"], denied["session_type"]) == (
        identity_id, api_session, ids["service"], "Dial")
    [check] = denied["cause"]["checks"]
    assert denied["cause"]["code"] == "postureCheckFailed" and check["policyIds"] == [ids["policy"]]
    assert (check["postureCheckId"], check["postureCheckType"]) == (ids["check"], "MAC")
    assert (check["rule"], check["reported"], check["required"]) == ("macNotReported", None, ["aa-bb-cc-dd-ee-ff"])

    assert (await client.post("/posture-response", MAC_OK)).status == 201
    middle = mark(controller)
    granted = await client.post("/sessions", {"serviceId": ids["service"]})
    events = since(controller, middle)
    assert named(events) == ["edge.sessions.created"]  # the granted decision: the session and its policies
    assert (events[0]["id"], events[0]["identity_id"], events[0]["service_id"], events[0]["session_type"]) == (
        granted.data["id"], identity_id, ids["service"], "Dial")
    assert events[0]["service_policy_ids"] == [ids["policy"]]

    later = mark(controller)
    assert (await client.post("/posture-response", MAC_BAD)).status == 201
    [revoked] = since(controller, later)
    assert named([revoked]) == ["access.revoked"] and revoked["session_id"] == granted.data["id"]
    assert revoked["cause"]["code"] == "postureCheckFailed"
    [check] = revoked["cause"]["checks"]
    assert (check["rule"], check["reported"]) == ("macAddress", ["11-22-33-44-55-66"])


async def test_an_os_failure_names_the_reported_version_and_the_range(admin: Api, controller: Controller) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "win11", "typeId": "OS", "roleAttributes": ["os"],
                                           "operatingSystems": [{"type": "Windows", "versions": [">=10.0.22000"]}]})
    await dial_policy(admin, "p-os", ["#os"])
    _, client = await user(admin)
    await client.post("/posture-response", {"id": "os", "typeId": "OS", "type": "Windows", "version": "10.0.19045",
                                            "build": "19045"})
    before = mark(controller)
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
    [denied] = since(controller, before)
    [check] = denied["cause"]["checks"]
    assert (check["rule"], check["reported"]) == ("osVersion", {"type": "Windows", "version": "10.0.19045",
                                                                 "build": "19045"})
    assert check["required"] == [{"type": "Windows", "versions": [">=10.0.22000"]}]


async def mfa_service(admin: Api, **check: Any) -> tuple[dict[str, str], str]:
    ids = await network(admin)
    check_id = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                                      **check})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    return ids, check_id


async def test_an_mfa_timeout_revocation_carries_the_deadline_instant(admin: Api, controller: Controller,
                                                                      autojump_clock: MockClock) -> None:
    ids, check_id = await mfa_service(admin, timeoutSeconds=600)
    identity_id, client = await user(admin)
    await enrol(client, controller)
    api_session = str((await client.get("/current-api-session")).data["id"])
    passed = (await controller.engine.state(identity_id)).sessions[api_session].mfa.passed_mfa_at
    assert passed is not None
    session = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]
    before = mark(controller)
    await trio.sleep(601)
    events = since(controller, before)
    [revoked] = of_type(events, "access.revoked")
    assert revoked["session_id"] == session
    cause = revoked["cause"]
    assert (cause["code"], cause["at"], cause["postureCheckId"], cause["timeoutSeconds"]) == (
        "mfaTimeout", format_time(passed + 600), check_id, 600)
    assert revoked["timestamp"] == format_time(passed + 600)  # revoked at that very instant
    assert cause["checks"][0]["rule"] == "mfaTimedOut" and cause["checks"][0]["at"] == cause["at"]


async def test_a_wake_grace_that_runs_out_is_the_cause(admin: Api, controller: Controller,
                                                       autojump_clock: MockClock) -> None:
    ids, _ = await mfa_service(admin, timeoutSeconds=-1, promptOnWake=True)
    _, client = await user(admin)
    await enrol(client, controller)
    await client.post("/sessions", {"serviceId": ids["service"]})
    await trio.sleep(10)
    woken = controller.clock.now()
    assert (await client.post("/posture-response", {"id": "x", "typeId": "ENDPOINT_STATE", "woken": True})).status \
        == 201
    before = mark(controller)
    await trio.sleep(301)
    [revoked] = of_type(since(controller, before), "access.revoked")
    assert revoked["cause"] | {"checks": None} == {"code": "mfaGraceEnded", "event": "wake",
                                                   "at": format_time(woken + 300),
                                                   "postureCheckId": revoked["cause"]["postureCheckId"],
                                                   "checks": None}


async def test_mfa_events_never_carry_the_code(admin: Api, controller: Controller,
                                               autojump_clock: MockClock) -> None:
    ids, _ = await mfa_service(admin, timeoutSeconds=-1)
    identity_id, client = await user(admin)
    api_session = str((await client.get("/current-api-session")).data["id"])
    detail = await start(client)
    secret = secret_of(detail)
    before = mark(controller)
    code = totp(controller, secret)
    assert (await client.post("/current-identity/mfa/verify", {"code": code})).status == 200
    events = since(controller, before)
    assert named(events) == ["mfa.enrolled", "mfa.passed"]
    assert events[1]["method"] == "totp" and events[1]["api_session_id"] == api_session
    session = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]

    middle = mark(controller)
    bad = wrong(controller, secret)
    assert (await client.post("/authenticate/mfa", {"code": bad})).status == 400
    assert (await client.post("/authenticate/mfa", {"code": detail["recoveryCodes"][0]})).status == 200
    events = since(controller, middle)
    assert named(events) == ["mfa.failed", "mfa.passed"]
    assert events[0] | {"event_id": 0, "timestamp": "", "event_src_id": ""} == {
        "event_id": 0, "namespace": "mfa", "event_type": "failed", "timestamp": "", "event_src_id": "",
        "identity_id": identity_id, "api_session_id": api_session, "operation": "authenticate",
        "reason": "MFA_INVALID_TOKEN", "locked_out": False}
    assert events[1]["method"] == "recoveryCode"
    text = str(events)
    assert bad not in text and detail["recoveryCodes"][0] not in text and secret not in text

    later = mark(controller)
    code = await next_totp(controller, secret)
    assert (await client.delete("/current-identity/mfa", headers={"mfa-validation-code": code})).status == 200
    events = since(controller, later)
    assert named(events) == ["mfa.removed", "access.revoked"]
    assert (events[0]["by"], events[0]["verified"]) == ("self", True)
    assert events[1]["session_id"] == session and events[1]["cause"]["code"] == "mfaRemoved"
    assert code not in str(events)

    await start(client)
    last = mark(controller)
    assert (await admin.delete(f"/identities/{identity_id}/mfa")).status == 200
    [removed] = since(controller, last)
    assert (removed["event_type"], removed["by"], removed["verified"], removed["api_session_id"]) == (
        "removed", "admin", False, None)


async def test_policy_and_role_changes_are_named_in_revocations(admin: Api, controller: Controller) -> None:
    ids = await network(admin)
    policy = await dial_policy(admin, "open", [])
    identity_id, client = await user(admin)
    await client.post("/sessions", {"serviceId": ids["service"]})
    before = mark(controller)
    assert (await admin.patch(f"/identities/{identity_id}", {"roleAttributes": []})).status == 200
    events = since(controller, before)
    assert named(events) == ["entityChange.updated", "access.revoked"]
    assert events[0]["changedFields"] == ["roleAttributes"]
    assert events[1]["cause"] == {"code": "noPolicy", "reason": "roleChange"}

    assert (await admin.patch(f"/identities/{identity_id}", {"roleAttributes": ["u"]})).status == 200
    await client.post("/sessions", {"serviceId": ids["service"]})
    middle = mark(controller)
    assert (await admin.delete(f"/service-policies/{policy}")).status == 200
    events = since(controller, middle)
    assert named(events) == ["entityChange.deleted", "access.revoked"]
    assert events[0]["entityType"] == "service-policies" and events[0]["entityId"] == policy
    assert events[1]["cause"] == {"code": "noPolicy", "reason": "policyChange"}


async def test_entity_changes_name_the_entity_the_fields_and_the_author(admin: Api, controller: Controller) -> None:
    me = await admin_identity(admin)
    before = mark(controller)
    service = await admin.create("/services", {"name": "wiki", "encryptionRequired": True})
    assert (await admin.patch(f"/services/{service}", {"roleAttributes": ["intranet"]})).status == 200
    assert (await admin.delete(f"/services/{service}")).status == 200
    events = since(controller, before)
    assert named(events) == ["entityChange.created", "entityChange.updated", "entityChange.deleted"]
    for event in events:
        assert (event["entityType"], event["entityId"], event["eventId"]) == ("services", service,
                                                                             str(event["event_id"]))
        assert event["metadata"]["author.id"] == me and event["metadata"]["author.type"] == "identity"
    assert events[1]["changedFields"] == ["roleAttributes"]


async def test_a_write_that_fails_records_no_event_and_no_id(admin: Api, controller: Controller) -> None:
    await admin.create("/services", {"name": "taken", "encryptionRequired": True})
    before = mark(controller)
    assert (await admin.post("/services", {"name": "taken", "encryptionRequired": True})).status == 400
    assert mark(controller) == before
    await admin.create("/services", {"name": "next", "encryptionRequired": True})
    assert [e["event_id"] for e in since(controller, before)] == [before + 1]
