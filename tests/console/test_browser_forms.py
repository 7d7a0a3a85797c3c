"""Creating and editing through the console's spec-derived forms in a real browser: a posture check of every type
(repeatable groups grown without JavaScript's help), a refusal shown beside its field, and a delete that first says
what refers to the row."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.console.conftest import log_in
from tests.console.support import ServerThread, api


def _new_check(page: Page, url: str, type_id: str, name: str) -> None:
    page.goto(f"{url}/console/posture-checks/new")
    page.get_by_role("link", name=type_id, exact=True).click()
    expect(page.get_by_role("heading", name=f"New posture check ({type_id})")).to_be_visible()
    _field(page, "name").fill(name)
    page.get_by_label("Role attributes").fill(f"{name}-checked\nall-checks")


def _field(page: Page, name: str) -> Any:
    return page.locator(f"[name='{name}']")


def _created(page: Page, name: str) -> None:
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").filter(has_text=f"Created posture check {name}.")).to_be_visible()


def test_a_posture_check_of_every_type(page: Page, server: ServerThread) -> None:
    url = server.url
    log_in(page, url)

    _new_check(page, url, "OS", "desktops")
    _field(page, "operatingSystems[0].type").select_option("Windows")
    _field(page, "operatingSystems[0].versions").fill(">=10.0.19041\n11.x")
    page.get_by_role("button", name="Add an item to operating systems").click()
    _field(page, "operatingSystems[1].type").select_option("Linux")
    _field(page, "operatingSystems[1].versions").fill(">=6.1.0 <7.0.0")
    expect(_field(page, "operatingSystems[0].versions")).to_have_value(">=10.0.19041\n11.x")  # kept as typed
    _created(page, "desktops")

    _new_check(page, url, "MAC", "known-macs")
    page.get_by_label("Mac addresses").fill("AA:BB:CC:DD:EE:FF\naa-bb-cc-00-11-22")
    _created(page, "known-macs")

    _new_check(page, url, "DOMAIN", "corp-domain")
    page.get_by_label("Domains").fill("CORP")
    _created(page, "corp-domain")

    _new_check(page, url, "MFA", "mfa-hourly")
    page.get_by_label("Timeout seconds").fill("3600")
    page.get_by_label("Prompt on wake").check()
    _created(page, "mfa-hourly")

    _new_check(page, url, "PROCESS", "agent-running")
    _field(page, "process.osType").select_option("Linux")
    _field(page, "process.path").fill("/usr/bin/agent")
    _field(page, "process.hashes").fill("a" * 64)
    _created(page, "agent-running")

    _new_check(page, url, "PROCESS_MULTI", "both-agents")
    page.get_by_label("Semantic").select_option("AnyOf")
    _field(page, "processes[0].osType").select_option("Windows")
    _field(page, "processes[0].path").fill("C:\\agent.exe")
    page.get_by_role("button", name="Add an item to processes").click()
    _field(page, "processes[1].osType").select_option("macOS")
    _field(page, "processes[1].path").fill("/Applications/Agent.app")
    _created(page, "both-agents")

    with api(server) as client:
        checks = {c["name"]: c for c in client.get("/posture-checks", params={"limit": 100}).json()["data"]}
    assert sorted(checks["desktops"]["operatingSystems"], key=lambda os: os["type"]) == [
        {"type": "Linux", "versions": [">=6.1.0 <7.0.0"]}, {"type": "Windows", "versions": [">=10.0.19041", "11.x"]}]
    assert checks["known-macs"]["macAddresses"] == ["aa-bb-cc-dd-ee-ff", "aa-bb-cc-00-11-22"]
    assert checks["corp-domain"]["domains"] == ["CORP"]
    assert (checks["mfa-hourly"]["timeoutSeconds"], checks["mfa-hourly"]["promptOnWake"]) == (3600, True)
    assert checks["agent-running"]["process"]["path"] == "/usr/bin/agent"
    assert checks["agent-running"]["process"]["hashes"] == ["a" * 64]
    assert sorted(p["path"] for p in checks["both-agents"]["processes"]) == ["/Applications/Agent.app", "C:\\agent.exe"]
    assert checks["both-agents"]["semantic"] == "AnyOf"
    assert sorted(checks["desktops"]["roleAttributes"]) == ["all-checks", "desktops-checked"]


def test_a_refusal_is_shown_beside_its_field_and_changes_nothing(page: Page, server: ServerThread) -> None:
    log_in(page, server.url)
    _new_check(page, server.url, "MAC", "bad-macs")
    page.get_by_label("Mac addresses").fill("aa:bb:cc:dd:ee:ff\nnot-a-mac")
    page.get_by_role("button", name="Create").click()
    field_error = page.locator("#f-macAddresses-error")
    expect(field_error).to_contain_text("not-a-mac")
    expect(page.get_by_label("Mac addresses")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Mac addresses")).to_have_value("aa:bb:cc:dd:ee:ff\nnot-a-mac")
    expect(page.locator("#form-error")).to_contain_text("Not saved")
    with api(server) as client:
        assert client.get("/posture-checks").json()["meta"]["pagination"]["totalCount"] == 0

    page.goto(f"{server.url}/console/services/new")
    _field(page, "name").fill("wiki")
    page.get_by_label("Encryption required").check()
    page.get_by_label("Tags").fill('{"owner": ')
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#f-tags-error")).to_contain_text("not valid JSON")
    expect(page.get_by_label("Encryption required")).to_be_checked()
    page.get_by_label("Tags").fill('{"owner": "web team"}')
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").filter(has_text="Created service wiki.")).to_be_visible()
    page.goto(f"{server.url}/console/services/new")
    _field(page, "name").fill("wiki")
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#f-name-error")).to_contain_text("wiki")
    with api(server) as client:
        assert client.get("/services").json()["meta"]["pagination"]["totalCount"] == 1


def test_a_delete_says_what_refers_to_the_row_first(page: Page, server: ServerThread) -> None:
    with api(server) as client:
        service = client.post("/services", json={"name": "wiki", "encryptionRequired": True,
                                                 "roleAttributes": ["intranet"]}).json()["data"]["id"]
        client.post("/service-policies", json={"name": "staff-dial", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": ["#all"], "serviceRoles": ["#intranet"]})
        client.post("/service-policies", json={"name": "named-dial", "type": "Dial", "semantic": "AnyOf",
                                               "identityRoles": ["#all"], "serviceRoles": [f"@{service}"]})
        config_type = client.post("/config-types", json={"name": "app.v1"}).json()["data"]["id"]
        client.post("/configs", json={"name": "app", "configTypeId": config_type, "data": {}})
    log_in(page, server.url)
    page.goto(f"{server.url}/console/services/{service}")
    page.get_by_role("link", name="Delete…").click()
    referrers = page.get_by_role("region", name="What refers to it")
    expect(referrers).to_contain_text("2 service policies")
    expect(referrers.get_by_role("link", name="staff-dial")).to_be_visible()
    expect(referrers.get_by_role("link", name="named-dial")).to_be_visible()
    page.get_by_role("button", name="Delete wiki").click()
    expect(page).to_have_url(re.compile(r"/console/services$"))
    expect(page.get_by_role("status").filter(has_text="Deleted service wiki.")).to_be_visible()

    page.goto(f"{server.url}/console/config-types/{config_type}/delete")
    expect(page.get_by_role("region", name="What refers to it")).to_contain_text("the delete is refused")
    page.get_by_role("button", name="Delete app.v1").click()
    expect(page.locator("#delete-error")).to_contain_text("Not deleted")
    with api(server) as client:
        assert client.get(f"/config-types/{config_type}").status_code == 200
        assert client.get(f"/services/{service}").status_code == 404
