"""Role selectors of service policies and the lists computed from them, through the management API.

The matrix is the reference controller's service policy test: services S1{r1}, S2{r1,r2}, S3{}; identities
I1{a1}, I2{a1,a2}, I3{a2}; six policies P1..P6.
"""

from __future__ import annotations

from typing import Any

from tests.support import Api

ROLES_REASON = "role entries must prefixed with # (to indicate role attributes) or @ (to indicate a name or id)"

# Policy name -> (semantic, serviceRoles, identityRoles); "@X" is replaced by the id of entity X.
POLICIES: dict[str, tuple[str, list[str], list[str]]] = {
    "P1": ("AllOf", ["#r1"], ["#a1"]),
    "P2": ("AllOf", ["#r1", "@S3"], ["#a1", "@I3"]),
    "P3": ("AllOf", ["@S2", "@S3"], ["@I2", "@I3"]),
    "P4": ("AllOf", ["#all"], ["#all"]),
    "P5": ("AllOf", ["#r1", "#r2"], ["#a1", "#a2"]),
    "P6": ("AnyOf", ["#r1", "#r2"], ["#a1", "#a2"]),
}


async def matrix(admin: Api) -> dict[str, str]:
    """Create the services, identities and policies of the matrix; returns name -> id."""
    ids: dict[str, str] = {}
    for name, attrs in (("S1", ["r1"]), ("S2", ["r1", "r2"]), ("S3", [])):
        ids[name] = await admin.create("/services", {"name": name, "encryptionRequired": True,
                                                     "roleAttributes": attrs})
    for name, attrs in (("I1", ["a1"]), ("I2", ["a1", "a2"]), ("I3", ["a2"])):
        ids[name] = await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False,
                                                       "roleAttributes": attrs})
    for name, (semantic, services, identities) in POLICIES.items():
        ids[name] = await admin.create("/service-policies", {
            "name": name, "type": "Dial", "semantic": semantic,
            "serviceRoles": resolve(ids, services), "identityRoles": resolve(ids, identities)})
    return ids


def resolve(ids: dict[str, str], roles: list[str]) -> list[str]:
    return [f"@{ids[r[1:]]}" if r.startswith("@") else r for r in roles]


async def names(admin: Api, path: str, **query: Any) -> list[str]:
    """Names in a list answer (all pages), in the order served."""
    reply = await admin.get(path, query={"limit": "-1", **query})
    assert reply.status == 200, reply.body
    return [row["name"] for row in reply.data]


async def all_identity_names(admin: Api) -> list[str]:
    return await names(admin, "/identities")


async def test_policy_matrix_selects_services_and_identities(admin: Api) -> None:
    ids = await matrix(admin)
    everyone = await all_identity_names(admin)
    assert sorted(everyone) == sorted(["Default Admin", "I1", "I2", "I3"])
    expected = {
        "P1": (["S1", "S2"], ["I1", "I2"]),
        "P2": (["S1", "S2", "S3"], ["I1", "I2", "I3"]),
        "P3": (["S2", "S3"], ["I2", "I3"]),
        "P4": (["S1", "S2", "S3"], everyone),
        "P5": (["S2"], ["I2"]),
        "P6": (["S1", "S2"], ["I1", "I2", "I3"]),
    }
    for policy, (services, identities) in expected.items():
        assert sorted(await names(admin, f"/service-policies/{ids[policy]}/services")) == services, policy
        assert sorted(await names(admin, f"/service-policies/{ids[policy]}/identities")) == sorted(identities), policy


async def test_reverse_lists_name_the_selecting_policies(admin: Api) -> None:
    ids = await matrix(admin)
    expected = {
        "S1": ["P1", "P2", "P4", "P6"],
        "S2": ["P1", "P2", "P3", "P4", "P5", "P6"],
        "S3": ["P2", "P3", "P4"],
        "I1": ["P1", "P2", "P4", "P6"],
        "I2": ["P1", "P2", "P3", "P4", "P5", "P6"],
        "I3": ["P2", "P3", "P4", "P6"],
    }
    for entity, policies in expected.items():
        kind = "services" if entity.startswith("S") else "identities"
        assert sorted(await names(admin, f"/{kind}/{ids[entity]}/service-policies")) == policies, entity


