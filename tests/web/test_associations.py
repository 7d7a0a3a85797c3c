"""Association lists ``GET /{kind}/{id}/{path}``: the list machinery of the target kind over the related rows."""

from __future__ import annotations

from typing import Any

from tests.support import Api, make_user


async def names(admin: Api, path: str, **query: Any) -> list[str]:
    reply = await admin.get(path, query={"limit": "-1", **query})
    assert reply.status == 200, reply.body
    return [row["name"] for row in reply.data]


async def identities(admin: Api, count: int, attrs: list[str]) -> list[str]:
    return [await admin.create("/identities", {"name": f"id-{n:02d}", "type": "User", "isAdmin": False,
                                               "roleAttributes": attrs}) for n in range(count)]


async def test_association_list_pages_filters_and_sorts(admin: Api) -> None:
    await identities(admin, 12, ["team"])
    policy = await admin.create("/service-policies", {"name": "p", "type": "Dial", "semantic": "AllOf",
                                                      "identityRoles": ["#team"]})
    path = f"/service-policies/{policy}/identities"

    first = await admin.get(path)
    assert first.status == 200
    assert [row["id"] for row in first.data] == sorted(row["id"] for row in first.data)  # default order: id
    assert len(first.data) == 10
    target_meta = (await admin.get("/identities")).body["meta"]
    assert first.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 12}
    assert sorted(first.body["meta"]["filterableFields"]) == sorted(target_meta["filterableFields"])
    assert "roleAttributes" in first.body["meta"]["filterableFields"]

    paged = await admin.get(path, query={"limit": "3", "offset": "10", "sort": "name"})
    assert [row["name"] for row in paged.data] == ["id-10", "id-11"]
    assert paged.body["meta"]["pagination"] == {"limit": 3, "offset": 10, "totalCount": 12}

    filtered = await admin.get(path, query={"filter": 'name in ["id-03", "id-07", "Default Admin"] sort by name desc'})
    assert [row["name"] for row in filtered.data] == ["id-07", "id-03"]
    assert filtered.body["meta"]["pagination"]["totalCount"] == 2

    everything = await admin.get(path, query={"limit": "-1"})
    assert len(everything.data) == 12
    assert everything.body["meta"]["pagination"]["limit"] == 9223372036854775807

    # Each row is presented exactly as on the target's own list.
    one = (await admin.get(path, query={"filter": 'name = "id-05"'})).data[0]
    assert one == (await admin.get(f"/identities/{one['id']}")).data


async def test_association_list_errors(admin: Api) -> None:
    policy = await admin.create("/service-policies", {"name": "p", "type": "Dial", "semantic": "AllOf",
                                                      "identityRoles": ["#all"]})
    bad_filter = await admin.get(f"/service-policies/{policy}/identities", query={"filter": "nope = 1"})
    assert bad_filter.status == 400
    assert bad_filter.error["code"] == "INVALID_FILTER"
    bad_limit = await admin.get(f"/service-policies/{policy}/identities", query={"limit": "x"})
    assert bad_limit.status == 400
    assert bad_limit.error["code"] == "INVALID_PAGINATION"
    assert bad_limit.error["cause"]["field"] == "limit"


async def test_unknown_parent_is_404(admin: Api) -> None:
    cases = [
        ("/service-policies/nope/identities", "servicePolicy"),
        ("/service-policies/nope/services", "servicePolicy"),
        ("/service-policies/nope/posture-checks", "servicePolicy"),
        ("/identities/nope/service-policies", "identity"),
        ("/identities/nope/authenticators", "identity"),
        ("/services/nope/service-policies", "service"),
    ]
    for path, singular in cases:
        reply = await admin.get(path)
        assert reply.status == 404, path
        assert reply.error["code"] == "NOT_FOUND"
        assert reply.error["cause"]["message"] == f"{singular} with id nope not found"


