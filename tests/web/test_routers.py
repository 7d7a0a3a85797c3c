"""Edge routers, routers (also served as transit routers) and the two edge router policy kinds, over HTTP."""

from __future__ import annotations

import uuid

import jwt

from controller.clock import parse_time
from tests.support import Api

ER_BODY = {"name": "er1", "cost": 7, "disabled": True, "isTunnelerEnabled": True, "noTraversal": True,
           "roleAttributes": ["west", "edge"], "appData": {"zone": "a"}, "tags": {"owner": "ops"}}


async def test_edge_router_create_and_detail(admin: Api) -> None:
    reply = await admin.post("/edge-routers", ER_BODY)
    assert reply.status == 201, reply.body
    router = (await admin.get(f"/edge-routers/{reply.data['id']}")).data
    assert router == reply.data
    for key, value in ER_BODY.items():
        assert router[key] == value, key
    # Never connected and not enrolled yet.
    assert router["isOnline"] is False
    assert router["isVerified"] is False
    assert router["syncStatus"] == "SYNC_UNKNOWN"
    assert (router["hostname"], router["supportedProtocols"], router["fingerprint"]) == ("", {}, "")
    assert router["versionInfo"] == {"os": "", "version": "", "arch": "", "buildDate": "", "revision": ""}
    assert (router["certPem"], router["unverifiedCertPem"], router["unverifiedFingerprint"]) == (None, None, None)
    assert str(uuid.UUID(router["enrollmentToken"])) == router["enrollmentToken"]
    claims = jwt.decode(router["enrollmentJwt"], options={"verify_signature": False})
    assert (claims["em"], claims["sub"], claims["jti"]) == ("erott", router["id"], router["enrollmentToken"])
    assert claims["exp"] == int(parse_time(router["enrollmentExpiresAt"]))
    assert router["enrollmentCreatedAt"] == router["createdAt"]
    lifetime = parse_time(router["enrollmentExpiresAt"]) - parse_time(router["enrollmentCreatedAt"])
    assert abs(lifetime - 180 * 60) < 0.002
    assert router["_links"]["self"] == {"href": f"./edge-routers/{router['id']}"}


async def test_edge_router_nulls_store_defaults(admin: Api) -> None:
    reply = await admin.post("/edge-routers", {"name": "er1", "cost": None, "disabled": None, "noTraversal": None,
                                               "appData": None, "roleAttributes": None})
    assert reply.status == 201, reply.body
    data = reply.data
    assert (data["cost"], data["disabled"], data["noTraversal"], data["isTunnelerEnabled"]) == (0, False, False, False)
    assert (data["appData"], data["roleAttributes"]) == ({}, [])


async def test_edge_router_put_and_patch(admin: Api) -> None:
    router_id = await admin.create("/edge-routers", ER_BODY)
    token = (await admin.get(f"/edge-routers/{router_id}")).data["enrollmentToken"]

    reply = await admin.patch(f"/edge-routers/{router_id}", {"cost": 9, "roleAttributes": ["east"]})
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    router = (await admin.get(f"/edge-routers/{router_id}")).data
    assert (router["cost"], router["roleAttributes"], router["disabled"], router["appData"]) == (
        9, ["east"], True, {"zone": "a"})

    reply = await admin.put(f"/edge-routers/{router_id}", {"name": "renamed"})
    assert reply.status == 200, reply.body
    router = (await admin.get(f"/edge-routers/{router_id}")).data
    assert (router["name"], router["cost"], router["disabled"], router["isTunnelerEnabled"]) == (
        "renamed", 0, False, False)
    assert (router["roleAttributes"], router["appData"], router["tags"]) == ([], {}, {})
    # The pending enrollment belongs to the router, not to its settings.
    assert router["enrollmentToken"] == token


async def test_edge_router_validation_errors(admin: Api) -> None:
    cases = [
        ({}, "name", "name in body is required"),
        ({"name": "er", "cost": 70000}, "cost", "cost in body should be less than or equal to 65535"),
        ({"name": "er", "cost": -1}, "cost", "cost in body should be greater than or equal to 0"),
        ({"name": "er", "roleAttributes": ["#west"]}, "roleAttributes",
         "role attributes may not be prefixed with # or @"),
        ({"name": "er", "isTunnelerEnabled": "yes"}, "isTunnelerEnabled",
         "isTunnelerEnabled in body must be of type boolean"),
    ]
    for body, field, reason in cases:
        reply = await admin.post("/edge-routers", body)
        assert reply.status == 400, body
        assert reply.error["code"] == "COULD_NOT_VALIDATE"
        assert (reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (field, reason)
    router_id = await admin.create("/edge-routers", {"name": "er"})
    reply = await admin.put(f"/edge-routers/{router_id}", {"cost": 3})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "name")
    assert (await admin.get("/edge-routers")).body["meta"]["pagination"]["totalCount"] == 1


