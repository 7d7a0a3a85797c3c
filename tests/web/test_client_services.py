"""The Client API's services: visibility, permissions, posture queries and their MFA numbers, list paging (the
bodies are held to the reference definitions in ``tests/web/test_view_conformance.py``).

Time-dependent numbers run on Trio's virtual clock and are asserted exactly.
"""

from __future__ import annotations

from typing import Any

import trio

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.support import Api, next_totp
from tests.web.test_client_posture import dial_policy, enrol_mfa, network, user


async def services(admin: Api) -> dict[str, str]:
    """The network of ``network`` plus a Bind-only service, a service nobody may use and one for ``#other``."""
    ids = await network(admin)
    ids["bind"] = await admin.create("/services", {"name": "bind-svc", "encryptionRequired": True,
                                                   "roleAttributes": ["b"]})
    ids["hidden"] = await admin.create("/services", {"name": "hidden-svc", "encryptionRequired": True})
    await admin.create("/service-policies", {"name": "p-bind", "type": "Bind", "semantic": "AnyOf",
                                             "identityRoles": ["#u"], "serviceRoles": ["#b"]})
    return ids


def by_policy(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(entry["policyId"]): entry for entry in service["postureQueries"]}


async def test_only_usable_services_are_visible(admin: Api) -> None:
    ids = await services(admin)
    await dial_policy(admin, "p-dial", [])
    _, client = await user(admin)

    listed = await client.get("/services")
    assert listed.status == 200
    assert {s["id"]: s["permissions"] for s in listed.data} == {ids["service"]: ["Dial"], ids["bind"]: ["Bind"]}
    assert listed.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 2}

    detail = await client.get(f"/services/{ids['bind']}")
    assert detail.status == 200
    assert detail.data["id"] == ids["bind"] and detail.data["name"] == "bind-svc"
    assert detail.data["permissions"] == ["Bind"]
    for field in ("config", "configs", "encryptionRequired", "maxIdleTimeMillis", "roleAttributes",
                  "terminatorStrategy", "postureQueries", "createdAt", "updatedAt", "tags", "_links"):
        assert field in detail.data, field

    hidden = await client.get(f"/services/{ids['hidden']}")
    assert hidden.status == 404
    assert hidden.error["code"] == "NOT_FOUND"
    assert (await client.get("/services/no-such-service")).status == 404
    refused = await client.post("/sessions", {"serviceId": ids["hidden"]})
    assert refused.status == 404
    assert refused.error["cause"] == {"code": "UNHANDLED", "message": f"service with id {ids['hidden']} not found"}


async def test_both_permissions_on_one_service(admin: Api) -> None:
    ids = await network(admin)
    await dial_policy(admin, "p-dial", [])
    await dial_policy(admin, "p-bind", [], "Bind")
    _, client = await user(admin)
    detail = await client.get(f"/services/{ids['service']}")
    assert detail.data["permissions"] == ["Dial", "Bind"]


async def test_dummy_queries_when_no_posture_check_exists(admin: Api) -> None:
    ids = await network(admin)
    await dial_policy(admin, "p-dial", [])
    await dial_policy(admin, "p-bind", [], "Bind")
    _, client = await user(admin)
    detail = await client.get(f"/services/{ids['service']}")
    assert sorted(detail.data["postureQueries"], key=lambda e: e["policyType"]) == [
        {"policyId": "dummy bind policy: no posture checks defined", "policyType": "Bind", "isPassing": True,
         "postureQueries": []},
        {"policyId": "dummy dial policy: no posture checks defined", "policyType": "Dial", "isPassing": True,
         "postureQueries": []},
    ]

    # One posture check anywhere (even unused) ends the dummies: the real policies show, with no queries.
    await admin.create("/posture-checks", {"name": "unused", "typeId": "DOMAIN", "domains": ["corp"]})
    detail = await client.get(f"/services/{ids['service']}")
    assert {(e["policyType"], e["isPassing"], len(e["postureQueries"])) for e in detail.data["postureQueries"]} == {
        ("Dial", True, 0), ("Bind", True, 0)}
    assert all(not e["policyId"].startswith("dummy") for e in detail.data["postureQueries"])