async def test_association_lists_need_an_admin(admin: Api) -> None:
    identity_id, user = await make_user(admin, "plain")
    policy = await admin.create("/service-policies", {"name": "p", "type": "Dial", "semantic": "AllOf",
                                                      "identityRoles": ["#all"]})
    for path in (f"/service-policies/{policy}/identities", f"/identities/{identity_id}/service-policies",
                 f"/identities/{identity_id}/authenticators"):
        reply = await user.get(path)
        assert reply.status == 401, path
        assert reply.error["code"] == "UNAUTHORIZED"
    assert (await admin.with_token(None).get(f"/service-policies/{policy}/identities")).status == 401


async def test_parent_links_name_its_association_lists(admin: Api) -> None:
    policy = await admin.create("/service-policies", {"name": "p", "type": "Dial", "semantic": "AllOf"})
    links = (await admin.get(f"/service-policies/{policy}")).data["_links"]
    for path in ("identities", "services", "posture-checks"):
        assert links[path] == {"href": f"./service-policies/{policy}/{path}"}
    identity = await admin.create("/identities", {"name": "i", "type": "User", "isAdmin": False})
    identity_links = (await admin.get(f"/identities/{identity}")).data["_links"]
    assert identity_links["authenticators"] == {"href": f"./identities/{identity}/authenticators"}
    assert identity_links["service-policies"] == {"href": f"./identities/{identity}/service-policies"}


async def test_identity_authenticators(admin: Api) -> None:
    identity_id, _ = await make_user(admin, "owner")
    other_id, _ = await make_user(admin, "other")
    bare = await admin.create("/identities", {"name": "bare", "type": "User", "isAdmin": False})

    reply = await admin.get(f"/identities/{identity_id}/authenticators")
    assert reply.status == 200
    assert len(reply.data) == 1
    authenticator = reply.data[0]
    assert authenticator["identityId"] == identity_id
    assert authenticator["method"] == "updb"
    assert authenticator["username"] == "owner"
    assert "password" not in authenticator
    assert [key for key in authenticator if key.startswith("_")] == ["_links"]
    assert authenticator == (await admin.get(f"/authenticators/{authenticator['id']}")).data
    assert reply.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 1}

    assert [a["username"] for a in (await admin.get(f"/identities/{other_id}/authenticators")).data] == ["other"]
    empty = await admin.get(f"/identities/{bare}/authenticators")
    assert empty.status == 200
    assert empty.data == []
    assert empty.body["meta"]["pagination"]["totalCount"] == 0

    assert (await admin.delete(f"/authenticators/{authenticator['id']}")).status == 200
    assert (await admin.get(f"/identities/{identity_id}/authenticators")).data == []


async def test_edge_router_policy_lists_both_ways(admin: Api) -> None:
    ids: dict[str, str] = {}
    for name, attrs in (("ER1", ["e1"]), ("ER2", ["e1", "e2"]), ("ER3", [])):
        ids[name] = await admin.create("/edge-routers", {"name": name, "roleAttributes": attrs})
    for name, attrs in (("I1", ["a1"]), ("I2", ["a1", "a2"]), ("I3", ["a2"])):
        ids[name] = await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False,
                                                       "roleAttributes": attrs})
    ids["ERP1"] = await admin.create("/edge-router-policies", {"name": "ERP1", "semantic": "AllOf",
                                                               "edgeRouterRoles": ["#e1"], "identityRoles": ["#a1"]})
    ids["ERP2"] = await admin.create("/edge-router-policies", {
        "name": "ERP2", "semantic": "AnyOf", "edgeRouterRoles": ["#e2", f"@{ids['ER3']}"],
        "identityRoles": ["#a2"]})
    expected_routers = {"ERP1": ["ER1", "ER2"], "ERP2": ["ER2", "ER3"]}
    expected_identities = {"ERP1": ["I1", "I2"], "ERP2": ["I2", "I3"]}
    for policy in ("ERP1", "ERP2"):
        assert sorted(await names(admin, f"/edge-router-policies/{ids[policy]}/edge-routers")) == \
            expected_routers[policy]
        assert sorted(await names(admin, f"/edge-router-policies/{ids[policy]}/identities")) == \
            expected_identities[policy]
    user_policies = 'isSystem = false'  # routers may own system policies of their own
    for entity, policies in (("ER1", ["ERP1"]), ("ER2", ["ERP1", "ERP2"]), ("ER3", ["ERP2"])):
        assert sorted(await names(admin, f"/edge-routers/{ids[entity]}/edge-router-policies",
                                  filter=user_policies)) == policies, entity
    for entity, policies in (("I1", ["ERP1"]), ("I2", ["ERP1", "ERP2"]), ("I3", ["ERP2"])):
        assert sorted(await names(admin, f"/identities/{ids[entity]}/edge-router-policies")) == policies, entity

    assert (await admin.patch(f"/edge-router-policies/{ids['ERP1']}", {"edgeRouterRoles": ["#e2"]})).status == 200
    assert await names(admin, f"/edge-routers/{ids['ER1']}/edge-router-policies", filter=user_policies) == []
    assert (await admin.delete(f"/edge-routers/{ids['ER3']}")).status == 200
    erp2 = (await admin.get(f"/edge-router-policies/{ids['ERP2']}")).data
    assert erp2["edgeRouterRoles"] == ["#e2"]
    assert (await admin.delete(f"/edge-router-policies/{ids['ERP2']}")).status == 200
    assert sorted(await names(admin, f"/identities/{ids['I2']}/edge-router-policies")) == ["ERP1"]


