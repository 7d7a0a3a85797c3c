"""Lists whose whole view is in the URL, keyboard-only use, the model file's upload, preview, apply and export, and
the refusals a browser meets: a form posted from another origin, an identity that is no administrator."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from tests.console.conftest import log_in
from tests.console.support import ServerThread, api

MAX_TABS = 80
"""Tab presses a keyboard walk may take to reach its target before the test fails."""


def _focused(page: Page) -> str:
    """The focused element: its id, else its text."""
    return str(page.evaluate("document.activeElement.id || document.activeElement.textContent.trim()"))


def _tab_to(page: Page, target: str) -> None:
    """Press Tab until the element whose id or text is ``target`` has the focus."""
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        if _focused(page) == target:
            return
    raise AssertionError(f"{target!r} was not reached with Tab; the focus is on {_focused(page)!r}")


def test_keyboard_only_login_navigation_sort_and_delete(page: Page, server: ServerThread) -> None:
    with api(server) as client:
        for name in ("alpha", "beta", "gamma"):
            client.post("/services", json={"name": name, "encryptionRequired": True})
    page.goto(f"{server.url}/console/login")
    page.keyboard.press("Tab")
    assert _focused(page) == "Skip to content"
    _tab_to(page, "username")
    page.keyboard.type("admin")
    page.keyboard.press("Tab")
    assert _focused(page) == "password"
    page.keyboard.type("admin-password")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    page.keyboard.press("Tab")
    assert _focused(page) == "Skip to content"
    page.keyboard.press("Enter")
    assert _focused(page) == "main"
    page.keyboard.press("Shift+Tab")  # back out of main, into the navigation
    _tab_to(page, "Services")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/console/services$"))

    _tab_to(page, "sort-name")
    page.keyboard.press("Enter")  # ascending; htmx swaps the table and keeps the focus on the link
    expect(page.locator("th[aria-sort='ascending']")).to_have_count(1)
    assert _focused(page) == "sort-name"
    page.keyboard.press("Enter")  # the same link, now descending
    expect(page).to_have_url(re.compile(r"sort=name&order=desc"))
    expect(page.locator("th[aria-sort='descending']")).to_have_count(1)
    expect(page.locator("#results tbody tr").first).to_contain_text("gamma")
    assert _focused(page) == "sort-name"

    _tab_to(page, "gamma")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="gamma", level=1)).to_be_visible()
    _tab_to(page, "Delete…")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Delete gamma?")).to_be_visible()
    _tab_to(page, "Delete gamma")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Deleted service gamma.")).to_be_visible()


def test_a_lists_filter_sort_and_page_are_in_its_url(page: Page, browser: Browser, server: ServerThread) -> None:
    with api(server) as client:
        for number in range(30):
            client.post("/identities", json={"name": f"user-{number:02d}", "type": "User", "isAdmin": False,
                                             "roleAttributes": ["staff"] if number % 2 else ["guests"]})
    log_in(page, server.url)
    page.goto(f"{server.url}/console/identities")
    page.get_by_label("Role attribute").fill("staff")
    expect(page.locator("#results .count")).to_have_text("Rows 1 to 15 of 15")  # htmx: as it is typed
    expect(page).to_have_url(re.compile(r"role=staff"))
    assert _focused(page) == "filter-role"
    page.get_by_label("Filter (the API's filter language)").fill('name contains "1"')
    page.get_by_label("Rows per page").select_option("10")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#results .count")).to_have_text("Rows 1 to 7 of 7")  # 01 11 13 15 17 19 21
    page.locator("#sort-name").click()
    expect(page.locator("th[aria-sort='ascending']")).to_contain_text("Name")
    page.locator("#sort-name").click()
    expect(page.locator("th[aria-sort='descending']")).to_contain_text("Name")
    expect(page.locator("#results tbody tr").first).to_contain_text("user-21")
    shared = page.url
    assert "role=staff" in shared and "sort=name" in shared and "order=desc" in shared and "limit=10" in shared

    other = browser.new_context()
    try:
        second = other.new_page()
        log_in(second, server.url)
        second.goto(shared)
        expect(second.locator("#results .count")).to_have_text("Rows 1 to 7 of 7")
        expect(second.locator("#results tbody tr").first).to_contain_text("user-21")
        expect(second.locator("th[aria-sort='descending']")).to_contain_text("Name")
    finally:
        other.close()

    page.get_by_label("Filter (the API's filter language)").fill("")
    page.get_by_label("Role attribute").fill("")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#results .count")).to_have_text("Rows 1 to 10 of 31")
    page.get_by_role("link", name="Next page").click()
    expect(page.locator("#results .count")).to_have_text("Rows 11 to 20 of 31")
    expect(page).to_have_url(re.compile(r"offset=10"))
    page.get_by_label("Filter (the API's filter language)").fill("name = ")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#list-error")).to_contain_text("The filter query supplied is invalid")


MODEL = """\
posture-checks:
  - {name: corp-laptop, typeId: MAC, macAddresses: ["aa:bb:cc:dd:ee:ff"], roleAttributes: [laptops]}
services:
  - {name: wiki, encryptionRequired: true, roleAttributes: [intranet]}
