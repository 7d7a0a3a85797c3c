"""Posture insight in a real browser: an endpoint enrolled by the REST flow, its events and posture arriving live on
its identity page, and the access explanation turning from refused to allowed when it reports posture and passes
MFA, then back to refused when the MFA check's short timeout passes (the page counts down and refreshes itself),
reached and used with the keyboard alone; the overview's events, rates and controllers; no serious axe violation
on any of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyotp
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, Page, expect

from tests.console.conftest import WAIT_MS, log_in
from tests.console.support import CLIENT, ServerThread, api, enrolled_endpoint

MFA_TIMEOUT = 15
"""The MFA check's timeout: the page must show the allowed answer within it (a refresh takes well under a second),
and the test waits it out once."""
MAC = "AA:BB:CC:DD:EE:01"


def _model(server: ServerThread) -> tuple[str, str, str]:
    """A service, an identity to enrol and a Dial policy requiring a MAC and an MFA check; an edge router for both.
    Returns the identity's id, its one-time token and the service's id."""
    with api(server) as client:
        def create(path: str, body: dict[str, Any]) -> str:
            reply = client.post(path, json=body)
            assert reply.status_code == 201, reply.text
            return str(reply.json()["data"]["id"])

        create("/edge-routers", {"name": "er1", "roleAttributes": ["er"]})
        create("/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                         "edgeRouterRoles": ["#all"]})
        create("/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf", "serviceRoles": ["#all"],
                                                 "edgeRouterRoles": ["#all"]})
        create("/posture-checks", {"name": "mac-check", "typeId": "MAC", "roleAttributes": ["c"],
                                   "macAddresses": [MAC]})
        create("/posture-checks", {"name": "mfa-check", "typeId": "MFA", "roleAttributes": ["c"],
                                   "timeoutSeconds": MFA_TIMEOUT})
        service = create("/services", {"name": "wiki", "encryptionRequired": True})
        create("/service-policies", {"name": "staff-dial", "type": "Dial", "semantic": "AllOf",
                                     "identityRoles": ["#staff"], "serviceRoles": [f"@{service}"],
                                     "postureCheckRoles": ["#c"]})
        identity = create("/identities", {"name": "laptop", "type": "Device", "isAdmin": False,
                                          "roleAttributes": ["staff"], "enrollment": {"ott": True}})
        token = client.get(f"/identities/{identity}").json()["data"]["enrollment"]["ott"]["token"]
    return identity, str(token), service


def _check_row(page: Page, name: str) -> Any:
    return page.locator("#type-Dial").locator("xpath=..").get_by_role("row").filter(
        has=page.get_by_role("link", name=name, exact=True))


def _axe_clean(page: Page) -> None:
    results: Any = Axe().run(page)
    serious = [v["id"] for v in results.response["violations"] if v.get("impact") in ("serious", "critical")]
    assert not serious, serious


def test_access_turns_allowed_with_posture_and_refused_when_mfa_times_out(context: BrowserContext,
                                                                         tls_server: ServerThread,
                                                                         tmp_path: Path) -> None:
    url = tls_server.url
    identity_id, token, service_id = _model(tls_server)
    identity_page = context.new_page()
    log_in(identity_page, url)
    identity_page.goto(f"{url}/console/identities/{identity_id}")
    expect(identity_page.locator("#posture")).to_contain_text("No posture data reported yet")

    # The access page, reached from the identity page's picker with the keyboard alone.
    access = context.new_page()
    problems: list[str] = []
    access.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    access.goto(f"{url}/console/identities/{identity_id}")
    access.get_by_label("Service", exact=True).focus()
    access.keyboard.press("Tab")
    expect(access.get_by_role("button", name="Explain access")).to_be_focused()
    access.keyboard.press("Enter")
    expect(access).to_have_url(f"{url}/console/identities/{identity_id}/access/{service_id}")
    verdict = access.locator("#verdict")
    expect(verdict).to_contain_text("Dial refused (INVALID_POSTURE)")
    expect(access.locator("#access")).to_contain_text("with no API session")
    _axe_clean(access)

    events = identity_page.locator("[data-event-rows]")
    with enrolled_endpoint(tls_server, token, tmp_path) as (endpoint, session_id):
        # Its login arrives on both open pages as it happens.
        expect(events).to_contain_text("edge.apiSessions.created")
        expect(events).to_contain_text(session_id)
        expect(access.locator("#access")).to_contain_text(f"API session {session_id}")

        # The answer is swapped when it changes; the focus stays on the link it was on.
        policy_link = access.locator("#access").get_by_role("link", name="staff-dial", exact=True)
        policy_link.focus()
        reported = endpoint.post("/posture-response", json={"id": "mac", "typeId": "MAC", "macAddresses": [MAC]})
        assert reported.status_code == 201, reported.text
        expect(identity_page.locator("#posture")).to_contain_text(MAC.lower().replace(":", "-"))
        expect(identity_page.locator("#posture").get_by_role("link", name=session_id)).to_be_visible()
        expect(_check_row(access, "mac-check")).to_contain_text("passes")
        expect(_check_row(access, "mfa-check")).to_contain_text("fails")
        expect(verdict).to_contain_text("Dial refused (INVALID_POSTURE)")
        expect(policy_link).to_be_focused()

        assert endpoint.post("/current-identity/mfa").status_code == 201
        secret = endpoint.get("/current-identity/mfa").json()["data"]["provisioningUrl"].split("secret=")[1]
        verified = endpoint.post("/current-identity/mfa/verify", json={"code": pyotp.TOTP(secret[:32]).now()})
        assert verified.status_code == 200, verified.text
        expect(verdict).to_contain_text("Dial allowed through staff-dial")
        expect(access.locator("[data-deadline]")).to_have_text(re.compile(r"^(in \d+ s|now)$"))
        _axe_clean(access)

        # The deadline passes: the page asks again by itself and shows the MFA check failing.
        expect(verdict).to_contain_text("Dial refused (INVALID_POSTURE)", timeout=MFA_TIMEOUT * 1000 + WAIT_MS)
        expect(_check_row(access, "mfa-check")).to_contain_text("fails")
        expect(access.locator("#access")).to_contain_text("submit a TOTP code")

    # Keyboard only: from the top of the page, loaded afresh, to the policy that links them.
    access.reload()
    access.keyboard.press("Tab")
    expect(access.get_by_role("link", name="Skip to content")).to_be_focused()
    access.keyboard.press("Enter")
    policy = access.get_by_role("main").get_by_role("link", name="staff-dial", exact=True)
    for _ in range(40):
        access.keyboard.press("Tab")
        if policy.evaluate("link => link === document.activeElement"):
            break
    expect(policy).to_be_focused()
    access.keyboard.press("Enter")
    expect(access.get_by_role("heading", name="staff-dial", level=1)).to_be_visible()
    assert not problems, problems


def test_the_overview_shows_events_and_rates_live(page: Page, server: ServerThread) -> None:
    url = server.url
    with api(server) as client:
        reply = client.post("/services", json={"name": "wiki", "encryptionRequired": True})
        assert reply.status_code == 201, reply.text
        service_id = reply.json()["data"]["id"]
        reply = client.post("/service-policies", json={"name": "all-dial", "type": "Dial", "semantic": "AnyOf",
                                                      "identityRoles": ["#all"], "serviceRoles": ["#all"]})
        assert reply.status_code == 201, reply.text
    log_in(page, url)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_role("region", name="Controllers")).to_contain_text(url)
    # Every value the decisions rate shows, however briefly (each decision is in exactly one second's rate).
    page.evaluate("""() => {
        const shown = document.querySelector('[data-rate="decisions"]');
        window.mostDecisions = 0;
        new MutationObserver(() => {
            window.mostDecisions = Math.max(window.mostDecisions, parseFloat(shown.textContent) || 0);
        }).observe(shown, {childList: true, characterData: true, subtree: true});
    }""")
    expect(page.locator('[data-rate="revocations"]')).to_have_text(re.compile(r"^\d+(\.\d)?$"))

    with api(server, CLIENT) as endpoint:
        session = endpoint.get("/current-api-session").json()["data"]["id"]
        expect(page.locator("[data-event-rows]")).to_contain_text(f"API session {session} started")
        refused = endpoint.post("/sessions", json={"serviceId": service_id, "type": "Dial"})
        assert refused.status_code == 400, refused.text  # no edge router: decided all the same
        assert refused.json()["error"]["code"] == "NO_EDGE_ROUTERS_AVAILABLE"
    page.wait_for_function("() => window.mostDecisions > 0")
    _axe_clean(page)