async def test_policy_update_and_delete_change_reverse_lists(admin: Api) -> None:
    ids = await matrix(admin)
    assert (await admin.patch(f"/service-policies/{ids['P1']}", {"identityRoles": ["#a2"],
                                                                 "serviceRoles": ["@" + ids["S3"]]})).status == 200
    assert sorted(await names(admin, f"/service-policies/{ids['P1']}/identities")) == ["I2", "I3"]
    assert sorted(await names(admin, f"/service-policies/{ids['P1']}/services")) == ["S3"]
    assert sorted(await names(admin, f"/identities/{ids['I1']}/service-policies")) == ["P2", "P4", "P6"]
    assert sorted(await names(admin, f"/identities/{ids['I3']}/service-policies")) == ["P1", "P2", "P3", "P4", "P6"]
    assert sorted(await names(admin, f"/services/{ids['S1']}/service-policies")) == ["P2", "P4", "P6"]
    assert sorted(await names(admin, f"/services/{ids['S3']}/service-policies")) == ["P1", "P2", "P3", "P4"]

    # A PUT replaces every role list: P5 now selects by AnyOf.
    put = await admin.put(f"/service-policies/{ids['P5']}", {"name": "P5", "type": "Bind", "semantic": "AnyOf",
                                                             "identityRoles": ["#a1"], "serviceRoles": ["#r2"]})
    assert put.status == 200, put.body
    assert sorted(await names(admin, f"/service-policies/{ids['P5']}/identities")) == ["I1", "I2"]
    assert "P5" in await names(admin, f"/identities/{ids['I1']}/service-policies")

    assert (await admin.delete(f"/service-policies/{ids['P2']}")).status == 200
    assert sorted(await names(admin, f"/identities/{ids['I3']}/service-policies")) == ["P1", "P3", "P4", "P6"]
    assert sorted(await names(admin, f"/services/{ids['S3']}/service-policies")) == ["P1", "P3", "P4"]


async def test_entity_attribute_changes_move_it_between_policies(admin: Api) -> None:
    ids = await matrix(admin)
    assert (await admin.patch(f"/identities/{ids['I3']}", {"roleAttributes": ["a1", "a2"]})).status == 200
    assert sorted(await names(admin, f"/identities/{ids['I3']}/service-policies")) == [
        "P1", "P2", "P3", "P4", "P5", "P6"]
    assert sorted(await names(admin, f"/service-policies/{ids['P5']}/identities")) == ["I2", "I3"]
    assert (await admin.patch(f"/services/{ids['S2']}", {"roleAttributes": []})).status == 200
    assert sorted(await names(admin, f"/services/{ids['S2']}/service-policies")) == ["P3", "P4"]
    assert await names(admin, f"/service-policies/{ids['P5']}/services") == []


async def test_deleting_an_entity_strips_it_from_role_lists(admin: Api) -> None:
    ids = await matrix(admin)
    assert (await admin.delete(f"/identities/{ids['I3']}")).status == 200
    assert (await admin.delete(f"/services/{ids['S3']}")).status == 200
    p2 = (await admin.get(f"/service-policies/{ids['P2']}")).data
    assert p2["identityRoles"] == ["#a1"]
    assert p2["identityRolesDisplay"] == [{"role": "#a1", "name": "#a1"}]
    assert p2["serviceRoles"] == ["#r1"]
    p3 = (await admin.get(f"/service-policies/{ids['P3']}")).data
    assert p3["identityRoles"] == [f"@{ids['I2']}"]
    assert p3["serviceRoles"] == [f"@{ids['S2']}"]
    assert sorted(await names(admin, f"/service-policies/{ids['P3']}/identities")) == ["I2"]
    assert sorted(await names(admin, f"/service-policies/{ids['P2']}/services")) == ["S1", "S2"]


async def test_roles_are_stored_sorted_with_display_names(admin: Api) -> None:
    identity = await admin.create("/identities", {"name": "zed", "type": "User", "isAdmin": False})
    check = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["c"]})
    created = await admin.post("/service-policies", {
        "name": "sorted", "type": "Bind", "semantic": "AnyOf",
        "identityRoles": [f"@{identity}", "#b", "#a"], "serviceRoles": ["#all"],
        "postureCheckRoles": [f"@{check}", "#c"]})
    assert created.status == 201, created.body
    policy = (await admin.get(f"/service-policies/{created.data['id']}")).data
    assert policy["identityRoles"] == ["#a", "#b", f"@{identity}"]
    assert policy["identityRolesDisplay"] == [{"role": "#a", "name": "#a"}, {"role": "#b", "name": "#b"},
                                              {"role": f"@{identity}", "name": "@zed"}]
    assert policy["serviceRolesDisplay"] == [{"role": "#all", "name": "#all"}]
    assert policy["postureCheckRolesDisplay"] == [{"role": "#c", "name": "#c"}, {"role": f"@{check}", "name": "@mfa"}]
    assert await names(admin, f"/service-policies/{policy['id']}/posture-checks") == ["mfa"]
    assert await names(admin, f"/service-policies/{policy['id']}/identities") == ["zed"]


