"""``tollgate policy-advice``, ``tollgate posture`` and ``tollgate db`` against a real controller."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from controller.admin.exits import ExitCode
from tests.admin.conftest import Cli

CLIENT = "/edge/client/v1"


@contextmanager
def _client_login(cli: Cli, username: str, password: str) -> Iterator[httpx.Client]:
    """A Client API session of an endpoint (what an SDK would hold)."""
    with httpx.Client(base_url=cli.server.url + CLIENT, verify=ssl.create_default_context(cafile=cli.server.ca),
                      timeout=30) as client:
        reply = client.post("/authenticate", params={"method": "password"},
                            json={"username": username, "password": password})
        assert reply.status_code == 200, reply.text
        client.headers["zt-session"] = reply.json()["data"]["token"]
        yield client


def _endpoint(cli: Cli, name: str) -> str:
    identity_id = cli.ok("create", "identity", name, "--role-attributes", name).stdout.strip()
    cli.ok("create", "authenticator", "--identity", name, "--method", "updb", "--username", name, "--password",
           f"{name}-password")
    return identity_id


def test_policy_advice_explains_access_and_routers(logged_in: Cli) -> None:
    identity_id = _endpoint(logged_in, "adv-user")
    service_id = logged_in.ok("create", "service", "adv-svc").stdout.strip()
    logged_in.ok("create", "service", "adv-closed")
    denied = logged_in.ok("policy-advice", "adv-user", "adv-closed").stdout
    assert "dial:            not allowed\n" in denied
    assert denied.endswith("verdict:         no service policy lets the identity dial or bind the service\n")
    logged_in.ok("create", "service-policy", "adv-dial", "--type", "Dial", "--identity-roles", "@adv-user",
                 "--service-roles", "@adv-svc")
    no_router = logged_in.ok("policy-advice", "adv-user", "adv-svc").stdout
    assert no_router.splitlines()[-1] == ("verdict:         dial allowed, but no edge router serves both: check the "
                                          "edge router policies and the service edge router policies")
    logged_in.ok("create", "edge-router", "adv-er")
    logged_in.ok("create", "edge-router-policy", "adv-erp", "--identity-roles", "@adv-user", "--edge-router-roles",
                 "@adv-er")
    logged_in.ok("create", "service-edge-router-policy", "adv-serp", "--service-roles", "@adv-svc",
                 "--edge-router-roles", "@adv-er")
    advice = logged_in.ok("policy-advice", "adv-user", service_id).stdout
    assert advice == (f"identity:        adv-user ({identity_id})\n"
                      f"service:         adv-svc ({service_id})\n"
                      "dial:            allowed\n"
                      "bind:            not allowed\n"
                      "edge routers:    1 for the identity, 1 for the service, 1 in common\n"
                      "  adv-er  offline\n"
                      "verdict:         dial allowed, but none of the common edge routers is online\n")
    raw = json.loads(logged_in.ok("policy-advice", identity_id, "adv-svc", "--json").stdout)
    assert (raw["isDialAllowed"], raw["isBindAllowed"], raw["identityRouterCount"]) == (True, False, 1)
    assert logged_in("policy-advice", "adv-user", "no-such-svc").exit_code == ExitCode.NOT_FOUND


def test_posture_shows_posture_data_and_failed_service_requests(logged_in: Cli) -> None:
    identity_id = _endpoint(logged_in, "pos-user")
    service_id = logged_in.ok("create", "service", "pos-svc").stdout.strip()
    check_id = logged_in.ok("create", "posture-check", "pos-domain", "--type", "DOMAIN", "--domains",
                            "corp.example").stdout.strip()
    logged_in.ok("create", "service-policy", "pos-dial", "--type", "Dial", "--identity-roles", "@pos-user",
                 "--service-roles", "@pos-svc", "--posture-check-roles", "@pos-domain")
    quiet = logged_in.ok("posture", "pos-user").stdout
    assert "domain:   not reported\n" in quiet and quiet.endswith("failed service requests: none\n")
    with _client_login(logged_in, "pos-user", "pos-user-password") as endpoint:
        reply = endpoint.post("/posture-response", json={"id": check_id, "typeId": "DOMAIN",
                                                         "domain": "home.example"})
        assert reply.status_code < 300, reply.text
        refused = endpoint.post("/sessions", json={"serviceId": service_id, "type": "Dial"})
        assert refused.status_code == 409, refused.text
        api_session = endpoint.get("/current-api-session").json()["data"]["id"]
        report = logged_in.ok("posture", "pos-user").stdout
    lines = report.splitlines()
    assert lines[2].startswith("domain:   home.example (updated ")
    assert f"  {api_session}: mfa not passed, woken -, unlocked -" in lines
    assert "failed service requests: 1" in lines
    failure = lines[lines.index("failed service requests: 1") + 1]
    assert failure.endswith(f"  Dial pos-svc  (api session {api_session})")
    assert lines[-1] == "    policy pos-dial: pos-domain (DOMAIN): has home.example, needs corp.example"
    raw = json.loads(logged_in.ok("posture", identity_id, "--json").stdout)
    assert raw["postureData"]["domain"]["domain"] == "home.example"
    assert [f["serviceId"] for f in raw["failedServiceRequests"]] == [service_id]


def test_db_snapshot_check_fix_and_results(logged_in: Cli) -> None:
    assert logged_in.ok("db", "snapshot").stdout.startswith("snapshot written")
    again = logged_in("db", "snapshot")  # at most one a minute
    assert again.exit_code == ExitCode.API_ERROR
    assert again.stderr.startswith("error: RATE_LIMITED: ") and again.stderr.count("\n") == 1
    checked = logged_in.ok("db", "check", "--wait").stdout
    assert checked.splitlines()[2:] == ["status:   finished", "fixing:   no", "problems: 0"]
    fixed = json.loads(logged_in.ok("db", "check", "--fix", "--wait", "--json").stdout)
    assert (fixed["inProgress"], fixed["fixingErrors"], fixed["error"], fixed["results"] or []) == (False, True, None,
                                                                                                    [])
    assert logged_in.ok("db", "results", "--yaml").stdout.startswith("startTime: ")
    started = logged_in.ok("db", "check").stdout
    assert started == "integrity check started; see its results with: tollgate db results\n"