async def test_edge_router_role_attributes_list_and_role_filter(admin: Api) -> None:
    west = await admin.create("/edge-routers", {"name": "w", "roleAttributes": ["west", "edge"]})
    east = await admin.create("/edge-routers", {"name": "e", "roleAttributes": ["east", "edge"]})
    await admin.create("/edge-routers", {"name": "bare"})

    reply = await admin.get("/edge-router-role-attributes")
    assert reply.status == 200
    assert reply.data == ["east", "edge", "west"]
    reply = await admin.get("/edge-router-role-attributes", query={"filter": 'id contains "st"'})
    assert reply.data == ["east", "west"]

    reply = await admin.get("/edge-routers", query={"roleFilter": "#edge"})
    assert sorted(r["id"] for r in reply.data) == sorted([west, east])
    reply = await admin.get("/edge-routers", query={"roleFilter": ["#west", "#east"], "roleSemantic": "AnyOf"})
    assert sorted(r["id"] for r in reply.data) == sorted([west, east])
    reply = await admin.get("/edge-routers", query={"filter": 'anyOf(roleAttributes) = "west"'})
    assert [r["id"] for r in reply.data] == [west]

    await admin.delete(f"/edge-routers/{west}")
    assert (await admin.get("/edge-router-role-attributes")).data == ["east", "edge"]


async def test_edge_router_filterable_fields(admin: Api) -> None:
    tunneler = await admin.create("/edge-routers", {"name": "t", "isTunnelerEnabled": True, "cost": 5})
    await admin.create("/edge-routers", {"name": "plain"})
    reply = await admin.get("/edge-routers", query={"filter": "isTunnelerEnabled = true and cost > 1"})
    assert [r["id"] for r in reply.data] == [tunneler]
    fields = set(reply.body["meta"]["filterableFields"])
    assert {"name", "roleAttributes", "isVerified", "isTunnelerEnabled", "fingerprint", "cost", "noTraversal",
            "disabled"} <= fields
    reply = await admin.get("/edge-routers", query={"filter": 'enrollmentToken = "x"'})
    assert (reply.status, reply.error["code"]) == (400, "INVALID_FILTER")


async def test_transit_routers_alias_shares_the_routers(admin: Api) -> None:
    reply = await admin.post("/transit-routers", {"name": "tr1", "cost": 4, "noTraversal": True})
    assert reply.status == 201, reply.body
    router_id = reply.data["id"]
    via_routers = (await admin.get(f"/routers/{router_id}")).data
    via_alias = (await admin.get(f"/transit-routers/{router_id}")).data
    assert via_routers == via_alias == reply.data
    assert (via_routers["name"], via_routers["cost"], via_routers["noTraversal"], via_routers["disabled"]) == (
        "tr1", 4, True, False)
    assert (via_routers["isOnline"], via_routers["isVerified"], via_routers["fingerprint"]) == (False, False, "")

    await admin.create("/routers", {"name": "tr2"})
    assert [r["name"] for r in (await admin.get("/transit-routers", query={"sort": "name"})).data] == ["tr1", "tr2"]
    assert (await admin.get("/routers")).data == (await admin.get("/transit-routers")).data

    assert (await admin.patch(f"/transit-routers/{router_id}", {"disabled": True})).status == 200
    assert (await admin.get(f"/routers/{router_id}")).data["disabled"] is True
    assert (await admin.put(f"/routers/{router_id}", {"name": "tr1b"})).status == 200
    assert (await admin.get(f"/transit-routers/{router_id}")).data["name"] == "tr1b"

    duplicate = await admin.post("/transit-routers", {"name": "tr2"})
    assert (duplicate.status, duplicate.error["cause"]["field"]) == (400, "name")

    assert (await admin.delete(f"/routers/{router_id}")).status == 200
    gone = await admin.get(f"/transit-routers/{router_id}")
    assert (gone.status, gone.error["cause"]["message"]) == (404, f"router with id {router_id} not found")


