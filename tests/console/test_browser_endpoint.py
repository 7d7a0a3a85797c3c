"""An endpoint's whole life through the console, in a real browser over HTTPS: a service, an identity and a
policy made with the console's forms, the identity's enrolment JWT downloaded, the endpoint enrolled with a CSR
(the REST flow) and logged in with its certificate, and the posture it reports through the Client API showing up on
the identity's page (with when and by which API session) while the page is open."""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from playwright.sync_api import Page, expect

from tests.certificates import csr_pem, new_key
from tests.console.conftest import log_in
from tests.console.support import ServerThread

CLIENT = "/edge/client/v1"


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[ServerThread]:
    running = ServerThread(tmp_path / "data", tls=True).start()
    yield running
    running.stop()


def _field(page: Page, name: str) -> object:
    return page.locator(f"[name='{name}']")


def test_enrol_an_identity_made_in_the_console_and_watch_its_posture_arrive(page: Page, tls_server: ServerThread,
                                                                            tmp_path: Path) -> None:
    url = tls_server.url
    assert url.startswith("https://")
    log_in(page, url)

    page.goto(f"{url}/console/services/new")
    page.locator("[name='name']").fill("wiki")
    page.get_by_label("Encryption required").check()
    page.get_by_label("Role attributes").fill("intranet")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").filter(has_text="Created service wiki.")).to_be_visible()

    page.goto(f"{url}/console/identities/new")
    page.locator("[name='name']").fill("laptop")
    page.get_by_label("Type").select_option("Device")
    page.get_by_label("Role attributes").fill("staff")
    page.get_by_role("group", name="Enrollment").get_by_label("Ott", exact=True).check()
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").filter(has_text="Created identity laptop.")).to_be_visible()
    identity_url = page.url

    page.goto(f"{url}/console/service-policies/new")
    page.locator("[name='name']").fill("staff-dial")
    page.get_by_label("Type").select_option("Dial")
    page.get_by_label("Semantic").select_option("AnyOf")
    page.get_by_role("group", name="Identity roles").get_by_label("#staff", exact=True).check()
    page.get_by_role("group", name="Service roles").get_by_label("@wiki", exact=True).check()
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").filter(has_text="Created service policy staff-dial.")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text("#staff")
    expect(page.get_by_role("main")).to_contain_text("@wiki")

    page.goto(identity_url)
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the enrolment JWT").click()
    assert download.value.suggested_filename == "laptop.jwt"
    enrolment = Path(download.value.path()).read_text()
    claims = jwt.decode(enrolment, options={"verify_signature": False})
    assert claims["em"] == "ott"
    expect(page.locator("figure.qr svg")).to_be_visible()
    expect(page.locator("#posture")).to_contain_text("No posture data reported yet")

    key = new_key()
    ca = str(tls_server.controller.settings.data_dir / "pki" / "ca.pem")  # type: ignore[union-attr]
    trust = ssl.create_default_context(cafile=ca)
    with httpx.Client(base_url=url, verify=trust, timeout=30) as anonymous:
        enrolled = anonymous.post("/enroll", params={"method": "ott", "token": claims["jti"]},
                                  content=csr_pem(key), headers={"Content-Type": "text/plain"})
    assert enrolled.status_code == 200, enrolled.text
    (tmp_path / "laptop.pem").write_text(enrolled.text)
    (tmp_path / "laptop.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    trust.load_cert_chain(str(tmp_path / "laptop.pem"), str(tmp_path / "laptop.key"))
    with httpx.Client(base_url=url + CLIENT, verify=trust, timeout=30) as endpoint:
        login = endpoint.post("/authenticate", params={"method": "cert"}, json={})
        assert login.status_code == 200, login.text
        session_id = login.json()["data"]["id"]
        endpoint.headers["zt-session"] = login.json()["data"]["token"]
        reported = endpoint.post("/posture-response", json={"id": "mac-check", "typeId": "MAC",
                                                             "macAddresses": ["AA:BB:CC:DD:EE:01"]})
        assert reported.status_code == 201, reported.text

    # The open page reloads its posture section (htmx): the report shows up with the session that made it.
    posture = page.locator("#posture")
    expect(posture).to_contain_text("aa-bb-cc-dd-ee-01")
    expect(posture.get_by_role("link", name=session_id)).to_be_visible()
    page.reload()
    expect(page.get_by_role("region", name="API sessions")).to_contain_text(session_id)
    expect(page.get_by_role("region", name="Enrolment")).to_contain_text("No enrolment is outstanding")
    assert re.search(r"/console/identities/[^/]+$", page.url)
