"""The console over HTTP in process: sessions and cookies, CSRF and origin checks, who sees what, and pages derived
from the specs (walking the registry: a field added to a spec shows up without a template edit)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.model.field import Mode, string_field
from controller.model.request_fields import request_field
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_user
from web.app import create_app
from web.console.columns import detail_entries, list_columns
from web.console.widgets import form_widgets

STATIC = Path(__file__).resolve().parents[2] / "web" / "console" / "static"


class Browser:
    """An in-process client that keeps cookies as a browser would (the console's cookies are path /console/)."""

    def __init__(self, controller: Controller) -> None:
        self.client = create_app(controller).test_client()

    async def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
        response = await self.client.get(path, headers=headers or {})
        return response.status_code, (await response.get_data()).decode(), response.headers

    async def post(self, path: str, form: dict[str, Any], headers: dict[str, str] | None = None
                   ) -> tuple[int, str, Any]:
        response = await self.client.post(path, form=form, headers=headers or {})
        return response.status_code, (await response.get_data()).decode(), response.headers

    async def login(self, username: str = ADMIN_USERNAME, password: str = ADMIN_PASSWORD) -> str:
        """Log in through the form; returns the session's CSRF token (read from the overview)."""
        _, html, _ = await self.get("/console/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', html)
        assert token is not None
        status, _, headers = await self.post("/console/login", {"username": username, "password": password,
                                                                "csrf_token": token.group(1)})
        assert status == 303, status
        _, html, _ = await self.get(headers["Location"])
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)
        return csrf.group(1) if csrf else ""


@pytest.fixture
async def browser(controller: Controller) -> Browser:
    return Browser(controller)


def test_the_vendored_htmx_is_the_one_its_manifest_records() -> None:
    manifest = json.loads((STATIC / "htmx.manifest.json").read_text())
    data = (STATIC / manifest["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == manifest["sha256"]
    assert manifest["version"] in manifest["source"] and manifest["license"] == "0BSD"
    assert (STATIC / manifest["license_file"]).read_text().startswith("Zero-Clause BSD")


async def test_login_sets_an_opaque_strict_cookie_and_keeps_the_token_on_the_server(browser: Browser,
                                                                                     controller: Controller) -> None:
    status, _, headers = await browser.get("/console/identities")
    assert status == 303 and headers["Location"].startswith("/console/login?next=/console/identities")
    _, html, _ = await browser.get("/console/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert token is not None
    status, html, headers = await browser.post("/console/login", {"username": ADMIN_USERNAME, "password": "wrong",
                                                                   "csrf_token": token.group(1)})
    assert status == 401 and "The authentication request failed" in html
    status, _, headers = await browser.post("/console/login", {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD,
                                                               "csrf_token": token.group(1)})
    assert status == 303
    cookie = next(c for c in headers.getlist("Set-Cookie") if c.startswith("tollgate_console="))
    for flag in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/console/"):
        assert flag in cookie
    value = cookie.split(";")[0].split("=", 1)[1]
    [live] = [s for s in controller.sessions.sessions_of(_admin_id(controller))]
    with controller.domain.read() as ctx:
        row = ctx.txn.get("api-sessions", live.id)
    assert row is not None and value not in json.dumps(row) and live.token_digest != hashlib.sha256(
        value.encode()).hexdigest()
    status, html, _ = await browser.get("/console/")
    assert status == 200 and "Overview" in html


def _admin_id(controller: Controller) -> str:
    with controller.domain.read() as ctx:
        return next(str(r["id"]) for r in ctx.txn.scan("identities") if r.get("isDefaultAdmin"))


async def test_logout_ends_the_api_session_and_an_ended_api_session_ends_the_console_session(
        browser: Browser, controller: Controller, admin: Api) -> None:
    csrf = await browser.login()
    assert len(controller.sessions.sessions_of(_admin_id(controller))) == 2  # the fixture's and the console's
    status, _, headers = await browser.post("/console/logout", {"csrf_token": csrf})
    assert status == 303 and headers["Location"] == "/console/login"
    assert len(controller.sessions.sessions_of(_admin_id(controller))) == 1
    assert (await browser.get("/console/"))[0] == 303

    await browser.login()
    console_session = next(s for s in controller.sessions.sessions_of(_admin_id(controller))
                           if s.token_digest != controller.sessions.lookup(admin.token).token_digest)  # type: ignore[union-attr]
    assert (await admin.delete(f"/api-sessions/{console_session.id}")).status == 200
    status, _, headers = await browser.get("/console/")
    assert status == 303 and headers["Location"].startswith("/console/login")


async def test_state_changes_need_this_sites_origin_and_the_sessions_csrf_token(browser: Browser,
                                                                                admin: Api) -> None:
    csrf = await browser.login()
    service = await admin.create("/services", {"name": "keep-me", "encryptionRequired": True})
    path = f"/console/services/{service}/delete"
    refusals = [({}, {}), ({"csrf_token": "forged"}, {}),
                ({"csrf_token": csrf}, {"Origin": "http://evil.example"}),
                ({"csrf_token": csrf}, {"Sec-Fetch-Site": "cross-site"}),
                ({"csrf_token": csrf}, {"Sec-Fetch-Site": "same-site"})]
    for form, headers in refusals:
        status, html, _ = await browser.post(path, form, headers)
        assert status == 403 and "Refused" in html, (form, headers)
    assert (await admin.get(f"/services/{service}")).status == 200
    status, _, _ = await browser.post(path, {}, {"X-CSRF-Token": csrf, "Origin": "http://localhost",
                                                 "Sec-Fetch-Site": "same-origin"})
    assert status == 303
    assert (await admin.get(f"/services/{service}")).status == 404


async def test_the_login_form_refuses_a_post_without_its_own_token(browser: Browser) -> None:
    await browser.get("/console/login")
    status, html, _ = await browser.post("/console/login", {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD,
                                                            "csrf_token": "guessed"})
    assert status == 403 and "Refused" in html
    assert (await browser.get("/console/"))[0] == 303


async def test_an_identity_that_is_no_admin_sees_nothing(browser: Browser, controller: Controller,
                                                         admin: Api) -> None:
    secret_name = "secret-service-name"
    await admin.create("/services", {"name": secret_name, "encryptionRequired": True})
    await make_user(admin, "someone", "someone-password")
    await browser.login("someone", "someone-password")
    for path in ("/console/", "/console/services", "/console/identities", "/console/model/export",
                 "/console/model"):
        status, html, _ = await browser.get(path)
        assert status == 403, path
        assert "not an administrator" in html and secret_name not in html and "nav" not in html.split("<main")[0]


async def test_every_form_list_and_detail_shows_every_field_of_its_spec(browser: Browser,
                                                                        controller: Controller) -> None:
    """Walking the registry: each creatable kind's form has an input for every field a create may carry (one form
    per variant), each editable kind's edit form every field a PATCH writes, and the rendered pages carry them."""
    await browser.login()
    for kind, resource in controller.registry.resources.items():
        if "list" not in resource.operations:
            continue
        status, html, _ = await browser.get(f"/console/{kind}")
        assert status == 200, kind
        for column in list_columns(resource, controller.registry.symbols(kind)):
            assert f">{column.label}<" in html or f">{column.label}<span" in html, (kind, column.field)
        if not (resource.creatable):
            continue
        variants = resource.variants.variants if resource.variants else (None,)
        for variant in variants:
            query = f"?{resource.variants.discriminator}={variant.value}" if resource.variants and variant else ""
            status, html, _ = await browser.get(f"/console/{kind}/new{query}")
            assert status == 200, (kind, variant)
            for f in resource.fields_for(variant):
                found = request_field(resource, f.name)
                if found is not None and Mode.CREATE in found[0].writable:
                    assert f'name="{f.name}' in html or f'name="{f.name}~' in html or f'name="{f.name}.' in html \
                        or f'name="{f.name}[' in html, (kind, variant, f.name)


async def test_a_field_added_to_a_spec_reaches_forms_lists_and_details(controller: Controller) -> None:
    services = controller.registry["services"]
    extended = replace(services, fields=(*services.fields, string_field("colour", default="blue")))
    symbols = {**controller.registry.symbols("services")}
    from storage.zitiql import FieldType, Symbol
    symbols["colour"] = Symbol(FieldType.STRING)
    assert "colour" in [w.name for w in form_widgets(extended, Mode.CREATE)]
    assert "colour" in [w.name for w in form_widgets(extended, Mode.PATCH)]
    assert "colour" in [c.field for c in list_columns(extended, symbols)]
    assert "colour" in [e.name for e in detail_entries(extended, {"id": "x", "name": "s", "colour": "red"})]


def test_the_package_data_ships_every_template_and_static_file() -> None:
    """A plain install ships what ``[tool.setuptools.package-data]`` names: every console file must match it."""
    import fnmatch
    import tomllib

    config = tomllib.loads((STATIC.parents[2] / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["web.console"]
    package = STATIC.parent
    shipped = [path for path in package.rglob("*") if path.is_file() and path.suffix not in (".py", ".pyc")]
    assert shipped
    for path in shipped:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


async def test_every_console_page_but_the_login_pages_needs_a_session(browser: Browser, admin: Api) -> None:
    """Every rule of the console's blueprint, requested without a session: the login pages and static files open,
    every other page sends the browser to log in and changes nothing."""
    from web.console.auth_pages import OPEN_ENDPOINTS

    service = await admin.create("/services", {"name": "keep-me", "encryptionRequired": True})
    values = {"kind": "services", "id": service, "path": "configs", "rest": "anything", "enrollment_id": "e",
              "filename": "console.css"}
    checked = 0
    for rule in browser.client.app.url_map.iter_rules():
        if not rule.endpoint.startswith("console."):
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([a-z_]+)>", lambda m: str(values[m.group(1)]),
                      re.sub(r'<any\([^)]*\):kind>', "services", rule.rule))
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            response = await (browser.client.get(path) if method == "GET" else browser.client.post(path, form={}))
            checked += 1
            if rule.endpoint in OPEN_ENDPOINTS:
                assert response.status_code in (200, 403), (method, path)  # a login post lacks its own token
            else:
                assert response.status_code == 303, (method, path, response.status_code)
                assert response.headers["Location"].startswith("/console/login"), (method, path)
    assert checked > 20
    assert (await admin.get(f"/services/{service}")).status == 200
