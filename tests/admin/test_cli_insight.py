"""``tollgate events`` and ``tollgate access`` against a real controller over TLS."""

from __future__ import annotations

import json

from controller.admin.insight_verbs import _stream
from tests.admin.conftest import Cli, Server


def _network(server: Server) -> tuple[str, str]:
    with server.admin_client() as client:
        client.create("edge-routers", {"name": "er-cli", "roleAttributes": ["er"]})
        client.create("edge-router-policies", {"name": "erp-cli", "semantic": "AnyOf", "identityRoles": ["#all"],
                                               "edgeRouterRoles": ["#all"]})
        client.create("service-edge-router-policies", {"name": "serp-cli", "semantic": "AnyOf",
                                                       "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
        service = client.create("services", {"name": "wiki", "encryptionRequired": True,
                                             "roleAttributes": ["intranet"]})
        client.create("posture-checks", {"name": "corp-mac", "typeId": "MAC", "roleAttributes": ["laptops"],
                                         "macAddresses": ["aa-bb-cc-dd-ee-ff"], "reportOnly": True})
        client.create("service-policies", {"name": "staff-dial", "type": "Dial", "semantic": "AnyOf",
                                           "identityRoles": ["#staff"], "serviceRoles": ["#intranet"],
                                           "postureCheckRoles": ["#laptops"]})
        alice = client.create("identities", {"name": "alice", "type": "User", "isAdmin": False,
                                             "roleAttributes": ["staff"]})
    return alice, service


def test_access_explains_and_events_show_what_happened(logged_in: Cli, server: Server) -> None:
    alice, service = _network(server)
    text = logged_in.ok("access", "alice", "wiki").stdout
    assert "Dial: Dial allowed through staff-dial" in text
    assert "check corp-mac (MAC) [report-only] FAILS: no MAC address was reported" in text
    assert "edge routers in common: er-cli (offline)" in text
    data = json.loads(logged_in.ok("access", alice, service, "--json").stdout)
    assert data["sessionTypes"][0]["code"] == "GRANTED" and data["identity"]["id"] == alice

    shown = logged_in.ok("events", "type=entityChange", "service=wiki").stdout.strip().splitlines()
    assert len(shown) == 1 and "entityChange.created" in shown[0] and f"entityId={service}" in shown[0]
    lines = logged_in.ok("events", "identity=alice", "--json").stdout.strip().splitlines()
    assert [json.loads(line)["entityId"] for line in lines] == [alice]
    refused = logged_in("events", "color=red")
    assert refused.exit_code == 2 and "NAME=VALUE" in refused.stderr


def test_following_resumes_after_the_last_event_shown(server: Server) -> None:
    with server.admin_client() as client:
        latest = client.request("GET", "events", params={"limit": 1})[-1]["event_id"]
        client.create("services", {"name": "followed", "encryptionRequired": True})
        stream = _stream(client, {"type": "entityChange"}, latest)
        event = next(stream)
        stream.close()
    assert (event["entityType"], event["eventType"]) == ("services", "created")
    assert event["event_id"] > latest
