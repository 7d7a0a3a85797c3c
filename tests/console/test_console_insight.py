"""The console's posture insight in process: the access page shows every fact of the API's access explanation (on
Trio's virtual clock, so the time left to a deadline is exact), the service picker, the identity's and the overview's
events, the controllers panel, the live stream (rows of the identity's events only, posture writes, rates, its end
with the API session), and that none of it is shown to an identity that is no administrator."""

from __future__ import annotations

import html as html_text
import math
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx
import msgspec
import pytest
import trio
import trio.testing

from controller.runtime.composition import Controller
from tests.console.test_console_pages import Browser
from tests.insight.test_event_views import Stream
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_settings, make_user, seed_pki, serving
from tests.web.test_client_posture import MAC_BAD, MAC_OK, dial_policy, network, user
from tests.web.test_mfa import enrol
from web.app import create_app
from web.console.event_rows import EventRow
from web.console.guard import LOGIN_COOKIE
from web.console.sessions import COOKIE

MFA_TIMEOUT = 600


@contextmanager
def _virtual_time_runs(clock: trio.testing.MockClock) -> Iterator[None]:
    clock.autojump_threshold = 0
    try:
        yield
    finally:
        clock.autojump_threshold = math.inf


async def _scenario(admin: Api, controller: Controller) -> tuple[dict[str, str], str, Api]:
    """A MAC and an MFA check required by one Dial policy of a user and a service, an edge router in common."""
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mac-check", "typeId": "MAC", "roleAttributes": ["c"],
                                           "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    await admin.create("/posture-checks", {"name": "mfa-check", "typeId": "MFA", "roleAttributes": ["c"],
                                           "timeoutSeconds": MFA_TIMEOUT})
    ids["policy"] = await dial_policy(admin, "staff-dial", ["#c"])
    identity_id, client = await user(admin)
    return ids, identity_id, client