async def test_admin_sees_every_service_as_invalid_without_policies(admin: Api) -> None:
    ids = await network(admin)
    listed = await admin.as_client().get("/services")
    assert listed.status == 200
    assert [(s["id"], s["permissions"]) for s in listed.data] == [(ids["service"], ["Invalid"])]
    assert listed.data[0]["postureQueries"] == [
        {"policyId": "dummy invalid policy: no posture checks defined", "policyType": "Invalid", "isPassing": True,
         "postureQueries": []}]
    detail = await admin.as_client().get(f"/services/{ids['service']}")
    assert detail.status == 200 and detail.data["permissions"] == ["Invalid"]
    # Invalid is no permission: a session request is refused on the permission step.
    refused = await admin.as_client().post("/sessions", {"serviceId": ids["service"]})
    assert refused.status == 400
    assert refused.error["cause"] == {"field": "ServiceId", "reason": "service not found", "value": ids["service"]}


async def test_one_entry_per_linking_policy_with_its_queries(admin: Api) -> None:
    ids = await network(admin)
    mac = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                 "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    process = await admin.create("/posture-checks", {
        "name": "proc", "typeId": "PROCESS", "roleAttributes": ["proc"],
        "process": {"osType": "Windows", "path": "C:\\av.exe"}})
    multi = await admin.create("/posture-checks", {
        "name": "multi", "typeId": "PROCESS_MULTI", "roleAttributes": ["multi"], "semantic": "AnyOf",
        "processes": [{"osType": "Linux", "path": "/usr/bin/a"}, {"osType": "macOS", "path": "/bin/b"}]})
    mfa = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"]})
    dial_mac = await dial_policy(admin, "p-dial-mac", [f"@{mac}", f"@{process}"])
    dial_open = await dial_policy(admin, "p-dial-open", [])
    bind_multi = await dial_policy(admin, "p-bind-multi", [f"@{multi}", f"@{mfa}"], "Bind")
    _, client = await user(admin)
    assert (await client.post("/posture-response", {"id": "x", "typeId": "MAC",
                                                    "macAddresses": ["aa:bb:cc:dd:ee:ff"]})).status == 201

    entries = by_policy((await client.get(f"/services/{ids['service']}")).data)
    assert set(entries) == {dial_mac, dial_open, bind_multi}
    assert entries[dial_open] == {"policyId": dial_open, "policyType": "Dial", "isPassing": True,
                                  "postureQueries": []}
    assert entries[dial_mac]["policyType"] == "Dial" and entries[dial_mac]["isPassing"] is False
    assert entries[bind_multi]["policyType"] == "Bind" and entries[bind_multi]["isPassing"] is False

    queries = {q["id"]: q for e in entries.values() for q in e["postureQueries"]}
    assert set(queries) == {mac, process, multi, mfa}
    check = (await admin.get(f"/posture-checks/{mac}")).data
    assert queries[mac] == {"id": mac, "createdAt": check["createdAt"], "updatedAt": check["updatedAt"],
                            "tags": {}, "_links": {"self": {"href": f"./posture-checks/{mac}"}},
                            "queryType": "MAC", "isPassing": True, "timeout": -1, "timeoutRemaining": -1}
    assert queries[process]["queryType"] == "PROCESS" and queries[process]["isPassing"] is False
    assert queries[process]["process"] == {"osType": "Windows", "path": "C:\\av.exe"}
    assert (queries[process]["timeout"], queries[process]["timeoutRemaining"]) == (-1, -1)
    assert "processes" not in queries[process]
    assert queries[multi]["queryType"] == "PROCESS_MULTI"
    assert sorted(queries[multi]["processes"], key=lambda p: p["path"]) == [
        {"osType": "macOS", "path": "/bin/b"}, {"osType": "Linux", "path": "/usr/bin/a"}]
    assert "process" not in queries[multi]
    # An MFA check without a timeout: -1 / -1 whether or not MFA was passed.
    assert (queries[mfa]["queryType"], queries[mfa]["isPassing"]) == ("MFA", False)
    assert (queries[mfa]["timeout"], queries[mfa]["timeoutRemaining"]) == (-1, -1)


