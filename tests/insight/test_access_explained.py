"""``GET /identities/{id}/access/{serviceId}``: what it says, and that it says what a session request would get,
over many generated models (policies of both types, checks of several kinds, report-only checks, MFA timeouts and
wake graces at varied instants, edge routers present or not)."""

from __future__ import annotations

import random
from typing import Any

import trio
from trio.testing import MockClock

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.support import Api, make_user
from tests.web.test_client_posture import MAC_OK, dial_policy, network, user
from tests.web.test_mfa import enrol

CHECKS: dict[str, dict[str, Any]] = {
    "mac": {"typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]},
    "linux": {"typeId": "OS", "operatingSystems": [{"type": "Linux", "versions": [">=5.0.0"]}]},
    "corp": {"typeId": "DOMAIN", "domains": ["corp"]},
    "mfa-short": {"typeId": "MFA", "timeoutSeconds": 120},
    "mfa-wake": {"typeId": "MFA", "timeoutSeconds": -1, "promptOnWake": True},
}
REPORTS: dict[str, list[dict[str, Any]]] = {
    "mac": [{"typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]}, {"typeId": "MAC", "macAddresses": ["01:02"]}],
    "linux": [{"typeId": "OS", "type": "Linux", "version": "6.1.0"},
              {"typeId": "OS", "type": "Linux", "version": "4.0.0"}],
    "corp": [{"typeId": "DOMAIN", "domain": "corp"}, {"typeId": "DOMAIN", "domain": "home"}],
}


async def test_the_explanation_names_policies_roles_checks_routers_and_a_verdict(admin: Api,
                                                                                  controller: Controller) -> None:
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                   "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    policy = await dial_policy(admin, "staff-dial", ["#mac"])
    identity_id, client = await user(admin)
    api_session = str((await client.get("/current-api-session")).data["id"])
    data = (await admin.get(f"/identities/{identity_id}/access/{ids['service']}")).data
    assert data["identity"]["id"] == identity_id and data["service"] == {"id": ids["service"], "name": "svc"}
    assert data["apiSession"]["id"] == api_session and data["postureEvaluation"] is True
    dial, bind = data["sessionTypes"]
    assert (dial["type"], dial["allowed"], dial["code"]) == ("Dial", False, "INVALID_POSTURE")
    assert (bind["type"], bind["code"], bind["policies"]) == ("Bind", "COULD_NOT_VALIDATE", [])
    [explained] = dial["policies"]
    assert explained["id"] == policy and explained["passing"] is False
    assert explained["linkedBy"] == {"identityRoles": ["#u"], "serviceRoles": ["#s"]}
    [mac] = explained["checks"]
    assert (mac["id"], mac["passing"], mac["selectedBy"], mac["reportedAt"]) == (check, False, ["#mac"], None)
    assert mac["rule"] == "no MAC address was reported; allowed: aa-bb-cc-dd-ee-ff"
    assert mac["remedy"] == "report a network interface with one of: aa-bb-cc-dd-ee-ff"
    assert dial["actions"] == ["to pass policy staff-dial: report a network interface with one of: aa-bb-cc-dd-ee-ff"]
    assert data["edgeRouters"]["common"] == [{"id": ids["router"], "name": "er1", "isOnline": False,
                                              "disabled": False}]
    assert data["verdict"].startswith("Dial refused (INVALID_POSTURE)")

    await client.post("/posture-response", MAC_OK)
    data = (await admin.get(f"/identities/{identity_id}/access/{ids['service']}")).data
    dial = data["sessionTypes"][0]
    assert dial["code"] == "GRANTED" and dial["policyIds"] == [policy]
    assert dial["policies"][0]["checks"][0]["reportedBy"] == api_session
    assert data["verdict"] == "Dial allowed through staff-dial; Bind refused (COULD_NOT_VALIDATE): no service " \
                              "policy of this type links the identity and the service; none of the 1 common edge " \
                              "router(s) is online"
    for path in (f"/identities/nope/access/{ids['service']}", f"/identities/{identity_id}/access/nope"):
        assert (await admin.get(path)).status == 404
    assert (await admin.get(f"/identities/{identity_id}/access/{ids['service']}",
                            query={"apiSessionId": "nope"})).status == 404


async def _model(admin: Api, controller: Controller, rng: random.Random, n: int) -> tuple[str, str, Api]:
    """One generated model: a service, 1-3 policies linking a new identity to it, their checks, what the identity
    reported, its MFA, maybe a wake; edge routers for the service or not."""
    service = await admin.create("/services", {"name": f"svc-{n}", "encryptionRequired": True,
                                               "roleAttributes": [f"s{n}"] + (["routed"] if rng.random() < 0.8
                                                                                else [])})
    for p in range(rng.randint(1, 3)):
        chosen = rng.sample(sorted(CHECKS), rng.randint(0, 2))
        roles = []
        for name in chosen:
            check = await admin.create("/posture-checks", {
                "name": f"{name}-{n}-{p}", "roleAttributes": [f"c{n}-{p}"], "reportOnly": rng.random() < 0.3,
                **CHECKS[name]})
            roles.append(check)
        await admin.create("/service-policies", {
            "name": f"p-{n}-{p}", "type": rng.choice(["Dial", "Dial", "Bind"]), "semantic": "AnyOf",
            "identityRoles": [f"#i{n}"], "serviceRoles": [f"#s{n}"],
            "postureCheckRoles": [f"#c{n}-{p}"] if roles else []})
    identity_id, api = await make_user(admin, f"user-{n}", roleAttributes=[f"i{n}"])
    client = api.as_client()
    await client.post("/posture-response-bulk", [{"id": "r", **rng.choice(options)} for options in REPORTS.values()
                                                 if rng.random() < 0.8])
    if rng.random() < 0.7:
        await enrol(client, controller)
        await trio.sleep(rng.choice([0, 30, 90, 150]))
        if rng.random() < 0.5:
            await client.post("/posture-response", {"id": "w", "typeId": "ENDPOINT_STATE", "woken": True})
            await trio.sleep(rng.choice([0, 100, 299, 301, 600]))
    return identity_id, service, client


async def test_the_explanation_agrees_with_the_session_decision_over_varied_models(
        admin: Api, controller: Controller, autojump_clock: MockClock) -> None:
    await network(admin)
    # Only services with the "routed" attribute have an edge router: the others are refused for that last.
    serp = (await admin.get("/service-edge-router-policies")).data[0]["id"]
    await admin.patch(f"/service-edge-router-policies/{serp}", {"serviceRoles": ["#routed"]})
    rng = random.Random(26)
    seen: set[str] = set()
    for n in range(40):
        identity_id, service, client = await _model(admin, controller, rng, n)
        explained = (await admin.get(f"/identities/{identity_id}/access/{service}")).data
        assert explained["evaluatedAt"] == format_time(controller.clock.now())
        for entry in explained["sessionTypes"]:
            reply = await client.post("/sessions", {"serviceId": service, "type": entry["type"]})
            got = "GRANTED" if reply.status == 201 else reply.error["code"]
            assert got == entry["code"], (n, entry["type"], got, entry)
            assert entry["allowed"] is (reply.status == 201)
            if reply.status == 201:
                stored = (await admin.get(f"/sessions/{reply.data['id']}")).data
                assert [ref["id"] for ref in stored["servicePolicies"]] == entry["policyIds"]
            seen.add(got)
    # The generated models reach every outcome.
    assert seen == {"GRANTED", "INVALID_POSTURE", "COULD_NOT_VALIDATE", "NO_EDGE_ROUTERS_AVAILABLE"}