service-policies:
  - {name: staff-dial-intranet, type: Dial, semantic: AnyOf, identityRoles: ["#staff"],
     serviceRoles: ["#intranet"], postureCheckRoles: ["#laptops"]}
"""


def test_apply_a_model_file_after_its_preview_and_export_it(page: Page, server: ServerThread, tmp_path: Path) -> None:
    log_in(page, server.url)
    page.goto(f"{server.url}/console/model")
    page.get_by_label("Model file (YAML)").set_input_files(
        files=[{"name": "network.yaml", "mimeType": "text/yaml", "buffer": MODEL.encode()}])
    page.get_by_role("button", name="Preview the changes").click()
    expect(page.locator("#plan-summary")).to_contain_text("3 to create, 0 to update, 0 to delete")
    expect(page.locator("pre.diff")).to_contain_text("+ create service-policies staff-dial-intranet")
    with api(server) as client:
        assert client.get("/services").json()["meta"]["pagination"]["totalCount"] == 0  # a preview changes nothing
    page.get_by_role("button", name="Apply these changes").click()
    expect(page.locator("#apply-summary")).to_have_text("Applied 3 changes.")
    with api(server) as client:
        policy = client.get("/service-policies", params={"filter": 'name = "staff-dial-intranet"'}).json()["data"][0]
        assert policy["serviceRoles"] == ["#intranet"] and policy["postureCheckRoles"] == ["#laptops"]

    page.goto(f"{server.url}/console/model")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the controller's model").click()
    exported = Path(download.value.path()).read_text()
    assert "staff-dial-intranet" in exported and "corp-laptop" in exported
    page.get_by_label("Or paste it").fill(exported.replace("intranet]", "intranet, wiki]"))
    page.get_by_role("button", name="Preview the changes").click()
    expect(page.locator("pre.diff")).to_contain_text('~ update services wiki: roleAttributes: ["intranet"] -> '
                                                     '["intranet", "wiki"]')
    page.get_by_role("button", name="Apply these changes").click()
    expect(page.locator("#apply-summary")).to_have_text("Applied 1 changes.")

    page.goto(f"{server.url}/console/model")
    page.get_by_label("Or paste it").fill("services:\n  - {name: bad, colour: blue}\n")
    page.get_by_role("button", name="Preview the changes").click()
    expect(page.locator("#model-error")).to_contain_text("unknown field 'colour'")


def test_a_form_posted_from_another_origin_is_refused(page: Page, server: ServerThread) -> None:
    with api(server) as client:
        service = client.post("/services", json={"name": "keep-me", "encryptionRequired": True}).json()["data"]["id"]
    log_in(page, server.url)
    evil = f"""<!doctype html><title>evil</title><form method="post"
        action="{server.url}/console/services/{service}/delete"><input name="csrf_token" value="guessed">
        <button type="submit">Win a prize</button></form>"""
    page.route("http://evil.test/**", lambda route: route.fulfill(status=200, content_type="text/html", body=evil))
    page.goto("http://evil.test/")
    page.get_by_role("button", name="Win a prize").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Refused")
    with api(server) as client:
        assert client.get(f"/services/{service}").status_code == 200


def test_an_identity_that_is_no_admin_sees_nothing(page: Page, server: ServerThread) -> None:
    with api(server) as client:
        client.post("/services", json={"name": "secret-service", "encryptionRequired": True})
        user = client.post("/identities", json={"name": "someone", "type": "User", "isAdmin": False}).json()
        client.post("/authenticators", json={"identityId": user["data"]["id"], "method": "updb",
                                             "username": "someone", "password": "someone-password"})
    log_in(page, server.url, "someone", "someone-password")
    expect(page.get_by_role("heading", name="Not an administrator")).to_be_visible()
    expect(page.get_by_role("navigation", name="Console")).to_have_count(0)
    for path in ("/console/services", "/console/identities", "/console/model"):
        page.goto(server.url + path)
        expect(page.get_by_role("heading", name="Not an administrator")).to_be_visible()
        expect(page.get_by_role("main")).not_to_contain_text("secret-service")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/console/login$"))


def test_without_javascript_the_forms_do_the_job(browser: Browser, server: ServerThread) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, server.url)
        page.goto(f"{server.url}/console/services/new")
        page.locator("[name='name']").fill("wiki")
        page.get_by_label("Encryption required").check()
        page.get_by_role("button", name="Create").click()
        expect(page.get_by_role("status").filter(has_text="Created service wiki.")).to_be_visible()
        page.goto(f"{server.url}/console/services")
        page.get_by_label("Name contains").fill("wik")
        page.get_by_role("button", name="Apply").click()
        expect(page).to_have_url(re.compile(r"name=wik"))
        expect(page.locator("#results .count")).to_have_text("Rows 1 to 1 of 1")
        page.locator("#sort-name").click()
        expect(page).to_have_url(re.compile(r"name=wik.*sort=name|sort=name.*name=wik"))
        page.goto(f"{server.url}/console/posture-checks/new?typeId=OS")
        page.get_by_role("button", name="Add an item to operating systems").click()
        expect(page.locator("[name='operatingSystems[1].type']")).to_be_visible()
    finally:
        context.close()