async def test_policies_of_other_identities_or_services_are_not_listed(admin: Api) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "dom", "typeId": "DOMAIN", "roleAttributes": ["dom"],
                                           "domains": ["corp"]})
    mine = await dial_policy(admin, "p-mine", ["#dom"])
    await admin.create("/service-policies", {"name": "p-others", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#someone-else"], "serviceRoles": ["#s"],
                                             "postureCheckRoles": ["#dom"]})
    await admin.create("/service-policies", {"name": "p-other-service", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#u"], "serviceRoles": ["#elsewhere"]})
    _, client = await user(admin)
    entries = by_policy((await client.get(f"/services/{ids['service']}")).data)
    assert list(entries) == [mine]
    assert entries[mine]["postureQueries"][0]["isPassing"] is False
    await client.post("/posture-response", {"id": "x", "typeId": "DOMAIN", "domain": "CORP"})
    entries = by_policy((await client.get(f"/services/{ids['service']}")).data)
    assert entries[mine]["isPassing"] is True and entries[mine]["postureQueries"][0]["isPassing"] is True


async def test_mfa_timeout_numbers_on_the_virtual_clock(admin: Api, controller: Controller,
                                                         autojump_clock: trio.testing.MockClock) -> None:
    ids = await network(admin)
    mfa = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                                 "timeoutSeconds": 600, "promptOnWake": True})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    _, client = await user(admin)
    check = (await admin.get(f"/posture-checks/{mfa}")).data

    async def query() -> dict[str, Any]:
        detail = await client.get(f"/services/{ids['service']}")
        [entry] = detail.data["postureQueries"]
        [found] = entry["postureQueries"]
        assert found["id"] == mfa
        return dict(found)

    before = await query()
    assert (before["isPassing"], before["timeout"], before["timeoutRemaining"]) == (False, 600, 0)
    assert before["updatedAt"] == check["updatedAt"]

    await enrol_mfa(client, controller)
    passed = await query()
    assert (passed["isPassing"], passed["timeout"], passed["timeoutRemaining"]) == (True, 600, 600)

    await trio.sleep(200)
    later = await query()
    assert (later["isPassing"], later["timeoutRemaining"]) == (True, 400)
    assert later["updatedAt"] == check["updatedAt"]

    woke_at = controller.clock.now()
    woke = await client.post("/posture-response", {"id": "x", "typeId": "ENDPOINT_STATE", "woken": True})
    assert woke.status == 201
    assert woke.data == {"services": [{"id": ids["service"], "name": "svc", "postureQueryType": "MFA",
                                       "timeout": 600, "timeoutRemaining": 300}]}
    awake = await query()
    assert awake["timeoutRemaining"] == 300
    assert awake["updatedAt"] == format_time(woke_at)  # the wake is newer than the check

    await trio.sleep(100)
    grace = await query()
    # min(600 - 300 since MFA, 300 - 100 since the wake)
    assert (grace["isPassing"], grace["timeoutRemaining"]) == (True, 200)

    await trio.sleep(200)
    expired = await query()
    assert (expired["isPassing"], expired["timeoutRemaining"]) == (False, 0)

    # PATCHing the check moves its updatedAt past the wake again.
    assert (await admin.patch(f"/posture-checks/{mfa}", {"typeId": "MFA", "tags": {"k": "v"}})).status == 200
    patched = (await admin.get(f"/posture-checks/{mfa}")).data
    assert (await query())["updatedAt"] == patched["updatedAt"]


