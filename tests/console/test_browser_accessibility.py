"""Every page template of the console passes axe-core (bundled by axe-playwright-python) with no serious or
critical violation, with its Content Security Policy in force. With ``TOLLGATE_DOC_SCREENSHOTS=DIR`` the main pages
are also saved there as PNG files (the README's pictures come from docs/console/)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import pyotp
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.console.conftest import log_in
from tests.console.support import ServerThread, api
from tests.console.test_browser_views import MODEL

TEMPLATES = Path(__file__).resolve().parents[2] / "web" / "console" / "templates" / "console"
PARTIALS = {"base.html", "fields.html", "results.html", "posture.html", "events.html", "event_row.html",
            "event_gap.html", "access_answer.html", "access_picker.html"}
"""Templates that are parts of pages (each is checked inside the pages that include it)."""
DOC_SCREENSHOTS = os.environ.get("TOLLGATE_DOC_SCREENSHOTS")
_axe = Axe()


class Audit:
    """The pages checked so far, by template, and what axe found on them."""

    def __init__(self) -> None:
        self.checked: set[str] = set()
        self.problems: list[str] = []

    def check(self, page: Page, template: str, shot: str | None = None) -> None:
        results: Any = _axe.run(page)
        for violation in results.response["violations"]:
            if violation.get("impact") in ("serious", "critical"):
                targets = [node.get("target") for node in violation.get("nodes", [])][:3]
                self.problems.append(f"{template}: {violation['id']} ({violation['impact']}): {targets}")
        self.checked.add(template)
        if DOC_SCREENSHOTS and shot:
            Path(DOC_SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(DOC_SCREENSHOTS) / f"{shot}.png"), full_page=False)


def test_every_page_template_passes_axe(page: Page, browser: Browser, server: ServerThread) -> None:
    audit = Audit()
    url = server.url
    with api(server) as client:
        service = client.post("/services", json={"name": "wiki", "encryptionRequired": True,
                                                 "roleAttributes": ["intranet"]}).json()["data"]["id"]
        client.post("/service-policies", json={"name": "staff-dial", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": ["#staff"], "serviceRoles": ["#intranet"]})
        identity = client.post("/identities", json={"name": "laptop", "type": "Device", "isAdmin": False,
                                                    "roleAttributes": ["staff"], "enrollment": {"ott": True}})
        identity_id = identity.json()["data"]["id"]
        for number in range(12):
            client.post("/identities", json={"name": f"user-{number:02d}", "type": "User", "isAdmin": False,
                                             "roleAttributes": ["staff"]})
        client.post("/authenticators", json={"identityId": identity_id, "method": "updb", "username": "laptop",
                                             "password": "laptop-password"})
        client.post("/edge-routers", json={"name": "er1", "roleAttributes": ["er"]})
        client.post("/edge-router-policies", json={"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                   "edgeRouterRoles": ["#all"]})
        client.post("/service-edge-router-policies", json={"name": "serp", "semantic": "AnyOf",
                                                           "serviceRoles": ["#all"],
                                                           "edgeRouterRoles": ["#all"]})
        client.post("/posture-checks", json={"name": "mac-check", "typeId": "MAC", "roleAttributes": ["mac"],
                                             "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
        client.post("/service-policies", json={"name": "laptop-mac", "type": "Dial", "semantic": "AllOf",
                                               "identityRoles": [f"@{identity_id}"], "serviceRoles": [f"@{service}"],
                                               "postureCheckRoles": ["#mac"]})

    page.goto(f"{url}/console/login")
    audit.check(page, "login.html", "login")
    log_in(page, url)
    audit.check(page, "overview.html", "overview")
    page.goto(f"{url}/console/identities?sort=name")
    audit.check(page, "list.html", "identities")
    page.goto(f"{url}/console/services/{service}")
    audit.check(page, "detail.html")
    page.goto(f"{url}/console/identities/{identity_id}")
    expect(page.locator("figure.qr svg")).to_be_visible()
    audit.check(page, "identity.html", "identity")
    page.goto(f"{url}/console/identities/{identity_id}/posture")
    audit.check(page, "posture_page.html")
    page.goto(f"{url}/console/identities/{identity_id}/access/{service}")
    expect(page.locator("#verdict")).to_contain_text("Dial allowed through staff-dial")
    audit.check(page, "access.html", "access")
    page.goto(f"{url}/console/identities/{identity_id}/access?service=no-such-service")
    audit.check(page, "access_pick.html")
    page.goto(f"{url}/console/posture-checks/new")
    audit.check(page, "variants.html")
    page.goto(f"{url}/console/posture-checks/new?typeId=OS")
    audit.check(page, "form.html", "posture-check-os")
    page.goto(f"{url}/console/service-policies/new")
    page.locator("[name='name']").fill("staff-dial")
    page.get_by_role("button", name="Create").click()  # a refusal beside its field
    expect(page.locator("#form-error")).to_be_visible()
    audit.check(page, "form.html", "service-policy-refused")
    page.goto(f"{url}/console/services/{service}/delete")
    audit.check(page, "delete.html", "delete")
    page.goto(f"{url}/console/model")
    audit.check(page, "model.html")
    page.get_by_label("Or paste it").fill(MODEL.replace("wiki", "wiki2"))
    # Each click submits a form: the audit waits for the page it leads to (axe run mid-navigation finds no document).
    page.get_by_role("button", name="Preview the changes").click()
    expect(page.locator("#plan-summary")).to_be_visible()
    audit.check(page, "plan.html", "model-plan")
    page.get_by_role("button", name="Apply these changes").click()
    expect(page.locator("#apply-summary")).to_be_visible()
    audit.check(page, "applied.html")
    page.goto(f"{url}/console/identities/no-such-id")
    audit.check(page, "error.html")
    page.evaluate("""() => { const form = document.createElement('form'); form.method = 'post';
                     form.action = '/console/model/apply'; document.body.append(form); form.submit(); }""")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Refused")
    audit.check(page, "refused.html")

    other = browser.new_context()
    try:
        second = other.new_page()
        log_in(second, url, "laptop", "laptop-password")
        audit.check(second, "not_admin.html")
    finally:
        other.close()

    with httpx.Client(base_url=url + "/edge/client/v1", timeout=30) as client:
        client.headers["zt-session"] = client.post(
            "/authenticate", params={"method": "password"},
            json={"username": "admin", "password": "admin-password"}).json()["data"]["token"]
        client.post("/current-identity/mfa")
        secret = client.get("/current-identity/mfa").json()["data"]["provisioningUrl"].split("secret=")[1][:32]
        client.post("/current-identity/mfa/verify", json={"code": pyotp.TOTP(secret).at(int(time.time()))})
    page.goto(f"{url}/console/")
    page.get_by_role("button", name="Log out").click()
    log_in(page, url)
    expect(page.get_by_label("Code")).to_be_visible()
    audit.check(page, "mfa.html")

    pages = {path.name for path in TEMPLATES.glob("*.html")} - PARTIALS
    assert audit.checked == pages, f"not checked: {sorted(pages - audit.checked)}"
    assert not audit.problems, "\n".join(audit.problems)
