"""Management views of the posture engine and of computed access, and the client's own edge routers.

The network: edge routers er1 {er}, er2 {er-b}, er3 {}; user1 {u} reaches er1, user2 {v} reaches er2 (edge router
policies); services svc {s} on er1 and er2, svc2 {s2} on er3 (service edge router policies), svc3 on nothing; user1
dials svc and binds svc2, user2 dials svc (service policies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import trio

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.support import Api, make_user
from tests.web.test_client_posture import enrol_mfa


@dataclass
class Net:
    er1: str
    er2: str
    er3: str
    svc: str
    svc2: str
    svc3: str
    dial_u: str
    bind_u: str
    dial_v: str
    user1: str
    user2: str
    client1: Api
    client2: Api


async def net(admin: Api) -> Net:
    er1 = await admin.create("/edge-routers", {"name": "er1", "roleAttributes": ["er"]})
    er2 = await admin.create("/edge-routers", {"name": "er2", "roleAttributes": ["er-b"], "cost": 7})
    er3 = await admin.create("/edge-routers", {"name": "er3"})
    await admin.create("/edge-router-policies", {"name": "erp-u", "semantic": "AnyOf", "identityRoles": ["#u"],
                                                 "edgeRouterRoles": ["#er"]})
    await admin.create("/edge-router-policies", {"name": "erp-v", "semantic": "AnyOf", "identityRoles": ["#v"],
                                                 "edgeRouterRoles": ["#er-b"]})
    await admin.create("/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf",
                                                         "serviceRoles": ["#s"], "edgeRouterRoles": ["#er", "#er-b"]})
    await admin.create("/service-edge-router-policies", {"name": "serp2", "semantic": "AnyOf",
                                                         "serviceRoles": ["#s2"], "edgeRouterRoles": [f"@{er3}"]})
    svc = await admin.create("/services", {"name": "svc", "encryptionRequired": True, "roleAttributes": ["s"]})
    svc2 = await admin.create("/services", {"name": "svc2", "encryptionRequired": True, "roleAttributes": ["s2"]})
    svc3 = await admin.create("/services", {"name": "svc3", "encryptionRequired": True})

    async def policy(name: str, kind: str, identity_role: str, service_role: str) -> str:
        return await admin.create("/service-policies", {"name": name, "type": kind, "semantic": "AnyOf",
                                                        "identityRoles": [identity_role],
                                                        "serviceRoles": [service_role]})

    dial_u = await policy("dial-u", "Dial", "#u", "#s")
    bind_u = await policy("bind-u", "Bind", "#u", "#s2")
    dial_v = await policy("dial-v", "Dial", "#v", "#s")
    user1, api1 = await make_user(admin, "user1", roleAttributes=["u"])
    user2, api2 = await make_user(admin, "user2", roleAttributes=["v"])
    return Net(er1, er2, er3, svc, svc2, svc3, dial_u, bind_u, dial_v, user1, user2, api1.as_client(),
               api2.as_client())


def ids(reply: Any) -> set[str]:
    assert reply.status == 200, reply.body
    return {row["id"] for row in reply.data}


async def test_identity_services_by_policy_type(admin: Api) -> None:
    n = await net(admin)
    reply = await admin.get(f"/identities/{n.user1}/services")
    assert ids(reply) == {n.svc, n.svc2}
    assert reply.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 2}
    assert "name" in reply.body["meta"]["filterableFields"]
    assert ids(await admin.get(f"/identities/{n.user1}/services", query={"policyType": "dial"})) == {n.svc}
    assert ids(await admin.get(f"/identities/{n.user1}/services", query={"policyType": "bind"})) == {n.svc2}
    assert ids(await admin.get(f"/identities/{n.user2}/services", query={"policyType": "bind"})) == set()
    assert ids(await admin.get(f"/identities/{n.user1}/services", query={"filter": 'name = "svc2"'})) == {n.svc2}
    for bad in ("both", "Dial Bind"):
        reply = await admin.get(f"/identities/{n.user1}/services", query={"policyType": bad})
        assert reply.status == 400 and reply.error["code"] == "COULD_NOT_VALIDATE"
        assert reply.error["cause"]["field"] == "policyType" and reply.error["cause"]["value"] == bad


async def test_service_identities_by_policy_type(admin: Api) -> None:
    n = await net(admin)
    assert ids(await admin.get(f"/services/{n.svc}/identities")) == {n.user1, n.user2}
    assert ids(await admin.get(f"/services/{n.svc}/identities", query={"policyType": "dial"})) == {n.user1, n.user2}
    assert ids(await admin.get(f"/services/{n.svc}/identities", query={"policyType": "bind"})) == set()
    assert ids(await admin.get(f"/services/{n.svc2}/identities", query={"policyType": "bind"})) == {n.user1}
    assert ids(await admin.get(f"/services/{n.svc3}/identities")) == set()
    paged = await admin.get(f"/services/{n.svc}/identities", query={"limit": "1", "sort": "name desc"})
    assert [row["name"] for row in paged.data] == ["user2"]
    assert paged.body["meta"]["pagination"] == {"limit": 1, "offset": 0, "totalCount": 2}
    bad = await admin.get(f"/services/{n.svc}/identities", query={"policyType": "host"})
    assert bad.status == 400 and bad.error["cause"]["field"] == "policyType"


async def test_edge_router_reachability_lists(admin: Api) -> None:
    n = await net(admin)
    assert ids(await admin.get(f"/identities/{n.user1}/edge-routers")) == {n.er1}
    assert ids(await admin.get(f"/identities/{n.user2}/edge-routers")) == {n.er2}
    assert ids(await admin.get(f"/services/{n.svc}/edge-routers")) == {n.er1, n.er2}
    assert ids(await admin.get(f"/services/{n.svc2}/edge-routers")) == {n.er3}
    assert ids(await admin.get(f"/services/{n.svc3}/edge-routers")) == set()
    assert ids(await admin.get(f"/edge-routers/{n.er1}/identities")) == {n.user1}
    assert ids(await admin.get(f"/edge-routers/{n.er3}/identities")) == set()
    assert ids(await admin.get(f"/edge-routers/{n.er2}/services")) == {n.svc}
    assert ids(await admin.get(f"/edge-routers/{n.er3}/services")) == {n.svc2}
    filtered = await admin.get(f"/services/{n.svc}/edge-routers", query={"filter": "cost > 5"})
    assert ids(filtered) == {n.er2}
    assert filtered.body["meta"]["pagination"]["totalCount"] == 1


async def test_policy_advice(admin: Api) -> None:
    n = await net(admin)
    reply = await admin.get(f"/identities/{n.user1}/policy-advice/{n.svc}")
    assert reply.status == 200
    assert reply.body == {"data": {
        "identityId": n.user1,
        "identity": {"id": n.user1, "name": "user1", "entity": "identities",
                     "_links": {"self": {"href": f"./identities/{n.user1}"}}},
        "serviceId": n.svc,
        "service": {"id": n.svc, "name": "svc", "entity": "services",
                    "_links": {"self": {"href": f"./services/{n.svc}"}}},
        "isBindAllowed": False, "isDialAllowed": True, "identityRouterCount": 1, "serviceRouterCount": 2,
        "commonRouters": [{"id": n.er1, "name": "er1", "entity": "edge-routers",
                           "_links": {"self": {"href": f"./edge-routers/{n.er1}"}}, "isOnline": False}],
    }, "meta": {}}
    bind = (await admin.get(f"/identities/{n.user1}/policy-advice/{n.svc2}")).data
    assert (bind["isDialAllowed"], bind["isBindAllowed"], bind["serviceRouterCount"]) == (False, True, 1)
    assert bind["commonRouters"] == []
    none = (await admin.get(f"/identities/{n.user2}/policy-advice/{n.svc3}")).data
    assert (none["isDialAllowed"], none["isBindAllowed"]) == (False, False)
    assert (none["identityRouterCount"], none["serviceRouterCount"], none["commonRouters"]) == (1, 0, [])


async def sessions_of_both(n: Net) -> tuple[str, str]:
    first = await n.client1.post("/sessions", {"serviceId": n.svc})
    second = await n.client2.post("/sessions", {"serviceId": n.svc})
    assert first.status == 201 and second.status == 201, (first.body, second.body)
    return str(first.data["id"]), str(second.data["id"])


async def test_admin_session_list_detail_and_route_path(admin: Api) -> None:
    n = await net(admin)
    first, second = await sessions_of_both(n)
    bind = await n.client1.post("/sessions", {"serviceId": n.svc2, "type": "Bind"})
    assert bind.status == 400 and bind.error["code"] == "NO_EDGE_ROUTERS_AVAILABLE"  # er3 is not user1's

    listed = await admin.get("/sessions")
    assert ids(listed) == {first, second}
    assert listed.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 2}
    assert {"id", "identityId", "serviceId", "apiSessionId", "type"} <= set(listed.body["meta"]["filterableFields"])
    assert ids(await admin.get("/sessions", query={"filter": f'identityId = "{n.user2}"'})) == {second}
    assert ids(await admin.get("/sessions", query={"filter": 'type = "Bind"'})) == set()
    assert ids(await admin.get("/sessions", query={"filter": f'serviceId = "{n.svc}"', "limit": "1"})) <= {
        first, second}

    api_session_id = (await n.client1.get("/current-api-session")).data["id"]
    detail = await admin.get(f"/sessions/{first}")
    assert detail.status == 200
    data = detail.data
    assert (data["id"], data["type"], data["identityId"], data["serviceId"], data["apiSessionId"]) == (
        first, "Dial", n.user1, n.svc, api_session_id)
    assert data["apiSession"] == {"id": api_session_id, "name": "", "entity": "api-sessions",
                                  "_links": {"self": {"href": f"./api-sessions/{api_session_id}"}}}
    assert data["service"] == {"id": n.svc, "name": "svc", "entity": "services",
                               "_links": {"self": {"href": f"./services/{n.svc}"}}}
    assert data["servicePolicies"] == [{"id": n.dial_u, "name": "dial-u", "entity": "service-policies",
                                        "_links": {"self": {"href": f"./service-policies/{n.dial_u}"}}}]
    assert data["edgeRouters"] == [{"id": n.er1, "name": "er1", "hostname": "", "urls": {},
                                    "supportedProtocols": {}, "syncStatus": "SYNC_UNKNOWN", "isOnline": False,
                                    "cost": 0, "noTraversal": False, "disabled": False, "appData": {}}]
    assert isinstance(data["token"], str) and len(data["token"]) == 36
    assert data["_links"]["self"] == {"href": f"./sessions/{first}"}
    other = (await admin.get(f"/sessions/{second}")).data
    assert [r["id"] for r in other["edgeRouters"]] == [n.er2]
    assert other["servicePolicies"][0]["id"] == n.dial_v

    # The client sees the same session detail.
    client_detail = await n.client1.get(f"/sessions/{first}")
    assert client_detail.status == 200 and client_detail.data["edgeRouters"] == data["edgeRouters"]

    route = await admin.get(f"/sessions/{first}/route-path")
    assert route.status == 200 and route.body == {"data": {"routePath": []}, "meta": {}}


async def test_current_identity_edge_routers_show_no_secrets(admin: Api) -> None:
    n = await net(admin)
    reply = await n.client2.get("/current-identity/edge-routers")
    assert reply.status == 200
    [router] = reply.data
    router_row = (await admin.get(f"/edge-routers/{n.er2}")).data
    assert router == {"id": n.er2, "createdAt": router_row["createdAt"], "updatedAt": router_row["updatedAt"],
                      "tags": {}, "name": "er2", "hostname": "", "supportedProtocols": {},
                      "syncStatus": "SYNC_UNKNOWN", "isOnline": False, "cost": 7, "noTraversal": False,
                      "disabled": False, "appData": {}, "_links": {"self": {"href": f"./edge-routers/{n.er2}"}}}
    assert reply.body["meta"]["pagination"]["totalCount"] == 1
    assert ids(await n.client1.get("/current-identity/edge-routers")) == {n.er1}
    assert ids(await n.client1.get("/current-identity/edge-routers", query={"filter": 'name = "er2"'})) == set()
    assert (await admin.as_client().get("/current-identity/edge-routers")).data == []
    assert (await n.client1.with_token(None).get("/current-identity/edge-routers")).status == 401


async def test_posture_data_before_and_after(admin: Api, anon: Api, controller: Controller,
                                             autojump_clock: trio.testing.MockClock) -> None:
    n = await net(admin)
    api_session_id = (await n.client1.get("/current-api-session")).data["id"]
    empty = await admin.get(f"/identities/{n.user1}/posture-data")
    assert empty.status == 200
    assert empty.body == {"data": {
        "os": {"postureCheckId": "", "timedOut": False, "lastUpdatedAt": None, "type": None, "version": None,
               "build": None},
        "mac": {"postureCheckId": "", "timedOut": False, "lastUpdatedAt": None, "addresses": None},
        "domain": {"postureCheckId": "", "timedOut": False, "lastUpdatedAt": None, "domain": None},
        "processes": [],
        "apiSessionPostureData": {api_session_id: {
            "mfa": {"apiSessionId": api_session_id, "passedMfa": False, "passedAt": None, "passedOnWake": None,
                    "passedOnUnlock": None},
            "endpointState": {"wokenAt": None, "unlockedAt": None},
            "sdkInfo": {}}},
    }, "meta": {}}

    first_at = format_time(controller.clock.now())
    reply = await n.client1.post("/posture-response-bulk", [
        {"id": "os-check", "typeId": "OS", "type": "Windows", "version": "10.0", "build": "19045"},
        {"id": "mac-check", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]},
        {"id": "proc-check", "typeId": "PROCESS", "path": "C:\\a.exe", "isRunning": True, "hash": "AB" * 32,
         "signerFingerprints": ["CD" * 20]}])
    assert reply.status == 201
    await trio.sleep(2)
    second_at = format_time(controller.clock.now())
    await n.client1.post("/posture-response", {"id": "dom-check", "typeId": "DOMAIN", "domain": "Corp"})
    await n.client1.post("/posture-response", {"id": "e", "typeId": "ENDPOINT_STATE", "woken": True})
    await enrol_mfa(n.client1, controller)

    # A second API session that reports its SDK at login.
    login = await anon.as_client().post("/authenticate", {"username": "user2", "password": "user-password",
                                                          "sdkInfo": {"type": "ziti-sdk-c", "version": "1.0.0"}},
                                        query={"method": "password"})
    assert login.status == 200
    sdk_session = login.data["id"]

    data = (await admin.get(f"/identities/{n.user1}/posture-data")).data
    assert data["os"] == {"postureCheckId": "os-check", "timedOut": False, "lastUpdatedAt": first_at,
                          "type": "Windows", "version": "10.0", "build": "19045"}
    assert data["mac"] == {"postureCheckId": "mac-check", "timedOut": False, "lastUpdatedAt": first_at,
                           "addresses": ["aa-bb-cc-dd-ee-ff"]}
    assert data["domain"] == {"postureCheckId": "dom-check", "timedOut": False, "lastUpdatedAt": second_at,
                              "domain": "Corp"}
    assert data["processes"] == [{"postureCheckId": "proc-check", "timedOut": False, "lastUpdatedAt": first_at,
                                  "isRunning": True, "binaryHash": "ab" * 32, "signerFingerprints": ["cd" * 20]}]
    session = data["apiSessionPostureData"][api_session_id]
    assert session["mfa"] == {"apiSessionId": api_session_id, "passedMfa": True, "passedAt": second_at,
                              "passedOnWake": None, "passedOnUnlock": None}
    assert session["endpointState"] == {"wokenAt": second_at, "unlockedAt": None}

    other = (await admin.get(f"/identities/{n.user2}/posture-data")).data
    assert other["os"]["type"] is None  # posture data is per identity
    assert other["apiSessionPostureData"][sdk_session]["sdkInfo"] == {"type": "ziti-sdk-c", "version": "1.0.0"}
    assert other["apiSessionPostureData"][sdk_session]["mfa"]["passedMfa"] is False

    # Logging out removes the API session's entry; the identity's data stays.
    assert (await n.client1.delete("/current-api-session")).status == 200
    after = (await admin.get(f"/identities/{n.user1}/posture-data")).data
    assert api_session_id not in after["apiSessionPostureData"]
    assert after["os"]["version"] == "10.0"


async def test_failed_service_requests_view(admin: Api) -> None:
    n = await net(admin)
    empty = await admin.get(f"/identities/{n.user1}/failed-service-requests", query={"limit": "1"})
    assert empty.status == 200 and empty.body == {"data": [], "meta": {}}
    await admin.create("/posture-checks", {"name": "dom", "typeId": "DOMAIN", "roleAttributes": ["d"],
                                           "domains": ["corp"]})
    await admin.patch(f"/service-policies/{n.dial_u}", {"postureCheckRoles": ["#d"]})
    for _ in range(3):
        assert (await n.client1.post("/sessions", {"serviceId": n.svc})).status == 409
    reply = await admin.get(f"/identities/{n.user1}/failed-service-requests", query={"limit": "1"})
    assert reply.status == 200 and reply.body["meta"] == {}
    assert len(reply.data) == 3
    assert {entry["serviceName"] for entry in reply.data} == {"svc"}
    assert (await admin.get(f"/identities/{n.user2}/failed-service-requests")).data == []


ADMIN_VIEWS = (
    "/identities/{user}/posture-data",
    "/identities/{user}/failed-service-requests",
    "/identities/{user}/services",
    "/identities/{user}/edge-routers",
    "/identities/{user}/policy-advice/{svc}",
    "/services/{svc}/identities",
    "/services/{svc}/edge-routers",
    "/edge-routers/{er}/identities",
    "/edge-routers/{er}/services",
    "/sessions",
    "/sessions/{session}",
    "/sessions/{session}/route-path",
)


@pytest.mark.parametrize("template", ADMIN_VIEWS)
async def test_views_are_for_admins_and_unknown_ids_are_404(admin: Api, template: str) -> None:
    n = await net(admin)
    session, _ = await sessions_of_both(n)
    known = {"user": n.user1, "svc": n.svc, "er": n.er1, "session": session}
    path = template.format(**known)
    assert (await admin.get(path)).status == 200
    refused = await admin.with_token(n.client1.token).get(path)  # a non-admin on the management API
    assert refused.status == 401 and refused.error["code"] == "UNAUTHORIZED"
    assert (await admin.with_token(None).get(path)).status == 401
    if "{" in template:
        for name in known:
            if "{" + name + "}" not in template:
                continue
            missing = await admin.get(template.format(**{**known, name: "no-such-id"}))
            assert missing.status == 404, (template, name)
            assert missing.error["code"] == "NOT_FOUND"


async def test_a_session_keeps_the_policies_that_granted_it(admin: Api) -> None:
    n = await net(admin)
    await admin.create("/posture-checks", {"name": "dom", "typeId": "DOMAIN", "roleAttributes": ["d"],
                                           "domains": ["corp"]})
    guarded = await admin.create("/service-policies", {"name": "guarded", "type": "Dial", "semantic": "AnyOf",
                                                       "identityRoles": ["#u"], "serviceRoles": ["#s"],
                                                       "postureCheckRoles": ["#d"]})
    session = await n.client1.post("/sessions", {"serviceId": n.svc})
    assert session.status == 201
    detail = (await admin.get(f"/sessions/{session.data['id']}")).data
    assert [p["id"] for p in detail["servicePolicies"]] == [n.dial_u]
    await n.client1.post("/posture-response", {"id": "d", "typeId": "DOMAIN", "domain": "corp"})
    second = await n.client1.post("/sessions", {"serviceId": n.svc})
    assert second.data["id"] == session.data["id"]  # the same API session keeps its session
    other = (await admin.login("user1", "user-password")).as_client()
    third = (await other.post("/sessions", {"serviceId": n.svc})).data
    detail = (await admin.get(f"/sessions/{third['id']}")).data
    assert sorted(p["id"] for p in detail["servicePolicies"]) == sorted([n.dial_u, guarded])
    assert "servicePolicies" not in third  # the Client API does not show them
