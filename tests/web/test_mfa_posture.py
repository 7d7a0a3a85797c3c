"""MFA login, partially authenticated sessions, and what MFA does to posture, through HTTP (behaviour note §3.1,
§3.4, §8.2-8.3).

A login of an identity with verified MFA (or under an auth policy requiring TOTP) is partial until
``POST /authenticate/mfa``; TOTP codes are accepted for the controller clock's 30-second step and one step either
side, each step once per identity, so a test needing another good code moves Trio's virtual clock to the next step.
Verifying an enrolment or ``POST /authenticate/mfa`` (TOTP or recovery code) passes MFA posture for that API session;
removing one's own MFA takes it from every API session of the identity at once (their Dial sessions are revoked and
new ones refused); an administrator's removal leaves the sessions that already passed alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from trio.testing import MockClock

from controller.runtime.composition import Controller
from tests.support import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    CLIENT,
    TOTP_STEP_SECONDS,
    Api,
    make_settings,
    next_totp,
    start_controller,
    totp,
)
from tests.web.test_client_posture import dial_policy, network
from tests.web.test_client_posture import user as posture_user
from tests.web.test_mfa import AUTH_QUERY, BASES, accepted, assert_error, enrol, secret_of, start, user, wrong
from web.app import create_app


async def mfa_network(admin: Api) -> dict[str, str]:
    """The network of the posture tests with one Dial policy requiring an MFA check without timeout."""
    ids = await network(admin)
    ids["check"] = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                                          "timeoutSeconds": -1})
    ids["policy"] = await dial_policy(admin, "p-mfa", ["#mfa"])
    return ids


async def api_session_id(client: Api) -> str:
    return str((await client.get("/current-api-session")).data["id"])


async def passed_mfa(admin: Api, identity_id: str, client: Api) -> Any:
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    entry = data["apiSessionPostureData"][await api_session_id(client)]["mfa"]
    return entry["passedMfa"]


async def dial(client: Api, service: str) -> Any:
    return await client.post("/sessions", {"serviceId": service, "type": "Dial"})


async def test_verify_and_mfa_login_pass_mfa_posture(admin: Api, controller: Controller,
                                                     autojump_clock: MockClock) -> None:
    ids = await mfa_network(admin)
    identity_id, client = await posture_user(admin)
    refused = await dial(client, ids["service"])
    assert refused.status == 409 and refused.error["code"] == "INVALID_POSTURE"
    assert refused.error["cause"]["data"] == {ids["policy"]: [{"id": ids["check"], "typeId": "MFA",
                                                               "isPassing": False}]}
    detail = await start(client)
    assert (await dial(client, ids["service"])).status == 409  # a started enrolment is not MFA
    assert await passed_mfa(admin, identity_id, client) is False

    secret = secret_of(detail)
    assert (await client.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})).status == 200
    assert await passed_mfa(admin, identity_id, client) is True
    assert (await dial(client, ids["service"])).status == 201

    # A new login is partial: it must prove MFA before anything else, then passes posture on its own.
    second = await client.login("user1", "user-password")
    assert (await dial(second, ids["service"])).status == 401
    assert await passed_mfa(admin, identity_id, second) is False
    assert (await second.post("/authenticate/mfa", {"code": await next_totp(controller, secret)})).status == 200
    assert await passed_mfa(admin, identity_id, second) is True
    assert (await dial(second, ids["service"])).status == 201

    # A recovery code does the same, once.
    third = await client.login("user1", "user-password")
    assert (await third.post("/authenticate/mfa", {"code": detail["recoveryCodes"][0]})).status == 200
    assert await passed_mfa(admin, identity_id, third) is True
    assert (await dial(third, ids["service"])).status == 201
    fourth = await client.login("user1", "user-password")
    reused = await fourth.post("/authenticate/mfa", {"code": detail["recoveryCodes"][0]})
    assert reused.status == 400 and reused.error["code"] == "MFA_INVALID_TOKEN"
    assert await passed_mfa(admin, identity_id, fourth) is False


async def test_removing_own_mfa_revokes_and_refuses_sessions(admin: Api, controller: Controller,
                                                             autojump_clock: MockClock) -> None:
    ids = await mfa_network(admin)
    identity_id, client = await posture_user(admin)
    detail = await start(client)
    secret = secret_of(detail)
    await client.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})
    other = await client.login("user1", "user-password")
    assert (await other.post("/authenticate/mfa", {"code": await next_totp(controller, secret)})).status == 200
    sessions = [(await dial(c, ids["service"])).data["id"] for c in (client, other)]
    for session_id in sessions:
        assert (await admin.get(f"/sessions/{session_id}")).status == 200
    before = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]

    code = await next_totp(controller, secret)
    removed = await client.delete("/current-identity/mfa", headers={"mfa-validation-code": code})
    assert removed.status == 200
    # Revoked by the time the removal is answered.
    for session_id in sessions:
        assert (await admin.get(f"/sessions/{session_id}")).status == 404
    assert (await client.get("/current-api-session/service-updates")).data["lastChangeAt"] > before
    for c in (client, other):
        refused = await dial(c, ids["service"])
        assert refused.status == 409 and refused.error["code"] == "INVALID_POSTURE"
        assert await passed_mfa(admin, identity_id, c) is False
        assert (await c.get("/current-identity")).data["isMfaEnabled"] is False

    # Enrolling again restores access for the session that verifies.
    again = await start(client)
    await client.post("/current-identity/mfa/verify", {"code": totp(controller, secret_of(again))})
    assert (await dial(client, ids["service"])).status == 201
    assert (await dial(other, ids["service"])).status == 409


async def test_removing_a_pending_enrolment_changes_no_posture(admin: Api, controller: Controller) -> None:
    ids = await mfa_network(admin)
    identity_id, client = await posture_user(admin)
    await enrol(client, controller)
    # Admin removal, then a new pending enrolment removed by the identity itself: the pass from the verify stays.
    assert (await admin.delete(f"/identities/{identity_id}/mfa")).status == 200
    await start(client)
    assert (await client.delete("/current-identity/mfa")).status == 200
    assert await passed_mfa(admin, identity_id, client) is True
    assert (await dial(client, ids["service"])).status == 201


async def test_admin_removal_keeps_existing_sessions_passing(admin: Api, controller: Controller) -> None:
    ids = await mfa_network(admin)
    identity_id, client = await posture_user(admin)
    secret, _ = await enrol(client, controller)
    session_id = (await dial(client, ids["service"])).data["id"]

    assert (await admin.delete(f"/identities/{identity_id}/mfa")).status == 200
    assert (await admin.get(f"/sessions/{session_id}")).status == 200
    assert await passed_mfa(admin, identity_id, client) is True
    assert (await dial(client, ids["service"])).status == 201
    # A change of the check re-evaluates the identity's sessions: the MFA pass still holds.
    renamed = await admin.patch(f"/posture-checks/{ids['check']}", {"typeId": "MFA", "name": "mfa-renamed"})
    assert renamed.status == 200
    assert (await admin.get(f"/sessions/{session_id}")).status == 200

    # A new API session has no MFA to prove any more: it is complete at once, but never passes the check.
    fresh = await client.login("user1", "user-password")
    assert (await fresh.get("/current-api-session")).data["isMfaRequired"] is False
    refused = await dial(fresh, ids["service"])
    assert refused.status == 409 and refused.error["code"] == "INVALID_POSTURE"
    not_enrolled = await fresh.post("/authenticate/mfa", {"code": totp(controller, secret)})
    assert not_enrolled.status == 409 and not_enrolled.error["code"] == "MFA_NOT_ENROLLED"


async def test_removal_is_answered_after_the_revocation_commits(tmp_path: Path, nursery: trio.Nursery) -> None:
    """With commits in worker threads (as in production) the revocation would still be in flight when a removal
    that merely queued it is answered; the answer waits for it."""
    controller = await start_controller(make_settings(tmp_path, worker_threads=True), nursery)
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    ids = await mfa_network(admin)
    _, client = await posture_user(admin)
    secret, _ = await enrol(client, controller)
    session_id = (await dial(client, ids["service"])).data["id"]
    # Enrolment spent the current step, so the removal brings the next one's (within the window). Worker threads
    # rule out the virtual clock (it would jump while a commit runs in a thread), hence no sleep to the next step.
    removed = await client.delete("/current-identity/mfa", headers={"mfa-validation-code": totp(controller, secret, 1)})
    assert removed.status == 200
    assert (await admin.get(f"/sessions/{session_id}")).status == 404


# MFA login ---------------------------------------------------------------------------------------------------------

@BASES
async def test_authenticate_mfa(admin: Api, controller: Controller, base: str, autojump_clock: MockClock) -> None:
    _, api = await user(admin, base)
    path = "/authenticate/mfa"
    assert_error(await api.post(path, {"code": "123456"}), 409, "MFA_NOT_ENROLLED")
    detail = await start(api)
    # A pending enrolment is not an enrolment.
    assert_error(await api.post(path, {"code": totp(controller, secret_of(detail))}), 409, "MFA_NOT_ENROLLED")
    secret = secret_of(detail)
    await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret)})
    codes = detail["recoveryCodes"]

    assert_error(await api.post(path), 400, "COULD_NOT_VALIDATE", "mfaAuth")
    assert_error(await api.post(path, {"code": None}), 400, "COULD_NOT_VALIDATE", "code")
    for code in ("", wrong(controller, secret), "12345", codes[0].lower()):
        assert_error(await api.post(path, {"code": code}), 400, "MFA_INVALID_TOKEN")
    # Repeatable, with the code of a new step each time: a step's code passes once (the reference replays it).
    code = await next_totp(controller, secret)
    reply = await api.post(path, {"code": code})
    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    assert_error(await api.post(path, {"code": code}), 400, "MFA_INVALID_TOKEN")
    reply = await api.post(path, {"code": await next_totp(controller, secret)})
    assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    assert (await api.post(path, {"code": codes[0]})).status == 200
    assert_error(await api.post(path, {"code": codes[0]}), 400, "MFA_INVALID_TOKEN")  # consumed
    assert (await api.post(path, {"code": codes[1]})).status == 200
    left = (await api.get("/current-identity/mfa/recovery-codes",
                          headers={"mfa-validation-code": await next_totp(controller, secret)})).data["recoveryCodes"]
    assert left == codes[2:]


@BASES
async def test_login_with_verified_mfa_is_partial_until_the_code(admin: Api, controller: Controller, base: str,
                                                                 autojump_clock: MockClock) -> None:
    _, api = await user(admin, base)
    secret, codes = await enrol(api, controller)
    login = await api.with_token(None).post("/authenticate", {"username": "user1", "password": "user-password"},
                                            query={"method": "password"})
    assert login.status == 200
    assert login.data["isMfaRequired"] is True and login.data["isMfaComplete"] is False
    assert login.data["authQueries"] == [AUTH_QUERY]
    partial = api.with_token(login.data["token"])
    code = await next_totp(controller, secret)  # enrolment spent the step it happened in

    # What a partial session may do...
    assert (await partial.get("/current-api-session")).data["authQueries"] == [AUTH_QUERY]
    assert (await partial.get("/current-identity/mfa")).data["isVerified"] is True
    assert_error(await partial.post("/current-identity/mfa"), 409, "MFA_EXISTS")
    assert_error(await partial.post("/current-identity/mfa/verify", {"code": code}), 404, "NOT_FOUND")
    assert_error(await partial.get("/current-identity/mfa/qr-code"), 404, "NOT_FOUND")
    # ...and everything else is 401, even with a valid code.
    header = {"mfa-validation-code": code}
    refused: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/current-identity", {}), ("DELETE", "/current-identity/mfa", {"headers": header}),
        ("GET", "/current-identity/mfa/recovery-codes", {"headers": header}),
        ("POST", "/current-identity/mfa/recovery-codes", {"json": {"code": code}})]
    if base == CLIENT:
        refused += [("GET", "/services", {}), ("POST", "/sessions", {"json": {"serviceId": "x"}}),
                    ("GET", "/current-api-session/service-updates", {}),
                    ("POST", "/posture-response", {"json": {"id": "x", "typeId": "DOMAIN", "domain": "d"}})]
    else:
        refused += [("GET", "/identities", {}), ("GET", "/api-sessions", {})]
    for method, path, kw in refused:
        assert_error(await partial.request(method, path, **kw), 401, "UNAUTHORIZED")
    assert (await partial.get("/current-identity/mfa")).data["isVerified"] is True  # the enrolment is untouched

    assert_error(await partial.post("/authenticate/mfa", {"code": wrong(controller, secret)}), 400,
                 "MFA_INVALID_TOKEN")
    # None of the refusals spent the code.
    assert (await partial.post("/authenticate/mfa", {"code": code})).status == 200
    detail = (await partial.get("/current-api-session")).data
    assert detail["isMfaRequired"] is True and detail["isMfaComplete"] is True and detail["authQueries"] == []
    assert (await partial.get("/current-identity")).data["isMfaEnabled"] is True

    # A recovery code completes a login too, and a partial session can log out.
    other = await api.login("user1", "user-password")
    assert (await other.post("/authenticate/mfa", {"code": codes[3]})).status == 200
    assert (await other.get("/current-identity")).status == 200
    third = await api.login("user1", "user-password")
    assert (await third.delete("/current-api-session")).status == 200
    assert_error(await third.get("/current-api-session"), 401, "UNAUTHORIZED")


@BASES
async def test_policy_requiring_totp_lets_a_partial_session_enrol(admin: Api, controller: Controller,
                                                                  base: str) -> None:
    policy = {"name": "totp", "primary": {
        "cert": {"allowed": False, "allowExpiredCerts": False}, "extJwt": {"allowed": False, "allowedSigners": []},
        "updb": {"allowed": True, "minPasswordLength": 5, "requireSpecialChar": False, "requireNumberChar": False,
                 "requireMixedCase": False, "maxAttempts": 0, "lockoutDurationMinutes": 0}},
        "secondary": {"requireTotp": True, "requireExtJwtSigner": None}}
    policy_id = await admin.create("/auth-policies", policy)
    _, plain = await user(admin, base)
    identity_id = (await plain.get("/current-identity")).data["id"]
    assert (await admin.patch(f"/identities/{identity_id}", {"authPolicyId": policy_id})).status == 200

    api = await plain.login("user1", "user-password")
    session = (await api.get("/current-api-session")).data
    assert session["isMfaRequired"] is True and session["isMfaComplete"] is False
    assert session["authQueries"] == [AUTH_QUERY]
    assert_error(await api.get("/current-identity"), 401, "UNAUTHORIZED")
    assert_error(await api.post("/authenticate/mfa", {"code": "123456"}), 409, "MFA_NOT_ENROLLED")
    detail = await start(api)
    qr = await api.get("/current-identity/mfa/qr-code")
    assert qr.status == 200 and qr.raw[:8] == b"\x89PNG\r\n\x1a\n"
    assert_error(await api.get("/current-identity"), 401, "UNAUTHORIZED")
    assert (await api.post("/current-identity/mfa/verify", {"code": totp(controller, secret_of(detail))})).status == 200
    session = (await api.get("/current-api-session")).data
    assert session["isMfaComplete"] is True and session["authQueries"] == []
    assert (await api.get("/current-identity")).data["isMfaEnabled"] is True


async def test_totp_window_is_one_step_either_side_and_each_step_passes_once(admin: Api, controller: Controller,
                                                                             autojump_clock: MockClock) -> None:
    _, api = await user(admin, CLIENT)
    secret, _ = await enrol(api, controller)
    path = "/authenticate/mfa"
    # Four steps after enrolment the step it spent is older than step -2: only the window can refuse that one.
    await trio.sleep(4 * TOTP_STEP_SECONDS)
    codes = {steps: totp(controller, secret, steps) for steps in range(-2, 3)}
    assert not {codes[-2], codes[2]} & accepted(controller, secret)  # a refusal cannot be a lucky match

    for steps in (-2, 2):
        assert_error(await api.post(path, {"code": codes[steps]}), 400, "MFA_INVALID_TOKEN")
    for steps in (-1, 0, 1):  # oldest first: a step at or before the last one accepted is refused
        reply = await api.post(path, {"code": codes[steps]})
        assert reply.status == 200 and reply.body == {"data": {}, "meta": {}}
    # Each step once: the last code accepted is not accepted again, nor one of an earlier step in the window.
    for steps in (1, 0):
        assert_error(await api.post(path, {"code": codes[steps]}), 400, "MFA_INVALID_TOKEN")

    await trio.sleep(TOTP_STEP_SECONDS)  # the code of step +2 is now the +1 one: its refusal was the window's
    assert (await api.post(path, {"code": codes[2]})).status == 200
