"""The Client API's ``GET /services/{id}/edge-routers`` and ``/terminators``: what an identity may use for a
service it sees, and 404 for one it cannot see."""

from __future__ import annotations

from tests.conformance import oracle
from tests.support import Api
from tests.web.test_client_posture import dial_policy, network, user
from tests.web.test_view_conformance import shape_problems


async def setup(admin: Api) -> tuple[dict[str, str], Api]:
    """The network of ``network`` (er1 for every identity and service), a second router only the identity may
    reach, a third only the service may use, a hidden service, two terminators; a user who may dial ``svc``."""
    ids = await network(admin)
    ids["identity_only"] = await admin.create("/edge-routers", {"name": "er-identity", "roleAttributes": ["i"]})
    ids["service_only"] = await admin.create("/edge-routers", {"name": "er-service", "roleAttributes": ["v"]})
    await admin.create("/edge-router-policies", {"name": "erp-i", "semantic": "AnyOf", "identityRoles": ["#u"],
                                                 "edgeRouterRoles": ["#i"]})
    await admin.create("/service-edge-router-policies", {"name": "serp-v", "semantic": "AnyOf",
                                                         "serviceRoles": ["#other"], "edgeRouterRoles": ["#v"]})
    # erp covers every router for every identity: narrow it to er1, so that the two others stay one-sided.
    erp = (await admin.get("/edge-router-policies", query={"filter": 'name = "erp"'})).data[0]["id"]
    assert (await admin.patch(f"/edge-router-policies/{erp}", {"edgeRouterRoles": ["#er"]})).status == 200
    serp = (await admin.get("/service-edge-router-policies", query={"filter": 'name = "serp"'})).data[0]["id"]
    assert (await admin.patch(f"/service-edge-router-policies/{serp}", {"edgeRouterRoles": ["#er"]})).status == 200
    ids["hidden"] = await admin.create("/services", {"name": "hidden", "encryptionRequired": True})
    ids["transit"] = await admin.create("/routers", {"name": "tr"})
    for n in range(2):
        ids[f"terminator{n}"] = await admin.create("/terminators", {
            "service": ids["service"], "router": ids["transit"], "binding": "transport",
            "address": f"tcp:10.0.0.{n}:80", "identity": f"host{n}"})
    await admin.create("/terminators", {"service": ids["hidden"], "router": ids["transit"], "binding": "transport",
                                        "address": "tcp:10.0.9.9:80"})
    await dial_policy(admin, "dial", [])
    _, client = await user(admin)
    return ids, client


async def test_edge_routers_of_an_accessible_service(admin: Api) -> None:
    ids, client = await setup(admin)
    reply = await client.get(f"/services/{ids['service']}/edge-routers")
    assert reply.status == 200, reply.body
    assert reply.data == {"edgeRouters": [{
        "id": ids["router"], "name": "er1", "hostname": "", "urls": {}, "supportedProtocols": {},
        "syncStatus": "SYNC_UNKNOWN", "isOnline": False, "cost": 0, "noTraversal": False, "disabled": False,
        "appData": {}}]}
    # The reference's shape, with the router's id and urls beside it (as a session lists its routers).
    routers = {"$ref": "#/definitions/listServiceEdgeRoutersEnvelope"}
    problems = shape_problems(oracle.require("client"), routers, reply.body, "")
    assert problems == [".data.edgeRouters[0]: unknown property id", ".data.edgeRouters[0]: unknown property urls"]


async def test_terminators_of_an_accessible_service(admin: Api) -> None:
    ids, client = await setup(admin)
    reply = await client.get(f"/services/{ids['service']}/terminators", query={"limit": "1", "sort": "identity"})
    assert reply.status == 200, reply.body
    assert reply.body["meta"]["pagination"] == {"limit": 1, "offset": 0, "totalCount": 2}
    [first] = reply.data
    management = (await admin.get(f"/terminators/{ids['terminator0']}")).data
    # Where the terminator is, not how the hosting side is reached.
    assert first == {key: management[key] for key in ("id", "createdAt", "updatedAt", "tags", "_links", "serviceId",
                                                      "service", "routerId", "identity")}
    assert first["identity"] == "host0" and "address" not in first
    envelope = {"$ref": "#/definitions/listClientTerminatorsEnvelope"}
    assert shape_problems(oracle.require("client"), envelope, reply.body, "") == []
    rest = await client.get(f"/services/{ids['service']}/terminators", query={"filter": 'identity = "host1"'})
    assert [t["id"] for t in rest.data] == [ids["terminator1"]]
    # What the answer leaves out cannot be probed with a filter or a sort either.
    assert "address" not in rest.body["meta"]["filterableFields"]
    for query in ({"filter": 'address contains "tcp"'}, {"sort": "cost"}):
        probe = await client.get(f"/services/{ids['service']}/terminators", query=query)
        assert probe.status == 400 and probe.error["code"] in ("INVALID_FILTER", "INVALID_SORT_IDENTIFIER"), query


async def test_a_service_the_identity_cannot_see_is_not_found(admin: Api) -> None:
    ids, client = await setup(admin)
    for service_id in (ids["hidden"], "no-such-service"):
        for tail in ("edge-routers", "terminators"):
            reply = await client.get(f"/services/{service_id}/{tail}")
            assert (reply.status, reply.error["code"]) == (404, "NOT_FOUND"), (service_id, tail)
            assert reply.error["cause"]["message"] == f"service with id {service_id} not found"
    # An administrator sees every service in its client list, and so these too.
    admin_client = admin.as_client()
    terminators = await admin_client.get(f"/services/{ids['hidden']}/terminators")
    assert (terminators.status, len(terminators.data)) == (200, 1)
    routers = await admin_client.get(f"/services/{ids['hidden']}/edge-routers")
    assert [router["name"] for router in routers.data["edgeRouters"]] == ["er1"]