async def test_policy_selects_posture_checks(admin: Api) -> None:
    first = await admin.create("/posture-checks", {"name": "m1", "typeId": "MFA", "roleAttributes": ["x", "y"]})
    await admin.create("/posture-checks", {"name": "m2", "typeId": "MFA", "roleAttributes": ["x"]})
    await admin.create("/posture-checks", {"name": "m3", "typeId": "MFA", "roleAttributes": ["z"]})
    all_of = await admin.create("/service-policies", {"name": "all-of", "type": "Dial", "semantic": "AllOf",
                                                      "postureCheckRoles": ["#x", "#y"]})
    any_of = await admin.create("/service-policies", {"name": "any-of", "type": "Dial", "semantic": "AnyOf",
                                                      "postureCheckRoles": ["#y", "#z"]})
    assert await names(admin, f"/service-policies/{all_of}/posture-checks") == ["m1"]
    assert sorted(await names(admin, f"/service-policies/{any_of}/posture-checks")) == ["m1", "m3"]
    assert (await admin.patch(f"/service-policies/{all_of}", {"postureCheckRoles": ["#x"]})).status == 200
    assert sorted(await names(admin, f"/service-policies/{all_of}/posture-checks")) == ["m1", "m2"]
    assert (await admin.delete(f"/posture-checks/{first}")).status == 200
    assert await names(admin, f"/service-policies/{any_of}/posture-checks") == ["m3"]


async def test_role_list_validation_errors(admin: Api) -> None:
    ids = await matrix(admin)
    base = {"name": "bad", "type": "Dial", "semantic": "AllOf"}
    cases: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"identityRoles": ["#a1", "a2", "b"]},
         {"field": "identityRoles", "reason": ROLES_REASON, "value": "[a2 b]"}),
        ({"serviceRoles": ["#all", "#r1"]},
         {"field": "serviceRoles", "reason": "if using #all, it should be the only role specified",
          "value": "[#all #r1]"}),
        ({"identityRoles": [f"@{ids['I1']}", "@nope"]},
         {"field": "identityRoles", "reason": "no identity found with the given ids", "value": "[nope]"}),
        ({"serviceRoles": [f"@{ids['I1']}"]},
         {"field": "serviceRoles", "reason": "no service found with the given ids", "value": f"[{ids['I1']}]"}),
        ({"postureCheckRoles": ["@nope"]},
         {"field": "postureCheckRoles", "reason": "no postureCheck found with the given ids", "value": "[nope]"}),
    ]
    for roles, cause in cases:
        reply = await admin.post("/service-policies", {**base, **roles})
        assert reply.status == 400, roles
        assert reply.error["code"] == "COULD_NOT_VALIDATE"
        assert reply.error["cause"] == cause
        patched = await admin.patch(f"/service-policies/{ids['P1']}", roles)
        assert patched.status == 400, roles
        assert patched.error["cause"] == cause
    assert await names(admin, "/service-policies", filter='name = "bad"') == []
    p1 = (await admin.get(f"/service-policies/{ids['P1']}")).data
    assert (p1["identityRoles"], p1["serviceRoles"], p1["postureCheckRoles"]) == (["#a1"], ["#r1"], [])


async def test_semantic_is_required_and_enumerated(admin: Api) -> None:
    missing = await admin.post("/service-policies", {"name": "p", "type": "Dial"})
    assert missing.status == 400
    assert missing.error["code"] == "COULD_NOT_VALIDATE"
    assert missing.error["cause"]["field"] == "semantic"
    wrong = await admin.post("/service-policies", {"name": "p", "type": "Dial", "semantic": "OneOf"})
    assert wrong.status == 400
    assert wrong.error["cause"]["field"] == "semantic"


async def test_role_filter_on_identities(admin: Api) -> None:
    ids = await matrix(admin)
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"roleFilter": "#a1"}, ["I1", "I2"]),
        ({"roleFilter": ["#a1", "#a2"]}, ["I2"]),
        ({"roleFilter": ["#a1", "#a2"], "roleSemantic": "AllOf"}, ["I2"]),
        ({"roleFilter": ["#a1", "#a2"], "roleSemantic": "AnyOf"}, ["I1", "I2", "I3"]),
        ({"roleFilter": ["#a1", "#a2"], "roleSemantic": "anyof"}, ["I1", "I2", "I3"]),
        ({"roleFilter": ["#a1", f"@{ids['I3']}"]}, ["I1", "I2", "I3"]),
        ({"roleFilter": [f"@{ids['I1']}", "@unknown", "#a2"]}, ["I1", "I2", "I3"]),
        ({"roleFilter": ["@unknown"]}, []),
        ({"roleFilter": "#nothing"}, []),
        ({"roleFilter": "#all"}, []),  # not special here: the literal attribute "all"
        ({"roleFilter": "#a1", "filter": 'name != "I1"'}, ["I2"]),
    ]
    for query, expected in cases:
        assert sorted(await names(admin, "/identities", **query)) == expected, query


