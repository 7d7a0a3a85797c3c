"""The identity's page in process: an expired enrolment re-issued and a new one made, MFA reset, and the overview's
upcoming MFA deadlines."""

from __future__ import annotations

import re

from controller.clock import format_time
from controller.resources.enrollments import add_enrollment
from controller.runtime.composition import Controller
from tests.console.test_console_pages import Browser
from tests.support import Api, totp
from tests.web.test_client_posture import dial_policy, network
from tests.web.test_client_posture import user as posture_user
from tests.web.test_mfa import enrol, secret_of, start


async def test_an_expired_enrolment_is_reissued_and_a_new_one_made(admin: Api, controller: Controller) -> None:
    identity_id = await admin.create("/identities", {"name": "laptop", "type": "Device", "isAdmin": False})
    # An enrolment whose window closed a minute ago, as the API leaves one that nobody used.
    await controller.domain.write(lambda ctx: add_enrollment(ctx, "ott", "identityId", identity_id, ctx.now - 60))
    old = (await admin.get(f"/identities/{identity_id}")).data["enrollment"]["ott"]
    browser = Browser(controller)
    csrf = await browser.login()
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    assert "ott enrolment (expired)" in html
    status, _, headers = await browser.post(f"/console/identities/{identity_id}/enrollments/{old['id']}/reissue",
                                            {"csrf_token": csrf})
    assert status == 303 and headers["Location"] == f"/console/identities/{identity_id}"
    new = (await admin.get(f"/identities/{identity_id}")).data["enrollment"]["ott"]
    assert new["id"] == old["id"] and new["token"] != old["token"] and new["jwt"] != old["jwt"]
    assert new["expiresAt"] > format_time(controller.clock.now())
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    assert "(expired)" not in html and "The enrolment has a new token and expiry" in html

    assert (await admin.delete(f"/enrollments/{old['id']}")).status == 200
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    assert "No enrolment is outstanding" in html
    status, _, _ = await browser.post(f"/console/identities/{identity_id}/enrollments", {"csrf_token": csrf})
    assert status == 303
    made = (await admin.get(f"/identities/{identity_id}")).data["enrollment"]
    assert set(made) == {"ott"} and made["ott"]["token"] not in (old["token"], new["token"])


async def test_mfa_is_reset_from_the_identity_page(admin: Api, controller: Controller) -> None:
    identity_id, client = await posture_user(admin)
    await enrol(client, controller)
    browser = Browser(controller)
    csrf = await browser.login()
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    assert "Enrolled and verified." in html
    status, _, _ = await browser.post(f"/console/identities/{identity_id}/mfa/reset", {"csrf_token": csrf})
    assert status == 303
    assert controller.mfa.record(identity_id) is None
    _, html, _ = await browser.get(f"/console/identities/{identity_id}")
    assert "MFA was reset" in html and re.search(r"MFA</h2>\s*<p>Not enrolled.</p>", html)


async def test_the_overview_lists_the_next_mfa_deadlines(admin: Api, controller: Controller) -> None:
    await network(admin)
    await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                           "timeoutSeconds": 600})
    await dial_policy(admin, "p-mfa", ["#mfa"])
    identity_id, client = await posture_user(admin)
    browser = Browser(controller)
    await browser.login()
    _, html, _ = await browser.get("/console/")
    assert "No MFA deadline is pending." in html
    detail = await start(client)
    assert (await client.post("/current-identity/mfa/verify", {"code": totp(controller, secret_of(detail))})).status \
        == 200
    [(deadline, who)] = controller.engine.upcoming_deadlines(10)
    assert who == identity_id and deadline <= controller.clock.now() + 600
    _, html, _ = await browser.get("/console/")
    deadlines = html.split("Upcoming MFA deadlines")[1]
    assert f'href="/console/identities/{identity_id}">user1</a>' in deadlines
    assert format_time(deadline) in deadlines
    seconds = re.search(r'<td class="number">(\d+)</td>', deadlines)
    assert seconds is not None and 0 < int(seconds.group(1)) <= 600