async def test_service_edge_router_policy_lists_both_ways(admin: Api) -> None:
    ids: dict[str, str] = {}
    for name, attrs in (("ER1", ["e1"]), ("ER2", ["e1", "e2"]), ("ER3", [])):
        ids[name] = await admin.create("/edge-routers", {"name": name, "roleAttributes": attrs})
    for name, attrs in (("S1", ["r1"]), ("S2", ["r2"])):
        ids[name] = await admin.create("/services", {"name": name, "encryptionRequired": True,
                                                     "roleAttributes": attrs})
    ids["SERP1"] = await admin.create("/service-edge-router-policies", {
        "name": "SERP1", "semantic": "AllOf", "edgeRouterRoles": ["#e1"], "serviceRoles": ["#r1"]})
    ids["SERP2"] = await admin.create("/service-edge-router-policies", {
        "name": "SERP2", "semantic": "AllOf", "edgeRouterRoles": [f"@{ids['ER3']}"], "serviceRoles": ["#all"]})
    assert sorted(await names(admin, f"/service-edge-router-policies/{ids['SERP1']}/edge-routers")) == ["ER1", "ER2"]
    assert await names(admin, f"/service-edge-router-policies/{ids['SERP1']}/services") == ["S1"]
    assert await names(admin, f"/service-edge-router-policies/{ids['SERP2']}/edge-routers") == ["ER3"]
    assert sorted(await names(admin, f"/service-edge-router-policies/{ids['SERP2']}/services")) == ["S1", "S2"]
    for entity, policies in (("ER1", ["SERP1"]), ("ER2", ["SERP1"]), ("ER3", ["SERP2"])):
        assert await names(admin, f"/edge-routers/{ids[entity]}/service-edge-router-policies") == policies, entity
    for entity, policies in (("S1", ["SERP1", "SERP2"]), ("S2", ["SERP2"])):
        assert sorted(await names(admin, f"/services/{ids[entity]}/service-edge-router-policies")) == policies
    assert (await admin.patch(f"/services/{ids['S2']}", {"roleAttributes": ["r1"]})).status == 200
    assert sorted(await names(admin, f"/service-edge-router-policies/{ids['SERP1']}/services")) == ["S1", "S2"]