async def test_list_filter_and_paging(admin: Api) -> None:
    await network(admin)
    for name in ("alpha", "beta", "gamma"):
        await admin.create("/services", {"name": name, "encryptionRequired": True, "roleAttributes": ["s"]})
    await admin.create("/services", {"name": "not-mine", "encryptionRequired": True})
    await dial_policy(admin, "p-dial", [])
    _, client = await user(admin)

    page = await client.get("/services", query={"limit": "2", "offset": "1", "sort": "name"})
    assert page.status == 200
    assert [s["name"] for s in page.data] == ["beta", "gamma"]
    assert page.body["meta"]["pagination"] == {"limit": 2, "offset": 1, "totalCount": 4}
    assert all(s["permissions"] == ["Dial"] for s in page.data)

    filtered = await client.get("/services", query={"filter": 'name contains "a"', "sort": "name desc"})
    assert [s["name"] for s in filtered.data] == ["gamma", "beta", "alpha"]
    assert filtered.body["meta"]["pagination"]["totalCount"] == 3

    hidden = await client.get("/services", query={"filter": 'name = "not-mine"'})
    assert hidden.data == [] and hidden.body["meta"]["pagination"]["totalCount"] == 0

    bad = await client.get("/services", query={"filter": "name = "})
    assert bad.status == 400 and bad.error["code"] == "INVALID_FILTER"


async def test_services_need_a_full_session(anon: Api) -> None:
    reply = await anon.as_client().get("/services")
    assert reply.status == 401 and reply.error["code"] == "UNAUTHORIZED"


async def test_legacy_sdks_see_no_remaining_time_when_the_check_ignores_them(
        admin: Api, anon: Api, controller: Controller, autojump_clock: trio.testing.MockClock) -> None:
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                           "timeoutSeconds": 600, "ignoreLegacyEndpoints": True})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    _, legacy = await user(admin)  # logs in without sdkInfo: a legacy endpoint
    secret = await enrol_mfa(legacy, controller)

    async def remaining(client: Api) -> int:
        [entry] = (await client.get(f"/services/{ids['service']}")).data["postureQueries"]
        return int(entry["postureQueries"][0]["timeoutRemaining"])

    assert await remaining(legacy) == -1
    for sdk, expected in (({"type": "ziti-sdk-c", "version": "0.25.0"}, 600),
                          ({"type": "ziti-sdk-c", "version": "0.24.9"}, -1),
                          ({"type": "ziti-sdk-golang", "version": "0.30.0"}, -1)):
        login = await anon.as_client().post("/authenticate", {"username": "user1", "password": "user-password",
                                                              "sdkInfo": sdk}, query={"method": "password"})
        assert login.status == 200
        client = anon.as_client().with_token(login.data["token"])
        assert (await client.post("/authenticate/mfa", {"code": await next_totp(controller, secret)})).status == 200
        assert await remaining(client) == expected, sdk


async def test_a_wake_reports_only_timers_it_shortens(admin: Api, controller: Controller,
                                                      autojump_clock: trio.testing.MockClock) -> None:
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                                   "timeoutSeconds": 600, "promptOnWake": True})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    _, client = await user(admin)
    await enrol_mfa(client, controller)
    woken = {"id": "x", "typeId": "ENDPOINT_STATE", "woken": True}
    unlocked = {"id": "x", "typeId": "ENDPOINT_STATE", "unlocked": True}
    await trio.sleep(299)
    # 301 s left: a wake starts the 300 s grace period.
    assert [s["id"] for s in (await client.post("/posture-response", woken)).data["services"]] == [ids["service"]]
    # The check does not prompt on unlock.
    assert (await client.post("/posture-response", unlocked)).data == {"services": []}
    await trio.sleep(1)
    # 300 s left: the grace period would not shorten anything.
    assert (await client.post("/posture-response", woken)).data == {"services": []}
    # What the check prompts on is read from the check as it is now.
    assert (await admin.patch(f"/posture-checks/{check}", {"typeId": "MFA", "timeoutSeconds": 900,
                                                            "promptOnUnlock": True})).status == 200
    reply = (await client.post("/posture-response", unlocked)).data["services"]
    assert [(s["id"], s["timeout"]) for s in reply] == [(ids["service"], 900)]