async def test_role_filter_pages_and_sorts_on_top(admin: Api) -> None:
    await matrix(admin)
    reply = await admin.get("/identities", query={"roleFilter": ["#a1", "#a2"], "roleSemantic": "AnyOf",
                                                  "sort": "name desc", "limit": "2", "offset": "1"})
    assert reply.status == 200
    assert [row["name"] for row in reply.data] == ["I2", "I1"]
    assert reply.body["meta"]["pagination"] == {"limit": 2, "offset": 1, "totalCount": 3}


async def test_role_filter_bad_semantic_and_entries(admin: Api) -> None:
    for path in ("/identities", "/services", "/posture-checks"):
        reply = await admin.get(path, query={"roleFilter": "#a1", "roleSemantic": "OneOf"})
        assert reply.status == 400, path
        assert reply.error["code"] == "COULD_NOT_VALIDATE"
        assert reply.error["cause"]["field"] == "semantic"
        assert reply.error["cause"]["value"] == "OneOf"
    unprefixed = await admin.get("/identities", query={"roleFilter": "a1"})
    assert unprefixed.status == 400
    assert unprefixed.error["code"] == "COULD_NOT_VALIDATE"
    assert unprefixed.error["cause"]["field"] == "roleFilter"


async def test_role_filter_on_services_and_posture_checks(admin: Api) -> None:
    ids = await matrix(admin)
    assert sorted(await names(admin, "/services", roleFilter="#r1")) == ["S1", "S2"]
    assert sorted(await names(admin, "/services", roleFilter=["#r2", f"@{ids['S3']}"])) == ["S2", "S3"]
    assert sorted(await names(admin, "/services", roleFilter=["#r1", "#r2"], roleSemantic="AnyOf")) == ["S1", "S2"]
    for name, attrs in (("c1", ["x"]), ("c2", ["x", "y"]), ("c3", ["y"])):
        await admin.create("/posture-checks", {"name": name, "typeId": "MFA", "roleAttributes": attrs})
    assert sorted(await names(admin, "/posture-checks", roleFilter=["#x", "#y"])) == ["c2"]
    assert sorted(await names(admin, "/posture-checks", roleFilter=["#x", "#y"], roleSemantic="AnyOf")) == [
        "c1", "c2", "c3"]


async def attributes(admin: Api, path: str, **query: Any) -> list[str]:
    reply = await admin.get(path, query=query)
    assert reply.status == 200, reply.body
    assert reply.body["meta"]["filterableFields"] == ["id"]
    assert reply.body["meta"]["pagination"]["totalCount"] == len(reply.data)
    return list(reply.data)


async def test_role_attribute_lists(admin: Api) -> None:
    ids = await matrix(admin)
    await admin.create("/posture-checks", {"name": "c", "typeId": "MFA", "roleAttributes": ["pc-b", "pc-a"]})
    assert await attributes(admin, "/identity-role-attributes") == ["a1", "a2"]
    assert await attributes(admin, "/service-role-attributes") == ["r1", "r2"]
    assert await attributes(admin, "/posture-check-role-attributes") == ["pc-a", "pc-b"]
    assert await attributes(admin, "/identity-role-attributes", filter='id contains "2"') == ["a2"]
    assert await attributes(admin, "/service-role-attributes", filter='id contains "r" sort by id desc') == [
        "r2", "r1"]
    # limit/offset parameters are ignored on these lists.
    assert await attributes(admin, "/service-role-attributes", limit="1", offset="1") == ["r1", "r2"]
    # An attribute disappears once no entity carries it.
    assert (await admin.patch(f"/identities/{ids['I2']}", {"roleAttributes": ["a1"]})).status == 200
    assert await attributes(admin, "/identity-role-attributes") == ["a1", "a2"]
    assert (await admin.delete(f"/identities/{ids['I3']}")).status == 200
    assert await attributes(admin, "/identity-role-attributes") == ["a1"]
    assert (await admin.patch(f"/services/{ids['S2']}", {"roleAttributes": ["r1", "new"]})).status == 200
    assert await attributes(admin, "/service-role-attributes") == ["new", "r1"]