async def test_edge_router_role_filter_and_attributes(admin: Api) -> None:
    ids: dict[str, str] = {}
    for name, attrs in (("ER1", ["e1"]), ("ER2", ["e1", "e2"]), ("ER3", [])):
        ids[name] = await admin.create("/edge-routers", {"name": name, "roleAttributes": attrs})
    assert sorted(await names(admin, "/edge-routers", roleFilter="#e1")) == ["ER1", "ER2"]
    assert sorted(await names(admin, "/edge-routers", roleFilter=["#e1", "#e2"])) == ["ER2"]
    assert sorted(await names(admin, "/edge-routers", roleFilter=["#e2", f"@{ids['ER3']}", "@unknown"])) == [
        "ER2", "ER3"]
    assert sorted(await names(admin, "/edge-routers", roleFilter=["#e1", "#e2"], roleSemantic="AnyOf")) == [
        "ER1", "ER2"]
    bad = await admin.get("/edge-routers", query={"roleFilter": "#e1", "roleSemantic": "Some"})
    assert bad.status == 400
    assert bad.error["cause"]["field"] == "semantic"
    reply = await admin.get("/edge-router-role-attributes")
    assert reply.status == 200
    assert reply.data == ["e1", "e2"]


async def test_config_lists(admin: Api) -> None:
    ids: dict[str, str] = {}
    for name in ("CT1", "CT2"):
        ids[name] = await admin.create("/config-types", {"name": name})
    for name, config_type in (("C1", "CT1"), ("C2", "CT1"), ("C3", "CT2")):
        ids[name] = await admin.create("/configs", {"name": name, "configTypeId": ids[config_type],
                                                    "data": {"n": name}})
    ids["Sa"] = await admin.create("/services", {"name": "Sa", "encryptionRequired": True,
                                                 "configs": [ids["C1"], ids["C3"]]})
    ids["Sb"] = await admin.create("/services", {"name": "Sb", "encryptionRequired": True, "configs": [ids["C1"]]})
    assert sorted(await names(admin, f"/config-types/{ids['CT1']}/configs")) == ["C1", "C2"]
    assert await names(admin, f"/config-types/{ids['CT2']}/configs") == ["C3"]
    assert sorted(await names(admin, f"/services/{ids['Sa']}/configs")) == ["C1", "C3"]
    assert await names(admin, f"/services/{ids['Sb']}/configs") == ["C1"]
    assert sorted(await names(admin, f"/configs/{ids['C1']}/services")) == ["Sa", "Sb"]
    assert await names(admin, f"/configs/{ids['C2']}/services") == []

    assert (await admin.patch(f"/services/{ids['Sa']}", {"configs": [ids["C2"]]})).status == 200
    assert await names(admin, f"/configs/{ids['C3']}/services") == []
    assert await names(admin, f"/configs/{ids['C2']}/services") == ["Sa"]
    assert await names(admin, f"/services/{ids['Sa']}/configs") == ["C2"]
    filtered = await admin.get(f"/config-types/{ids['CT1']}/configs", query={"filter": 'name = "C2"'})
    assert [row["name"] for row in filtered.data] == ["C2"]
    assert filtered.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 1}
    for path, singular in (("/config-types/nope/configs", "configType"), ("/configs/nope/services", "config")):
        missing = await admin.get(path)
        assert missing.status == 404
        assert missing.error["cause"]["message"] == f"{singular} with id nope not found"


async def test_service_terminators(admin: Api) -> None:
    router = await admin.create("/routers", {"name": "tr"})
    service = await admin.create("/services", {"name": "s", "encryptionRequired": True})
    other = await admin.create("/services", {"name": "t", "encryptionRequired": True})
    first = await admin.create("/terminators", {"service": service, "router": router, "address": "tcp:a:1",
                                                "binding": "transport"})
    second = await admin.create("/terminators", {"service": service, "router": router, "address": "tcp:b:2",
                                                 "binding": "transport"})
    await admin.create("/terminators", {"service": other, "router": router, "address": "tcp:c:3",
                                        "binding": "transport"})
    reply = await admin.get(f"/services/{service}/terminators")
    assert reply.status == 200
    assert sorted(row["id"] for row in reply.data) == sorted([first, second])
    assert reply.body["meta"]["pagination"]["totalCount"] == 2
    assert (await admin.delete(f"/terminators/{first}")).status == 200
    assert [row["id"] for row in (await admin.get(f"/services/{service}/terminators")).data] == [second]
