"""No crash window between a write that takes access away and its consequence: disabling an identity ends its API
sessions in the same write, and an MFA removal whose message never reached the identity's actor (the process died
after the commit) still takes the MFA passes away at the next start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from controller.posture.engine import PENDING_KIND
from controller.posture.messages import MfaRemoved
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, running, totp
from tests.web.test_client_posture import user as posture_user
from tests.web.test_mfa import enrol
from tests.web.test_mfa_posture import dial, mfa_network
from web.app import create_app


async def test_disabling_ends_the_api_sessions_in_the_same_write(admin: Api, controller: Controller) -> None:
    identity_id, client = await posture_user(admin)
    await client.login("user1", "user-password")  # a second API session
    assert (await client.get("/current-identity")).status == 200
    with controller.store.read() as txn:
        api_sessions = set(txn.ids_by_ref("api-sessions", "identityId", identity_id))
    assert len(api_sessions) == 2
    writes: list[set[tuple[str, str]]] = []
    controller.domain.subscribe(lambda changes: writes.append({(c.kind, c.id) for c in changes}))
    reply = await admin.post(f"/identities/{identity_id}/disable", {"durationMinutes": 10})
    assert reply.status == 200, reply.body
    disabling = [w for w in writes if ("identities", identity_id) in w]
    assert disabling == [{("identities", identity_id)} | {("api-sessions", s) for s in api_sessions}]
    with controller.store.read() as txn:
        assert txn.ids_by_ref("api-sessions", "identityId", identity_id) == []
    assert (await client.get("/current-identity")).status == 401


async def test_a_crash_between_an_mfa_removal_and_its_actor_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock) -> None:
    async with running(tmp_path) as controller:
        admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        ids = await mfa_network(admin)
        identity_id, client = await posture_user(admin)
        secret, _ = await enrol(client, controller)
        session_id = (await dial(client, ids["service"])).data["id"]
        await trio.sleep(30)  # the enrolment spent the current TOTP step

        # The process dies right after the removal commits: the actor never hears of it.
        actors = controller.engine.actors
        post = actors.post

        def lost(identity: str, message: Any) -> None:
            if not isinstance(message, MfaRemoved):
                post(identity, message)

        with monkeypatch.context() as crash:
            crash.setattr(actors, "post", lost)
            removed = await client.delete("/current-identity/mfa",
                                          headers={"mfa-validation-code": totp(controller, secret)})
            assert removed.status == 200, removed.body
        assert (await admin.get(f"/sessions/{session_id}")).status == 200  # not revoked: the message was lost
        with controller.store.read() as txn:
            assert txn.exists(PENDING_KIND, identity_id)
        token = client.token

    async with running(tmp_path) as restarted:
        await restarted.engine.settle(identity_id)
        admin = await Api(create_app(restarted), controller=restarted).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        assert (await admin.get(f"/sessions/{session_id}")).status == 404
        client = admin.with_token(token).as_client()
        refused = await dial(client, ids["service"])
        assert refused.status == 409 and refused.error["code"] == "INVALID_POSTURE"
        data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
        assert all(not entry["mfa"]["passedMfa"] for entry in data["apiSessionPostureData"].values())
        with restarted.store.read() as txn:
            assert not txn.exists(PENDING_KIND, identity_id)  # handled once: the actor's write deleted it


async def test_a_removal_the_actor_handles_leaves_no_pending_record(admin: Api, controller: Controller,
                                                                    autojump_clock: trio.abc.Clock) -> None:
    ids = await mfa_network(admin)
    identity_id, client = await posture_user(admin)
    secret, _ = await enrol(client, controller)
    session_id = (await dial(client, ids["service"])).data["id"]
    await trio.sleep(30)
    removed = await client.delete("/current-identity/mfa", headers={"mfa-validation-code": totp(controller, secret)})
    assert removed.status == 200
    assert (await admin.get(f"/sessions/{session_id}")).status == 404
    with controller.store.read() as txn:
        assert not txn.exists(PENDING_KIND, identity_id)