def _shown(html: str) -> str:
    """The page's text, tags dropped and entities decoded, whitespace folded."""
    return " ".join(html_text.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _assert_every_fact_shown(data: dict[str, Any], html: str) -> None:
    text = _shown(html)
    assert data["verdict"] in text
    assert data["evaluatedAt"] in text
    if data["apiSession"] is not None:
        assert data["apiSession"]["id"] in text
    for session_type in data["sessionTypes"]:
        assert session_type["summary"] in text
        for action in session_type["actions"]:
            assert action in text
        if session_type["nextChange"] is not None:
            assert session_type["nextChange"]["at"] in text and session_type["nextChange"]["reason"] in text
        for policy in session_type["policies"]:
            assert policy["name"] in text
            for entry in policy["linkedBy"]["identityRoles"] + policy["linkedBy"]["serviceRoles"]:
                assert entry in text
            for check in policy["checks"]:
                assert check["name"] in text
                for fact in ("rule", "remedy", "reportedAt", "reportedBy", "at"):
                    if check[fact]:
                        assert check[fact] in text, fact
                for entry in check["selectedBy"]:
                    assert entry in text
    routers = data["edgeRouters"]
    assert f"The identity may use {routers['identityRouterCount']} edge router(s), the service " \
           f"{routers['serviceRouterCount']}; {len(routers['common'])} in common" in text
    for router in routers["common"]:
        assert router["name"] in text


async def test_the_access_page_shows_every_fact_of_the_explanation(admin: Api, controller: Controller,
                                                                   autojump_clock: trio.testing.MockClock) -> None:
    # Virtual time passes only where the test sleeps: logins hash in a thread, which an autojump would not wait for.
    autojump_clock.autojump_threshold = math.inf
    ids, identity_id, client = await _scenario(admin, controller)
    browser = Browser(controller)
    await browser.login()
    path = f"/console/identities/{identity_id}/access/{ids['service']}"
    api_path = f"/identities/{identity_id}/access/{ids['service']}"

    status, html, _ = await browser.get(path)
    assert status == 200, html
    reply = await admin.get(api_path)
    assert reply.status == 200, reply.body
    data = reply.data
    assert data["sessionTypes"][0]["code"] == "INVALID_POSTURE"
    _assert_every_fact_shown(data, html)
    assert "Dial: refused" in _shown(html) and "mac-check" in _shown(html)

    assert (await client.post("/posture-response", MAC_BAD)).status == 201
    status, html, _ = await browser.get(path)
    data = (await admin.get(api_path)).data
    [check] = [c for c in data["sessionTypes"][0]["policies"][0]["checks"] if c["name"] == "mac-check"]
    assert check["rule"] and check["reportedBy"] and not check["passing"]
    _assert_every_fact_shown(data, html)

    assert (await client.post("/posture-response", MAC_OK)).status == 201
    await enrol(client, controller)
    status, html, _ = await browser.get(path)
    data = (await admin.get(api_path)).data
    dial = data["sessionTypes"][0]
    assert dial["allowed"] and dial["nextChange"] is not None
    _assert_every_fact_shown(data, html)
    assert "Dial: allowed" in _shown(html)
    assert f'<span data-deadline="{dial["nextChange"]["at"]}">in {MFA_TIMEOUT} s</span>' in html

    # The region the page refreshes comes alone, for the same URL.
    status, part, _ = await browser.get(path, {"HX-Request": "true", "HX-Target": "access"})
    assert status == 200 and part.lstrip().startswith("{#") is False and "<html" not in part
    assert 'id="access"' in part and f'hx-get="{path}"' in part

    with _virtual_time_runs(autojump_clock):
        await trio.sleep(MFA_TIMEOUT)
    status, html, _ = await browser.get(path)
    data = (await admin.get(api_path)).data
    assert not data["sessionTypes"][0]["allowed"]
    _assert_every_fact_shown(data, html)
    assert "Dial: refused" in _shown(html)

    # Another API session's MFA state, and one the identity does not have.
    await admin.login("user1", "user-password")
    status, html, _ = await browser.get(path)
    other = (await admin.get(api_path)).data["otherApiSessionIds"]
    assert other and f"?apiSessionId={other[0]}" in html
    assert (await browser.get(f"{path}?apiSessionId={other[0]}"))[0] == 200
    status, html, _ = await browser.get(f"{path}?apiSessionId=nope")
    assert status == 404


async def test_the_service_picker_leads_to_the_explanation(admin: Api, controller: Controller) -> None:
    ids, identity_id, _ = await _scenario(admin, controller)
    browser = Browser(controller)
    await browser.login()
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    assert f'action="/console/identities/{identity_id}/access"' in html
    assert f'<option value="{ids["service"]}">svc</option>' in html
    for wanted in ("svc", ids["service"]):
        status, _, headers = await browser.get(f"/console/identities/{identity_id}/access?service={wanted}")
        assert status == 303 and headers["Location"] == f"/console/identities/{identity_id}/access/{ids['service']}"
    status, html, _ = await browser.get(f"/console/identities/{identity_id}/access?service=no-such")
    assert status == 404 and "No service has the name or id no-such" in html
    status, html, _ = await browser.get(f"/console/identities/{identity_id}/access")
    assert status == 200 and 'name="service"' in html
    assert (await browser.get(f"/console/identities/nobody/access/{ids['service']}"))[0] == 404
    assert (await browser.get(f"/console/identities/{identity_id}/access/nothing"))[0] == 404


async def test_pages_list_the_latest_events_and_the_controllers(admin: Api, controller: Controller) -> None:
    ids, identity_id, client = await _scenario(admin, controller)
    other_id, _ = await make_user(admin, "bystander")
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409  # posture.denied
    browser = Browser(controller)
    await browser.login()
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    events = html.split('id="events-heading"')[1].split("</section>")[0]
    assert "posture.denied" in events and "Dial request refused: postureCheckFailed" in events
    assert "edge.apiSessions.created" in events and other_id not in events
    assert re.search(r'data-event-stream="/console/events/stream\?identity=[^&"]+&amp;lastEventId=\d+"', events)

    _, html, _ = await browser.get("/console/")
    assert "posture.denied" in html and other_id in html  # the overview lists every identity's events
    assert f"identities {other_id} created by Default Admin" in html  # the author, by name
    assert 'data-event-stream="/console/events/stream?rates=1&amp;lastEventId=' in html
    assert 'data-rate="decisions"' in html and 'data-rate="revocations"' in html
    [node] = (await admin.get("/controllers")).data
    panel = html.split('id="controllers-heading"')[1]
    assert node["id"] in panel and node["fingerprint"] in panel and node["lastJoinedAt"] in panel


async def test_an_identity_that_is_no_admin_sees_no_insight(controller: Controller, admin: Api) -> None:
    ids, identity_id, _ = await _scenario(admin, controller)
    browser = Browser(controller)
    await make_user(admin, "someone", "someone-password")
    await browser.login("someone", "someone-password")
    for path in (f"/console/identities/{identity_id}/access/{ids['service']}",
                 f"/console/identities/{identity_id}/access?service=svc", "/console/events/stream",
                 f"/console/events/stream?identity={identity_id}&rates=1"):
        status, html, _ = await browser.get(path)
        assert status == 403, path
        assert "not an administrator" in html and "staff-dial" not in html and "edge.apiSessions" not in html


async def _console_login(url: str) -> str:
    """Log in to the console of the controller at ``url`` as the admin; returns its session cookie's value."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        form = await http.get("/console/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None
        reply = await http.post("/console/login", data={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD,
                                                        "csrf_token": token.group(1)},
                                headers={"Cookie": f"{LOGIN_COOKIE}={form.cookies[LOGIN_COOKIE]}"})
        assert reply.status_code == 303, reply.text
        found = re.search(rf"{COOKIE}=([^;]+)", reply.headers["set-cookie"])
        assert found is not None
        return found.group(1)


class _Frames:
    """The console's stream on a socket of its own: its frames (``event`` name and ``data``) as they come."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    async def next(self, *, comments: bool = False) -> tuple[str, str]:
        """The next frame; a comment (a heartbeat) only when ``comments``."""
        while True:
            while "\n\n" not in self.stream.buffer:
                await self.stream._more()
            frame, self.stream.buffer = self.stream.buffer.split("\n\n", 1)
            fields = dict(line.partition(": ")[::2] for line in frame.split("\n") if not line.startswith(":"))
            if "event" in fields or comments:
                return fields.get("event", "comment"), fields.get("data", "")

    async def until(self, name: str) -> list[tuple[str, str]]:
        seen = []
        while not seen or seen[-1][0] != name:
            seen.append(await self.next())
        return seen


@asynccontextmanager
async def _console_stream(url: str, cookie: str, query: str) -> AsyncIterator[_Frames]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    socket = await trio.open_tcp_stream(host, port)
    async with socket:
        connection = h11.Connection(h11.CLIENT)
        request = h11.Request(method="GET", target=f"/console/events/stream?{query}",
                              headers=[("Host", f"{host}:{port}"), ("Cookie", f"{COOKIE}={cookie}")])
        await socket.send_all(connection.send(request) + connection.send(h11.EndOfMessage()))
        stream = Stream(socket, connection)
        while not stream.status:
            await stream._more()
        assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
        yield _Frames(stream)


async def test_the_stream_sends_the_identitys_rows_its_posture_writes_and_rates(tmp_path: Path) -> None:
    seed_pki(tmp_path)
    async with serving(make_settings(tmp_path, host="127.0.0.1", port=0)) as (controller, urls):
        url = urls[0]
        anon = Api(create_app(controller), controller=controller)
        admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        ids, identity_id, client = await _scenario(admin, controller)
        other_id, other = await make_user(admin, "bystander")
        cookie = await _console_login(url)
        with trio.fail_after(60):
            async with _console_stream(url, cookie, f"identity={identity_id}") as frames:
                assert (await frames.next(comments=True))[0] == "comment"
                assert (await other.as_client().post("/posture-response", MAC_OK)).status == 201  # not its own
                assert (await client.post("/posture-response", MAC_OK)).status == 201
                assert await frames.next() == ("posture", identity_id)
                assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
                name, row = await frames.next()
                assert name == "row" and "posture.denied" in row and identity_id in row and other_id not in row

            async with _console_stream(url, cookie, "rates=1") as frames:
                assert (await frames.next(comments=True))[0] == "comment"  # the rates are measured from before it
                # A decision, counted before it is answered: of the first two rates frames read after the answer,
                # one was measured after it (at most one was on its way before).
                assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
                seen = await frames.until("rates")
                seen += await frames.until("rates")
                assert any(name == "row" and "posture.denied" in data for name, data in seen)
                rates = [msgspec.json.decode(data) for name, data in seen if name == "rates"]
                assert all(set(r) == {"decisions", "revocations"} and r["revocations"] == 0 for r in rates)
                assert any(r["decisions"] > 0 for r in rates)
                # The console session's API session ends: so does the stream, at its next wake-up at the latest.
                admin_session = controller.sessions.lookup(str(admin.token))
                assert admin_session is not None
                [console_session] = [s for s in controller.sessions.sessions_of(admin_session.identity_id)
                                     if s.id != admin_session.id]
                assert (await admin.delete(f"/api-sessions/{console_session.id}")).status == 200
                with pytest.raises(EOFError):
                    while True:
                        await frames.next()


async def test_a_streamed_row_is_escaped_as_the_page_is(controller: Controller) -> None:
    app = create_app(controller)
    template = app.jinja_env.get_template("console/event_row.html")
    html = await template.render_async(row=EventRow(7, "2026-01-01T00:00:00.000Z", "mfa.failed",
                                                    "<script>alert(1)</script>", '"><b>', None))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '"><b>' not in html
