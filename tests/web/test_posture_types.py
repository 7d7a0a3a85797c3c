"""Every posture check type end to end: posture responses in, session decisions and failed service requests out.

Each attempt asks for a fresh session (a granted one is deleted again), so every attempt is a new evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import trio

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.support import Api
from tests.web.test_client_posture import dial_policy, enrol_mfa, network, user

HASH_A = "a" * 64
HASH_B = "b" * 64
FP_A = "0123456789abcdef0123456789abcdef01234567"
FP_B = "fedcba9876543210fedcba9876543210fedcba98"


@dataclass
class Guarded:
    """A service behind one Dial policy holding one posture check, and a user who may dial it."""

    admin: Api
    client: Api
    identity_id: str
    service_id: str
    check_id: str
    policy_id: str
    check_type: str

    async def attempt(self) -> int:
        """Ask for a Dial session; delete it again when granted. Returns the status."""
        reply = await self.client.post("/sessions", {"serviceId": self.service_id, "type": "Dial"})
        if reply.status == 201:
            assert (await self.client.delete(f"/sessions/{reply.data['id']}")).status == 200
        elif reply.status == 409:
            assert reply.error["code"] == "INVALID_POSTURE"
            assert reply.error["cause"]["data"] == {
                self.policy_id: [{"id": self.check_id, "typeId": self.check_type, "isPassing": False}]}
        return reply.status

    async def report(self, *responses: dict[str, Any]) -> None:
        for response in responses:
            reply = await self.client.post("/posture-response", response)
            assert reply.status == 201, reply.body
            assert reply.data == {"services": []}

    async def failures(self) -> list[dict[str, Any]]:
        reply = await self.admin.get(f"/identities/{self.identity_id}/failed-service-requests")
        assert reply.status == 200
        return list(reply.data)

    async def last_failed_check(self) -> dict[str, Any]:
        last = (await self.failures())[-1]
        [policy] = last["policyFailures"]
        assert policy["policyId"] == self.policy_id and policy["policyName"] == "guard"
        [check] = policy["checks"]
        return dict(check)


async def guarded(admin: Api, check: dict[str, Any]) -> Guarded:
    ids = await network(admin)
    check_id = await admin.create("/posture-checks", {"name": "the-check", "roleAttributes": ["guard"], **check})
    policy_id = await dial_policy(admin, "guard", ["#guard"])
    identity_id, client = await user(admin)
    return Guarded(admin, client, identity_id, ids["service"], check_id, policy_id, check["typeId"])


def os_report(os_type: str, version: str, build: str | None = None) -> dict[str, Any]:
    body = {"id": "os", "typeId": "OS", "type": os_type, "version": version}
    if build is not None:
        body["build"] = build
    return body


async def test_os_ranges_build_rule_and_type(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "OS", "operatingSystems": [
        {"type": "Windows", "versions": [">=10.0.19000 <10.1.0 || >=11.0.0", "=9.9.9"]},
        {"type": "Linux", "versions": []}]})
    assert await g.attempt() == 409
    assert await g.last_failed_check() == {
        "postureCheckId": g.check_id, "postureCheckName": "the-check", "postureCheckType": "OS",
        "actualValue": {"type": "", "version": ""},
        "expectedValue": [{"type": "Linux", "versions": []},
                          {"type": "Windows", "versions": [">=10.0.19000 <10.1.0 || >=11.0.0", "=9.9.9"]}]}

    cases = [
        (os_report("Windows", "10.0.19045"), 201),
        (os_report("windows", "10.0.19045"), 201),  # the type is compared case-insensitively
        (os_report("Windows", "10.0", "19045"), 201),  # no patch level: the build is the patch
        (os_report("Windows", "10.0", "18363"), 409),
        (os_report("Windows", "10.0"), 409),  # no patch level and no build: no version
        (os_report("Windows", "10.0.19045.2965"), 201),  # four parts: the third is the patch
        (os_report("Windows", "10.5.0"), 409),  # between the two alternatives
        (os_report("Windows", "11.2.0"), 201),  # the second alternative of the first range
        (os_report("Windows", "9.9.9"), 201),  # the second range
        (os_report("Windows", "not-a-version"), 409),
        (os_report("Linux", "anything at all"), 201),  # no versions: any version
        (os_report("macOS", "14.0.0"), 409),  # a type the check does not list
    ]
    for report, expected in cases:
        await g.report(report)
        assert await g.attempt() == expected, report
    assert (await g.last_failed_check())["actualValue"] == {"type": "macOS", "version": "14.0.0"}


async def test_mac_addresses_are_normalised(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF", "001122334455"]})
    assert await g.attempt() == 409
    assert await g.last_failed_check() == {
        "postureCheckId": g.check_id, "postureCheckName": "the-check", "postureCheckType": "MAC",
        "actualValue": [], "expectedValue": ["aa-bb-cc-dd-ee-ff", "00-11-22-33-44-55"]}

    await g.report({"id": "m", "typeId": "MAC", "macAddresses": ["12:34:56:78:9A:BC", "not a mac"]})
    assert await g.attempt() == 409
    assert (await g.last_failed_check())["actualValue"] == ["12-34-56-78-9a-bc", "not a mac"]
    for spelling in ("aa-bb-cc-dd-ee-ff", "AABBCCDDEEFF", "00:11:22:33:44:55"):
        await g.report({"id": "m", "typeId": "MAC", "macAddresses": ["12:34:56:78:9a:bc", spelling]})
        assert await g.attempt() == 201, spelling
    await g.report({"id": "m", "typeId": "MAC", "macAddresses": []})
    assert await g.attempt() == 409


async def test_domain_is_case_insensitive(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "DOMAIN", "domains": ["Corp.Example"]})
    assert await g.attempt() == 409
    assert await g.last_failed_check() == {
        "postureCheckId": g.check_id, "postureCheckName": "the-check", "postureCheckType": "DOMAIN",
        "actualValue": "", "expectedValue": ["Corp.Example"]}
    for domain, expected in (("corp.example", 201), ("CORP.EXAMPLE", 201), ("sub.corp.example", 409),
                             (" corp.example", 409), ("corp", 409)):
        await g.report({"id": "d", "typeId": "DOMAIN", "domain": domain})
        assert await g.attempt() == expected, domain
    assert (await g.last_failed_check())["actualValue"] == "corp"


async def test_process_matches_by_check_id_hash_and_signer(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "PROCESS", "process": {
        "osType": "Windows", "path": "C:\\av.exe", "hashes": [HASH_A.upper()], "signerFingerprint": FP_A}})
    assert await g.attempt() == 409
    assert await g.last_failed_check() == {
        "postureCheckId": g.check_id, "postureCheckName": "the-check", "postureCheckType": "PROCESS",
        "actualValue": {"hash": "", "isRunning": False, "signerFingerprints": []},
        "expectedValue": {"osType": "Windows", "path": "C:\\av.exe", "hashes": [HASH_A],
                          "signerFingerprint": FP_A}}

    def process(check_id: str, **fields: Any) -> dict[str, Any]:
        return {"id": check_id, "typeId": "PROCESS", "path": "C:\\av.exe", "isRunning": True, "hash": HASH_A,
                "signerFingerprints": [FP_A], **fields}

    # Answered under another id: it does not count for this check.
    await g.report(process("some-other-check"))
    assert await g.attempt() == 409
    await g.report(process(g.check_id, hash=HASH_B))
    assert await g.attempt() == 409
    assert (await g.last_failed_check())["actualValue"] == {"hash": HASH_B, "isRunning": True,
                                                            "signerFingerprints": [FP_A]}
    await g.report(process(g.check_id, signerFingerprints=[FP_B]))
    assert await g.attempt() == 409
    await g.report(process(g.check_id, signerFingerprints=[]))
    assert await g.attempt() == 409
    # Upper case and separators are cleaned off the reported values.
    colons = ":".join(FP_A.upper()[i:i + 2] for i in range(0, 40, 2))
    await g.report(process(g.check_id, hash=HASH_A.upper(), signerFingerprints=[FP_B, colons]))
    assert await g.attempt() == 201
    await g.report(process(g.check_id, isRunning=False))
    assert await g.attempt() == 409
    assert (await g.last_failed_check())["actualValue"]["isRunning"] is False


async def test_process_without_hashes_or_signer_needs_only_running(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "PROCESS", "process": {"osType": "Linux", "path": "/usr/bin/agent"}})
    await g.report({"id": g.check_id, "typeId": "PROCESS", "path": "/elsewhere", "isRunning": True})
    assert await g.attempt() == 201  # the path is not compared: the record for the check id counts
    await g.report({"id": g.check_id, "typeId": "PROCESS"})
    assert await g.attempt() == 409


def multi_processes() -> list[dict[str, Any]]:
    return [{"osType": "Linux", "path": f"/opt/p{i}", "hashes": [HASH_A], "signerFingerprints": [FP_A]}
            for i in range(1, 5)]


def multi_report(check_id: str, i: int, **fields: Any) -> dict[str, Any]:
    return {"id": check_id, "typeId": "PROCESS", "path": f"/opt/p{i}", "isRunning": True, "hash": HASH_A,
            "signerFingerprints": [FP_A], **fields}


async def test_process_multi_all_of(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "PROCESS_MULTI", "semantic": "AllOf", "processes": multi_processes()})
    assert await g.attempt() == 409
    assert await g.last_failed_check() == {
        "postureCheckId": g.check_id, "postureCheckName": "the-check", "postureCheckType": "PROCESS_MULTI",
        "semantic": "AllOf", "actualValue": [], "expectedValue": multi_processes()}

    for i in (1, 2, 3):
        await g.report(multi_report(g.check_id, i))
        assert await g.attempt() == 409, i
    await g.report(multi_report(g.check_id, 4, hash=HASH_B))
    assert await g.attempt() == 409
    assert (await g.last_failed_check())["actualValue"] == [
        {"hash": HASH_B, "isRunning": True, "signerFingerprints": [FP_A], "path": "/opt/p4"}]
    await g.report(multi_report(g.check_id, 4))
    assert await g.attempt() == 201

    await g.report(multi_report(g.check_id, 2, isRunning=False))
    assert await g.attempt() == 409
    await g.report(multi_report(g.check_id, 2))
    assert await g.attempt() == 201


async def test_process_multi_any_of(admin: Api) -> None:
    g = await guarded(admin, {"typeId": "PROCESS_MULTI", "semantic": "AnyOf", "processes": multi_processes()})
    bad = [multi_report(g.check_id, 1, isRunning=False), multi_report(g.check_id, 2, hash=HASH_B),
           multi_report(g.check_id, 3, signerFingerprints=[FP_B]), multi_report(g.check_id, 4, path="/opt/P4")]
    for report in bad:
        await g.report(report)
        assert await g.attempt() == 409, report
    await g.report(multi_report(g.check_id, 3))
    assert await g.attempt() == 201


async def test_endpoint_state_is_stored_on_the_calling_api_session(admin: Api, controller: Controller,
                                                                   autojump_clock: trio.testing.MockClock) -> None:
    g = await guarded(admin, {"typeId": "MFA", "promptOnUnlock": True})
    assert await g.attempt() == 409
    mfa = await g.last_failed_check()
    assert mfa["postureCheckType"] == "MFA"
    assert mfa["actualValue"] == {"passedMfa": False, "passedOnWake": True, "passedOnUnlock": False,
                                  "timedOut": True}
    assert mfa["expectedValue"] == {"passedMfa": True, "passedOnWake": False, "passedOnUnlock": True,
                                    "timedOut": False}
    assert mfa["criteria"] == {"passedMfaAt": None, "wokenAt": None, "unlockedAt": None, "timeoutSeconds": -1,
                               "timeoutRemainingSeconds": -1}

    # Before MFA an unlock is recorded but changes no timer.
    unlocked_at = controller.clock.now()
    reply = await g.client.post("/posture-response", {"id": "e", "typeId": "ENDPOINT_STATE", "unlocked": True})
    assert reply.status == 201 and reply.data == {"services": []}
    session_id = (await g.client.get("/current-api-session")).data["id"]
    data = (await admin.get(f"/identities/{g.identity_id}/posture-data")).data
    assert data["apiSessionPostureData"][session_id]["endpointState"] == {"wokenAt": None,
                                                                         "unlockedAt": format_time(unlocked_at)}
    await trio.sleep(10)
    # False flags never clear a time.
    await g.client.post("/posture-response", {"id": "e", "typeId": "ENDPOINT_STATE", "unlocked": False,
                                              "woken": False})
    data = (await admin.get(f"/identities/{g.identity_id}/posture-data")).data
    assert data["apiSessionPostureData"][session_id]["endpointState"]["unlockedAt"] == format_time(unlocked_at)

    await enrol_mfa(g.client, controller)
    assert await g.attempt() == 201  # the unlock was before the MFA: ignored
    await trio.sleep(10)
    reply = await g.client.post("/posture-response", {"id": "e", "typeId": "ENDPOINT_STATE", "unlocked": True})
    assert reply.data == {"services": [{"id": g.service_id, "name": "svc", "postureQueryType": "MFA",
                                        "timeout": -1, "timeoutRemaining": 300}]}
    assert await g.attempt() == 201  # within the grace period
    await trio.sleep(300)
    assert await g.attempt() == 409
    failed = await g.last_failed_check()
    assert failed["actualValue"] == {"passedMfa": True, "passedOnWake": True, "passedOnUnlock": False,
                                     "timedOut": False}
    assert failed["criteria"]["unlockedAt"] == format_time(unlocked_at + 20)


async def test_bulk_responses_apply_together_or_not_at_all(admin: Api) -> None:
    ids = await network(admin)
    checks: list[dict[str, Any]] = [
        {"name": "os", "typeId": "OS", "operatingSystems": [{"type": "Linux", "versions": [">=5.0.0"]}]},
        {"name": "mac", "typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]},
        {"name": "dom", "typeId": "DOMAIN", "domains": ["corp"]},
        {"name": "proc", "typeId": "PROCESS", "process": {"osType": "Linux", "path": "/bin/agent"}},
    ]
    check_ids = [await admin.create("/posture-checks", {"roleAttributes": ["all4"], **c}) for c in checks]
    await dial_policy(admin, "all-four", ["#all4"])
    identity_id, client = await user(admin)
    good = [{"id": "o", "typeId": "OS", "type": "Linux", "version": "6.1.0"},
            {"id": "m", "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]},
            {"id": "d", "typeId": "DOMAIN", "domain": "CORP"},
            {"id": check_ids[3], "typeId": "PROCESS", "path": "/bin/agent", "isRunning": True},
            {"id": "e", "typeId": "ENDPOINT_STATE", "woken": True}]

    # One bad entry refuses the whole array and stores nothing.
    refused = await client.post("/posture-response-bulk", [*good[:2], {"id": "x", "typeId": "MFA"}])
    assert refused.status == 400 and refused.error["code"] == "COULD_NOT_PARSE_BODY"
    missing = await client.post("/posture-response-bulk", [good[0], {"id": "d", "typeId": "DOMAIN"}])
    assert missing.status == 400 and missing.error["cause"]["field"] == "domain"
    not_array = await client.post("/posture-response-bulk", good[0])
    assert not_array.status == 400 and not_array.error["code"] == "COULD_NOT_VALIDATE"
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    assert data["os"]["type"] is None and data["mac"]["addresses"] is None

    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
    reply = await client.post("/posture-response-bulk", good)
    assert reply.status == 201 and reply.data == {"services": []}
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    assert (data["os"]["type"], data["os"]["version"]) == ("Linux", "6.1.0")
    assert data["mac"]["addresses"] == ["aa-bb-cc-dd-ee-ff"] and data["domain"]["domain"] == "CORP"
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 201


async def test_failed_requests_newest_last_and_only_fifty_kept(admin: Api, controller: Controller,
                                                               autojump_clock: trio.testing.MockClock) -> None:
    g = await guarded(admin, {"typeId": "DOMAIN", "domains": ["corp"]})
    bind = await admin.create("/service-policies", {"name": "bind", "type": "Bind", "semantic": "AllOf",
                                                    "identityRoles": ["#u"], "serviceRoles": ["#s"],
                                                    "postureCheckRoles": ["#guard"]})
    session_id = (await g.client.get("/current-api-session")).data["id"]
    times = []
    for i in range(52):
        times.append(format_time(controller.clock.now()))
        await g.report({"id": "d", "typeId": "DOMAIN", "domain": f"d{i}"})
        if i == 51:
            reply = await g.client.post("/sessions", {"serviceId": g.service_id, "type": "Bind"})
            assert reply.status == 409
        else:
            assert await g.attempt() == 409
        await trio.sleep(1)

    failures = await g.failures()
    assert len(failures) == 50
    assert [f["when"] for f in failures] == times[2:]
    assert [f["policyFailures"][0]["checks"][0]["actualValue"] for f in failures] == [f"d{i}" for i in range(2, 52)]
    assert failures[0] == {
        "when": times[2], "serviceId": g.service_id, "serviceName": "svc", "apiSessionId": session_id,
        "sessionType": "Dial",
        "policyFailures": [{"policyId": g.policy_id, "policyName": "guard", "checks": [
            {"postureCheckId": g.check_id, "postureCheckName": "the-check", "postureCheckType": "DOMAIN",
             "actualValue": "d2", "expectedValue": ["corp"]}]}]}
    assert failures[-1]["sessionType"] == "Bind"
    assert failures[-1]["policyFailures"][0]["policyId"] == bind
