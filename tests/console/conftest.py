"""Fixtures of the console's browser tests: one Chromium per xdist worker, a fresh context per test, a controller
on a real socket per test, and a screenshot of the page of every test that fails."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from tests.console.support import CHROMIUM, CHROMIUM_FLAGS, ServerThread
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME

WAIT_MS = 30_000
"""The longest a browser test waits for a condition (a page, an element, a swap): generous for a loaded machine;
tests wait for conditions, never for time."""
expect.set_options(timeout=WAIT_MS)
SCREENSHOTS = Path(os.environ.get("TOLLGATE_SCREENSHOTS", "test-screenshots"))
"""Where the page of a failed browser test is saved (``TOLLGATE_SCREENSHOTS`` to change it)."""


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
    yield launched
    launched.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    """A controller serving plain HTTP on 127.0.0.1 (the console's cookies are Secure: browsers take them from
    loopback addresses over HTTP)."""
    running = ServerThread(tmp_path / "data").start()
    yield running
    running.stop()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    fresh = browser.new_context(viewport={"width": 1280, "height": 900}, ignore_https_errors=True,
                                accept_downloads=True)
    fresh.set_default_timeout(WAIT_MS)
    yield fresh
    fresh.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def log_in(page: Page, url: str, username: str = ADMIN_USERNAME, password: str = ADMIN_PASSWORD) -> None:
    """Log in through the console's form and wait for the page it leads to."""
    page.goto(f"{url}/console/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r".*/console/(login/mfa)?$"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Save a screenshot of the test's page when a browser test fails."""
    outcome = yield
    report = outcome.get_result()
    funcargs = getattr(item, "funcargs", {})
    shown = funcargs.get("page")
    if report.failed and report.when == "call" and isinstance(shown, Page):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        target = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', item.nodeid)}.png"
        try:
            shown.screenshot(path=str(target), full_page=True)
            report.sections.append(("screenshot", str(target)))
        except Exception as exc:  # the page may be gone with what failed; the test's own failure says why
            report.sections.append(("screenshot", f"none: {exc}"))