async def test_edge_router_policy_crud(admin: Api) -> None:
    router = await admin.create("/edge-routers", {"name": "er"})
    identity = await admin.create("/identities", {"name": "alice", "type": "User", "isAdmin": False})
    reply = await admin.post("/edge-router-policies", {"name": "erp", "semantic": "AnyOf",
                                                       "edgeRouterRoles": [f"@{router}", "#west"],
                                                       "identityRoles": ["#all"]})
    assert reply.status == 201, reply.body
    policy_id = reply.data["id"]
    policy = (await admin.get(f"/edge-router-policies/{policy_id}")).data
    assert (policy["name"], policy["semantic"], policy["isSystem"]) == ("erp", "AnyOf", False)
    assert policy["edgeRouterRoles"] == sorted([f"@{router}", "#west"])
    assert policy["edgeRouterRolesDisplay"] == [{"role": "#west", "name": "#west"},
                                                {"role": f"@{router}", "name": "@er"}]
    assert policy["identityRolesDisplay"] == [{"role": "#all", "name": "#all"}]

    assert (await admin.patch(f"/edge-router-policies/{policy_id}", {"identityRoles": [f"@{identity}"]})).status == 200
    policy = (await admin.get(f"/edge-router-policies/{policy_id}")).data
    assert (policy["identityRoles"], policy["semantic"]) == ([f"@{identity}"], "AnyOf")
    assert (await admin.put(f"/edge-router-policies/{policy_id}", {"name": "erp2", "semantic": "AllOf"})).status == 200
    policy = (await admin.get(f"/edge-router-policies/{policy_id}")).data
    assert (policy["name"], policy["semantic"], policy["edgeRouterRoles"], policy["identityRoles"]) == (
        "erp2", "AllOf", [], [])
    assert (await admin.delete(f"/edge-router-policies/{policy_id}")).status == 200
    assert (await admin.get(f"/edge-router-policies/{policy_id}")).status == 404


async def test_edge_router_policy_validation(admin: Api) -> None:
    cases = [
        ({"name": "p"}, "semantic", "semantic in body is required"),
        ({"semantic": "AllOf"}, "name", "name in body is required"),
        ({"name": "p", "semantic": "OneOf"}, "semantic", "semantic in body should be one of ['AllOf', 'AnyOf']"),
        ({"name": "p", "semantic": "AllOf", "edgeRouterRoles": ["@missing"]}, "edgeRouterRoles",
         "no edgeRouter found with the given ids"),
        ({"name": "p", "semantic": "AllOf", "identityRoles": ["plain"]}, "identityRoles",
         "role entries must prefixed with # (to indicate role attributes) or @ (to indicate a name or id)"),
    ]
    for body, field, reason in cases:
        reply = await admin.post("/edge-router-policies", body)
        assert reply.status == 400, body
        assert (reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (field, reason)
    assert (await admin.get("/edge-router-policies")).data == []


async def test_service_edge_router_policy_crud(admin: Api) -> None:
    router = await admin.create("/edge-routers", {"name": "er"})
    service = await admin.create("/services", {"name": "svc", "encryptionRequired": True})
    reply = await admin.post("/service-edge-router-policies", {
        "name": "serp", "semantic": "AllOf", "edgeRouterRoles": [f"@{router}"], "serviceRoles": [f"@{service}"]})
    assert reply.status == 201, reply.body
    policy_id = reply.data["id"]
    policy = (await admin.get(f"/service-edge-router-policies/{policy_id}")).data
    assert policy["serviceRolesDisplay"] == [{"role": f"@{service}", "name": "@svc"}]
    assert policy["edgeRouterRolesDisplay"] == [{"role": f"@{router}", "name": "@er"}]

    missing = await admin.post("/service-edge-router-policies", {"name": "x", "semantic": "AllOf",
                                                                 "serviceRoles": ["@nope"]})
    assert (missing.status, missing.error["cause"]["field"]) == (400, "serviceRoles")
    assert missing.error["cause"]["reason"] == "no service found with the given ids"

    # Deleting a selected router or service strips its @id from the policy.
    assert (await admin.delete(f"/edge-routers/{router}")).status == 200
    assert (await admin.delete(f"/services/{service}")).status == 200
    policy = (await admin.get(f"/service-edge-router-policies/{policy_id}")).data
    assert (policy["edgeRouterRoles"], policy["serviceRoles"]) == ([], [])
    assert (await admin.delete(f"/service-edge-router-policies/{policy_id}")).status == 200
