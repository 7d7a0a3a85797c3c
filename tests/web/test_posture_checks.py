"""Posture check CRUD over the management API: the six types, their rules and accepted spellings (behavior.md §1.4
and the differences #8, #10, #11, #12)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Api

HASH = "AB" * 32
FINGERPRINT = "CD" * 20

# One valid create body per type, and the type fields as stored.
CHECKS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "OS": (
        {"operatingSystems": [{"type": "Windows", "versions": [">=10.0.19041"]},
                              {"type": "Linux", "versions": []}]},
        {"operatingSystems": [{"type": "Linux", "versions": []},
                              {"type": "Windows", "versions": [">=10.0.19041"]}]},
    ),
    "MAC": (
        {"macAddresses": ["AA:BB:CC:DD:EE:FF", "001122334455", "0a-0b-0c-0d-0e-0f"]},
        {"macAddresses": ["aa-bb-cc-dd-ee-ff", "00-11-22-33-44-55", "0a-0b-0c-0d-0e-0f"]},
    ),
    "MFA": (
        {"timeoutSeconds": 300, "promptOnWake": True},
        {"timeoutSeconds": 300, "promptOnWake": True, "promptOnUnlock": False, "ignoreLegacyEndpoints": False},
    ),
    "PROCESS": (
        {"process": {"osType": "Windows", "path": "C:\\bin\\agent.exe", "hashes": [HASH],
                     "signerFingerprint": FINGERPRINT}},
        {"process": {"osType": "Windows", "path": "C:\\bin\\agent.exe", "hashes": [HASH.lower()],
                     "signerFingerprint": FINGERPRINT.lower()}},
    ),
    "PROCESS_MULTI": (
        {"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/usr/bin/agent", "hashes": [HASH],
                                             "signerFingerprints": [FINGERPRINT]}]},
        {"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/usr/bin/agent", "hashes": [HASH.lower()],
                                             "signerFingerprints": [FINGERPRINT.lower()]}]},
    ),
    "DOMAIN": (
        {"domains": ["corp.example.com", "LAB"]},
        {"domains": ["corp.example.com", "LAB"]},
    ),
}


def _type_fields(data: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in expected}


async def _create(admin: Api, type_id: str, name: str = "check", **extra: Any) -> dict[str, Any]:
    body = {"name": name, "typeId": type_id, **CHECKS[type_id][0], **extra}
    reply = await admin.post("/posture-checks", body)
    assert reply.status == 201, reply.body
    return dict(reply.data)


async def _detail(admin: Api, check_id: str) -> dict[str, Any]:
    reply = await admin.get(f"/posture-checks/{check_id}")
    assert reply.status == 200, reply.body
    return dict(reply.data)


async def _all(admin: Api) -> list[Any]:
    return list((await admin.get("/posture-checks", query={"limit": "-1"})).data)


def _assert_invalid(reply: Any, field_prefix: str, code: str = "COULD_NOT_VALIDATE") -> None:
    assert reply.status == 400, reply.body
    assert reply.error["code"] == code, reply.body
    if code == "COULD_NOT_VALIDATE":
        assert reply.error["cause"]["field"].startswith(field_prefix), reply.body


@pytest.mark.parametrize("type_id", list(CHECKS))
async def test_create_detail_and_list_every_type(admin: Api, type_id: str) -> None:
    stored = CHECKS[type_id][1]
    created = await _create(admin, type_id, roleAttributes=["#looks-like-a-selector", "@fine"],
                            tags={"owner": "sec"})
    assert created["typeId"] == type_id
    assert created["version"] == 1
    assert created["isSystem"] is False
    assert created["roleAttributes"] == ["#looks-like-a-selector", "@fine"]  # not validated for checks
    assert created["tags"] == {"owner": "sec"}
    assert _type_fields(created, stored) == stored
    assert created["_links"]["self"]["href"] == f"./posture-checks/{created['id']}"
    assert await _detail(admin, created["id"]) == created
    assert await _all(admin) == [created]


@pytest.mark.parametrize("type_id", list(CHECKS))
async def test_put_replaces_the_whole_check_and_keeps_its_type(admin: Api, type_id: str) -> None:
    body, stored = CHECKS[type_id]
    created = await _create(admin, type_id, roleAttributes=["a"], tags={"k": "v"})
    reply = await admin.put(f"/posture-checks/{created['id']}", {"name": "renamed", **body})
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    after = await _detail(admin, created["id"])
    assert (after["name"], after["typeId"], after["version"]) == ("renamed", type_id, 1)
    assert (after["roleAttributes"], after["tags"]) == ([], {})
    assert _type_fields(after, stored) == stored
    # With typeId sent, the same rules apply.
    reply = await admin.put(f"/posture-checks/{created['id']}", {"name": "again", "typeId": type_id, **body})
    assert reply.status == 200, reply.body
    assert (await _detail(admin, created["id"]))["name"] == "again"


async def test_put_resets_mfa_options_to_defaults(admin: Api) -> None:
    created = await _create(admin, "MFA", promptOnUnlock=True, ignoreLegacyEndpoints=True)
    assert (await admin.put(f"/posture-checks/{created['id']}", {"name": "plain", "typeId": "MFA"})).status == 200
    after = await _detail(admin, created["id"])
    assert _type_fields(after, CHECKS["MFA"][1]) == {"timeoutSeconds": -1, "promptOnWake": False,
                                                     "promptOnUnlock": False, "ignoreLegacyEndpoints": False}


@pytest.mark.parametrize("type_id", list(CHECKS))
async def test_put_without_the_type_fields_is_refused(admin: Api, type_id: str) -> None:
    created = await _create(admin, type_id)
    required = [k for k in CHECKS[type_id][0] if type_id != "MFA"]
    for field in required:
        body = {"name": "x", "typeId": type_id, **CHECKS[type_id][0]}
        del body[field]
        reply = await admin.put(f"/posture-checks/{created['id']}", body)
        _assert_invalid(reply, field)
        assert reply.error["cause"]["reason"] == f"{field} in body is required"
    assert await _detail(admin, created["id"]) == created


async def test_the_type_of_a_check_cannot_change(admin: Api) -> None:
    created = await _create(admin, "MFA")
    reply = await admin.put(f"/posture-checks/{created['id']}", {"name": "x", "typeId": "MAC",
                                                                  **CHECKS["MAC"][0]})
    _assert_invalid(reply, "typeId")
    reply = await admin.patch(f"/posture-checks/{created['id']}", {"typeId": "OS"})
    _assert_invalid(reply, "typeId")
    assert await _detail(admin, created["id"]) == created


async def test_patch_needs_the_type(admin: Api) -> None:
    created = await _create(admin, "MFA")
    reply = await admin.patch(f"/posture-checks/{created['id']}", {"promptOnWake": False})
    _assert_invalid(reply, "typeId")
    assert reply.error["cause"] == {"field": "typeId", "reason": "typeId in body is required", "value": "<nil>"}
    assert await _detail(admin, created["id"]) == created


async def test_patch_touches_only_the_fields_sent(admin: Api) -> None:
    mfa = await _create(admin, "MFA", name="mfa", roleAttributes=["a"])
    reply = await admin.patch(f"/posture-checks/{mfa['id']}",
                              {"typeId": "MFA", "promptOnUnlock": True, "timeoutSeconds": 30})
    assert reply.status == 200, reply.body
    after = await _detail(admin, mfa["id"])
    assert (after["promptOnWake"], after["promptOnUnlock"], after["timeoutSeconds"]) == (True, True, 30)
    assert (after["name"], after["roleAttributes"], after["version"]) == ("mfa", ["a"], 1)

    os_check = await _create(admin, "OS", name="os")
    assert (await admin.patch(f"/posture-checks/{os_check['id']}",
                              {"typeId": "OS", "tags": {"a": "1"}})).status == 200
    after = await _detail(admin, os_check["id"])
    assert after["operatingSystems"] == CHECKS["OS"][1]["operatingSystems"]
    assert after["tags"] == {"a": "1"}
    # tags in a PATCH replace the whole map.
    assert (await admin.patch(f"/posture-checks/{os_check['id']}", {"typeId": "OS", "tags": {"b": "2"}})).status == 200
    assert (await _detail(admin, os_check["id"]))["tags"] == {"b": "2"}


async def test_patch_ignores_nulls(admin: Api) -> None:
    created = await _create(admin, "MFA", roleAttributes=["a"], tags={"k": "v"})
    reply = await admin.patch(f"/posture-checks/{created['id']}", {
        "typeId": "MFA", "name": None, "roleAttributes": None, "tags": None, "promptOnWake": None,
        "timeoutSeconds": None})
    assert reply.status == 200, reply.body
    after = await _detail(admin, created["id"])
    assert {k: v for k, v in after.items() if k != "updatedAt"} == {
        k: v for k, v in created.items() if k != "updatedAt"}


async def test_patch_of_type_fields_is_validated(admin: Api) -> None:
    mac = await _create(admin, "MAC")
    reply = await admin.patch(f"/posture-checks/{mac['id']}", {"typeId": "MAC", "macAddresses": ["nope"]})
    _assert_invalid(reply, "macAddresses[0]")
    reply = await admin.patch(f"/posture-checks/{mac['id']}", {"typeId": "MAC", "macAddresses": ["AABBCCDDEEF0"]})
    assert reply.status == 200
    assert (await _detail(admin, mac["id"]))["macAddresses"] == ["aa-bb-cc-dd-ee-f0"]


@pytest.mark.parametrize("mode", ["create", "put", "patch"])
async def test_unknown_type_is_could_not_parse_body(admin: Api, mode: str) -> None:
    existing = await _create(admin, "MFA")
    before = await _all(admin)
    body = {"name": "x", "typeId": "RETINA"}
    if mode == "create":
        reply = await admin.post("/posture-checks", body)
    else:
        reply = await admin.request(mode.upper(), f"/posture-checks/{existing['id']}", body)
    assert reply.status == 400, reply.body
    assert reply.error["code"] == "COULD_NOT_PARSE_BODY"
    assert reply.error["cause"]["code"] == "UNHANDLED"
    assert "RETINA" in reply.error["cause"]["message"]
    assert await _all(admin) == before


async def test_version_is_always_one(admin: Api) -> None:
    created = await _create(admin, "MFA")
    for timeout in (10, 20, 30):
        await admin.patch(f"/posture-checks/{created['id']}", {"typeId": "MFA", "timeoutSeconds": timeout})
    await admin.put(f"/posture-checks/{created['id']}", {"name": "x", "typeId": "MFA"})
    assert (await _detail(admin, created["id"]))["version"] == 1


# Per-type rules ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sent", "stored"), [(0, -1), (-30, -1), (None, -1), (1, 1), (3600, 3600)])
async def test_mfa_timeout_at_or_below_zero_is_minus_one(admin: Api, sent: int | None, stored: int) -> None:
    body: dict[str, Any] = {"name": "mfa", "typeId": "MFA"}
    if sent is not None:
        body["timeoutSeconds"] = sent
    reply = await admin.post("/posture-checks", body)
    assert reply.data["timeoutSeconds"] == stored
    check_id = reply.data["id"]
    await admin.patch(f"/posture-checks/{check_id}", {"typeId": "MFA", "timeoutSeconds": 0})
    assert (await _detail(admin, check_id))["timeoutSeconds"] == -1


async def test_os_entries_are_sorted_deduplicated_and_spelled_as_the_reference(admin: Api) -> None:
    created = await _create(admin, "OS", operatingSystems=[
        {"type": "WINDOWS", "versions": ["10.0.0"]},
        {"type": "macos", "versions": [">=13.0.0"]},
        {"type": "Android", "versions": []},
        {"type": "windows", "versions": [">=11.0.0 <12.0.0"]},
        {"type": "IOS", "versions": ["17.x"]},
    ])
    assert created["operatingSystems"] == [
        {"type": "Android", "versions": []},
        {"type": "Windows", "versions": [">=11.0.0 <12.0.0"]},
        {"type": "iOS", "versions": ["17.x"]},
        {"type": "macOS", "versions": [">=13.0.0"]},
    ]


@pytest.mark.parametrize(("entries", "field"), [
    ([{"type": "Windows", "versions": ["10.0"]}], "operatingSystems[0].versions[0]"),
    ([{"type": "Linux", "versions": []}, {"type": "Windows", "versions": ["1.0.0", "not a version"]}],
     "operatingSystems[1].versions[1]"),
    ([{"type": "Windows", "versions": [""]}], "operatingSystems[0].versions[0]"),
    ([{"type": "Plan9", "versions": []}], "operatingSystems[0].type"),
    ([], "operatingSystems"),
])
async def test_os_versions_are_validated(admin: Api, entries: list[Any], field: str) -> None:
    reply = await admin.post("/posture-checks", {"name": "os", "typeId": "OS", "operatingSystems": entries})
    _assert_invalid(reply, field)
    assert reply.error["cause"]["field"] == field
    assert await _all(admin) == []


@pytest.mark.parametrize(("addresses", "field"), [
    (["aa:bb:cc:dd:ee"], "macAddresses[0]"),
    (["aa-bb-cc-dd-ee-ff", "gg-bb-cc-dd-ee-ff"], "macAddresses[1]"),
    (["aa:bb-cc:dd:ee:ff"], "macAddresses[0]"),
    (["aabbccddeeff00"], "macAddresses[0]"),
    ([], "macAddresses"),
])
async def test_mac_addresses_are_validated(admin: Api, addresses: list[str], field: str) -> None:
    reply = await admin.post("/posture-checks", {"name": "mac", "typeId": "MAC", "macAddresses": addresses})
    _assert_invalid(reply, field)
    assert reply.error["cause"]["field"] == field


@pytest.mark.parametrize(("process", "field"), [
    ({"osType": "Linux", "path": "/a", "hashes": ["ab" * 31]}, "process.hashes[0]"),
    ({"osType": "Linux", "path": "/a", "hashes": ["zz" * 32]}, "process.hashes[0]"),
    ({"osType": "Linux", "path": "/a", "signerFingerprint": "ab" * 32}, "process.signerFingerprint"),
    ({"osType": "Linux", "path": ""}, "process.path"),
    ({"osType": "Linux"}, "process.path"),
])
async def test_process_hashes_and_fingerprints_are_validated(admin: Api, process: dict[str, Any],
                                                             field: str) -> None:
    reply = await admin.post("/posture-checks", {"name": "p", "typeId": "PROCESS", "process": process})
    _assert_invalid(reply, field)
    assert reply.error["cause"]["field"] == field


@pytest.mark.parametrize(("processes", "field"), [
    ([{"osType": "Linux", "path": "/a", "signerFingerprints": ["ab" * 19]}], "processes[0].signerFingerprints[0]"),
    ([{"osType": "Linux", "path": "/a"}, {"osType": "Linux", "path": "/b", "hashes": ["x"]}],
     "processes[1].hashes[0]"),
    ([], "processes"),
])
async def test_process_multi_entries_are_validated(admin: Api, processes: list[Any], field: str) -> None:
    reply = await admin.post("/posture-checks", {"name": "pm", "typeId": "PROCESS_MULTI", "semantic": "AnyOf",
                                                 "processes": processes})
    _assert_invalid(reply, field)
    assert reply.error["cause"]["field"] == field


@pytest.mark.parametrize(("domains", "field"), [([], "domains"), ([""], "domains[0]"), (["ok", ""], "domains[1]")])
async def test_domains_must_not_be_empty(admin: Api, domains: list[str], field: str) -> None:
    reply = await admin.post("/posture-checks", {"name": "d", "typeId": "DOMAIN", "domains": domains})
    _assert_invalid(reply, field)
    assert reply.error["cause"]["field"] == field


# The admin guide's spellings (difference #10) --------------------------------------------------------------


async def test_guide_spellings_are_accepted_and_stored_in_the_reference_spelling(admin: Api) -> None:
    multi = await _create(admin, "PROCESS_MULTI", name="multi", semantic="OneOf", processes=[
        {"os": "WINDOWS", "path": "C:\\a.exe"}, {"osType": "linux", "path": "/b"}])
    assert multi["semantic"] == "AnyOf"
    assert multi["processes"] == [
        {"osType": "Windows", "path": "C:\\a.exe", "hashes": [], "signerFingerprints": []},
        {"osType": "Linux", "path": "/b", "hashes": [], "signerFingerprints": []}]
    single = await admin.post("/posture-checks", {"name": "single", "typeId": "PROCESS",
                                                  "process": {"os": "MacOS", "path": "/Applications/a"}})
    assert single.status == 201, single.body
    assert single.data["process"] == {"osType": "macOS", "path": "/Applications/a", "hashes": [],
                                      "signerFingerprint": ""}
    domain = await admin.post("/posture-checks", {"name": "domain", "typeId": "DOMAIN",
                                                  "macAddresses": ["corp.example"]})
    assert domain.status == 201, domain.body
    assert domain.data["domains"] == ["corp.example"]
    assert "macAddresses" not in domain.data


async def test_guide_spellings_work_in_put_and_patch(admin: Api) -> None:
    domain = await _create(admin, "DOMAIN", name="domain")
    # PUT without typeId keeps the stored type, and the DOMAIN alias still applies.
    reply = await admin.put(f"/posture-checks/{domain['id']}", {"name": "domain", "macAddresses": ["other"]})
    assert reply.status == 200, reply.body
    assert (await _detail(admin, domain["id"]))["domains"] == ["other"]
    multi = await _create(admin, "PROCESS_MULTI", name="multi")
    reply = await admin.patch(f"/posture-checks/{multi['id']}", {"typeId": "PROCESS_MULTI", "semantic": "OneOf"})
    assert reply.status == 200, reply.body
    after = await _detail(admin, multi["id"])
    assert after["semantic"] == "AnyOf"
    assert after["processes"] == CHECKS["PROCESS_MULTI"][1]["processes"]


async def test_conflicting_spellings_are_refused(admin: Api) -> None:
    reply = await admin.post("/posture-checks", {"name": "d", "typeId": "DOMAIN", "domains": ["a"],
                                                 "macAddresses": ["b"]})
    _assert_invalid(reply, "macAddresses")
    reply = await admin.post("/posture-checks", {"name": "p", "typeId": "PROCESS",
                                                 "process": {"os": "Linux", "osType": "Windows", "path": "/a"}})
    _assert_invalid(reply, "process.os")
    assert await _all(admin) == []


# Posture check types (difference #8) and deletes ---------------------------------------------------------


async def test_posture_check_types_list_all_six(admin: Api) -> None:
    reply = await admin.get("/posture-check-types")
    assert reply.status == 200
    assert sorted(row["id"] for row in reply.data) == sorted(CHECKS)
    assert reply.body["meta"]["pagination"]["totalCount"] == 6
    names = {row["id"]: row["name"] for row in reply.data}
    assert names["OS"] == "Operating System Check"
    assert names["MFA"] == "MFA Check"
    detail = await admin.get("/posture-check-types/MFA")
    assert detail.status == 200
    assert detail.data["id"] == "MFA"
    assert detail.data["_links"]["self"]["href"] == "./posture-check-types/MFA"
    assert isinstance(detail.data["operatingSystems"], list)
    missing = await admin.get("/posture-check-types/RETINA")
    assert (missing.status, missing.error["cause"]["message"]) == (
        404, "postureCheckType with id RETINA not found")


async def test_deleting_a_check_strips_it_from_service_policies(admin: Api) -> None:
    keep = await _create(admin, "MFA", name="keep")
    gone = await _create(admin, "MAC", name="gone")
    policy_id = await admin.create("/service-policies", {
        "name": "dial", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#all"], "serviceRoles": ["#all"],
        "postureCheckRoles": [f"@{keep['id']}", f"@{gone['id']}", "#mfa"]})
    reply = await admin.delete(f"/posture-checks/{gone['id']}")
    assert reply.status == 200, reply.body
    policy = (await admin.get(f"/service-policies/{policy_id}")).data
    assert policy["postureCheckRoles"] == sorted([f"@{keep['id']}", "#mfa"])
    assert [r["role"] for r in policy["postureCheckRolesDisplay"]] == policy["postureCheckRoles"]
    assert (await admin.get(f"/posture-checks/{gone['id']}")).status == 404
