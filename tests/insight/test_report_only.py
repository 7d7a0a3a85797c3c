"""Report-only posture checks (a table of check types x passing/failing x enforcing/report-only), switching one to
enforcing, and the access explanation against the session decision for every case, MFA grace periods included."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.insight.events_support import mark, of_type, since
from tests.support import Api
from tests.web.test_client_posture import dial_policy, network, user
from tests.web.test_mfa import enrol

GOOD_HASH, BAD_HASH = "a" * 64, "b" * 64
# Per type: the check's own fields, what a passing endpoint reports, what a failing one reports (MFA: see below).
TABLE: dict[str, tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]] = {
    "OS": ({"operatingSystems": [{"type": "Linux", "versions": [">=5.0.0"]}]},
           [{"typeId": "OS", "type": "Linux", "version": "6.1.0"}],
           [{"typeId": "OS", "type": "Linux", "version": "4.19.0"}]),
    "MAC": ({"macAddresses": ["aa-bb-cc-dd-ee-ff"]}, [{"typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]}],
            [{"typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]}]),
    "DOMAIN": ({"domains": ["corp"]}, [{"typeId": "DOMAIN", "domain": "corp"}],
               [{"typeId": "DOMAIN", "domain": "home"}]),
    "PROCESS": ({"process": {"osType": "Linux", "path": "/usr/bin/agent", "hashes": [GOOD_HASH]}},
                [{"typeId": "PROCESS", "path": "/usr/bin/agent", "isRunning": True, "hash": GOOD_HASH}],
                [{"typeId": "PROCESS", "path": "/usr/bin/agent", "isRunning": True, "hash": BAD_HASH}]),
    "PROCESS_MULTI": ({"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/usr/bin/agent",
                                                           "hashes": [GOOD_HASH]}]},
                      [{"typeId": "PROCESS", "path": "/usr/bin/agent", "isRunning": True, "hash": GOOD_HASH}],
                      [{"typeId": "PROCESS", "path": "/usr/bin/agent", "isRunning": False, "hash": GOOD_HASH}]),
    "MFA": ({"timeoutSeconds": -1}, [], []),  # passing: MFA passed on the session; failing: none
}


async def explained(admin: Api, identity_id: str, service_id: str) -> dict[str, Any]:
    reply = await admin.get(f"/identities/{identity_id}/access/{service_id}")
    assert reply.status == 200, reply.body
    return dict(reply.data)


def dial(explanation: dict[str, Any]) -> dict[str, Any]:
    return dict(explanation["sessionTypes"][0])


async def report(client: Api, check_id: str, responses: list[dict[str, Any]]) -> None:
    if responses:
        reply = await client.post("/posture-response-bulk", [{"id": check_id, **r} for r in responses])
        assert reply.status == 201, reply.body


@pytest.mark.parametrize("type_id", list(TABLE))
async def test_report_only_checks_never_deny(type_id: str, admin: Api, controller: Controller,
                                            autojump_clock: MockClock) -> None:
    fields, good, bad = TABLE[type_id]
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "c", "typeId": type_id, "roleAttributes": ["c"],
                                                   **fields})
    assert (await admin.get(f"/posture-checks/{check}")).data["reportOnly"] is False
    await dial_policy(admin, "p", ["#c"])
    passing_id, passing = await user(admin, "passing")
    failing_id, failing = await user(admin, "failing")
    await report(passing, check, good)
    await report(failing, check, bad)
    if type_id == "MFA":
        await enrol(passing, controller)
    for report_only in (False, True):
        switched = await admin.patch(f"/posture-checks/{check}", {"typeId": type_id, "reportOnly": report_only})
        assert switched.status == 200
        assert (await admin.get(f"/posture-checks/{check}")).data["reportOnly"] is report_only
        for identity_id, client, passes in ((passing_id, passing, True), (failing_id, failing, False)):
            answer = dial(await explained(admin, identity_id, ids["service"]))
            before = mark(controller)
            reply = await client.post("/sessions", {"serviceId": ids["service"]})
            granted = passes or report_only
            case = (type_id, report_only, passes)
            assert reply.status == (201 if granted else 409), case
            assert answer["code"] == ("GRANTED" if granted else "INVALID_POSTURE"), case
            [checked] = answer["policies"][0]["checks"]
            assert (checked["passing"], checked["reportOnly"]) == (passes, report_only), case
            would = of_type(since(controller, before), "posture.wouldDeny")
            assert len(would) == (1 if report_only and not passes else 0), case
            if would:
                assert would[0]["session_id"] == reply.data["id"] and would[0]["decision"] == "request"
                assert [c["postureCheckId"] for c in would[0]["checks"]] == [check]
            if granted:
                assert (await admin.delete(f"/sessions/{reply.data['id']}")).status == 200


async def test_switching_to_enforcing_revokes_before_the_answer(admin: Api, controller: Controller) -> None:
    fields, good, bad = TABLE["MAC"]
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["c"],
                                                   "reportOnly": True, **fields})
    await dial_policy(admin, "p", ["#c"])
    identity_id, client = await user(admin)
    await report(client, check, good)
    session = (await client.post("/sessions", {"serviceId": ids["service"]})).data["id"]
    before = mark(controller)
    await report(client, check, bad)  # would now be revoked: reported once
    await report(client, check, [{**bad[0], "macAddresses": ["22:22:33:44:55:66"]}])
    would = of_type(since(controller, before), "posture.wouldDeny")
    assert [(w["decision"], w["session_id"]) for w in would] == [("recheck", session)]
    assert (await admin.get(f"/sessions/{session}")).status == 200

    middle = mark(controller)
    assert (await admin.patch(f"/posture-checks/{check}", {"typeId": "MAC", "reportOnly": False})).status == 200
    # Answered once every identity it applies to was re-checked: the session is gone already.
    assert (await admin.get(f"/sessions/{session}")).status == 404
    [revoked] = of_type(since(controller, middle), "access.revoked")
    assert (revoked["session_id"], revoked["cause"]["code"]) == (session, "postureCheckFailed")
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
    assert dial(await explained(admin, identity_id, ids["service"]))["code"] == "INVALID_POSTURE"


async def test_an_mfa_grace_period_in_the_explanation_and_the_decision(admin: Api, controller: Controller,
                                                                       autojump_clock: MockClock) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["c"],
                                           "timeoutSeconds": 3600, "promptOnWake": True})
    await dial_policy(admin, "p", ["#c"])
    identity_id, client = await user(admin)
    await enrol(client, controller)
    passed = controller.clock.now()
    answer = dial(await explained(admin, identity_id, ids["service"]))
    assert answer["code"] == "GRANTED"
    assert answer["nextChange"]["at"] == format_time(passed + 3600)
    await trio.sleep(60)
    woken = controller.clock.now()
    await client.post("/posture-response", {"id": "x", "typeId": "ENDPOINT_STATE", "woken": True})
    answer = dial(await explained(admin, identity_id, ids["service"]))
    assert answer["code"] == "GRANTED" and answer["nextChange"]["at"] == format_time(woken + 300)
    assert answer["nextChange"]["code"] == "INVALID_POSTURE"
    assert answer["actions"] == [f"submit a TOTP code (POST /authenticate/mfa) before {format_time(woken + 300)}"]
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 201
    await trio.sleep(300)
    answer = dial(await explained(admin, identity_id, ids["service"]))
    assert answer["code"] == "INVALID_POSTURE" and answer["nextChange"] is None
    [mfa_check] = answer["policies"][0]["checks"]
    assert mfa_check["at"] == format_time(woken + 300) and "grace ended" in mfa_check["rule"]
    assert (await client.post("/sessions", {"serviceId": ids["service"], "type": "Dial"})).status == 409
