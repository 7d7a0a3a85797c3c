"""The console in a real browser (Debian's Chromium through Playwright) against a controller on a real socket:
logging in and out, MFA, keyboard-only use, lists in the URL, forms of every posture check type, deletes with
their confirmation, the model file, and the refusals (another origin, an identity that is no admin)."""

from __future__ import annotations

import re
import time

import httpx
import pyotp
from playwright.sync_api import Page, expect

from tests.console.conftest import log_in
from tests.console.support import ServerThread
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME


def test_log_in_look_around_and_log_out(page: Page, server: ServerThread) -> None:
    page.goto(f"{server.url}/console/services")
    expect(page).to_have_url(re.compile(r"/console/login\?next=/console/services$"))
    page.get_by_label("Username").fill(ADMIN_USERNAME)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#login-error")).to_contain_text("The authentication request failed")
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/console/services$"))
    expect(page.get_by_role("heading", name="Services", level=1)).to_be_visible()
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/console/login$"))
    page.goto(f"{server.url}/console/")
    expect(page).to_have_url(re.compile(r"/console/login$"))


def test_an_identity_with_mfa_is_asked_for_its_code(page: Page, server: ServerThread) -> None:
    with httpx.Client(base_url=server.url + "/edge/client/v1", timeout=30) as client:
        _mfa_login(page, server, client)


def _mfa_login(page: Page, server: ServerThread, client: httpx.Client) -> None:
    token = client.post("/authenticate", params={"method": "password"},
                        json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD}).json()["data"]["token"]
    client.headers["zt-session"] = token
    assert client.post("/current-identity/mfa").status_code == 201
    secret = client.get("/current-identity/mfa").json()["data"]["provisioningUrl"].split("secret=")[1].split("&")[0]
    totp = pyotp.TOTP(secret)
    assert client.post("/current-identity/mfa/verify", json={"code": totp.now()}).status_code == 200
    log_in(page, server.url)
    expect(page).to_have_url(re.compile(r"/console/login/mfa$"))
    page.goto(f"{server.url}/console/identities")  # nothing else opens before the code
    expect(page).to_have_url(re.compile(r"/console/login/mfa$"))
    page.get_by_label("Code").fill("000000")
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#mfa-error")).to_be_visible()
    # A TOTP step is accepted once: the verification above used the current one, so use the next step's code
    # (within the window the controller accepts).
    codes = client.get("/current-identity/mfa/recovery-codes", headers={"mfa-validation-code": totp.at(
        int(time.time()) + 30)}).json()["data"]["recoveryCodes"]
    page.get_by_label("Code").fill(codes[0])
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
