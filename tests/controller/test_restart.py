"""Restart on the same data directory with the in-process stack: resources, API sessions (token and last activity),
the default admin and its first password all survive; a session that expired while the controller was down does
not; an index that the data directory's writer did not have is built on open."""

from __future__ import annotations

from pathlib import Path

import lmdb
import trio
import trio.testing

from controller.clock import Clock
from controller.resources.edge_sessions import SAME_REQUEST
from storage.indexes import index_name
from tests.support import Api, make_user, running
from web.app import create_app

EPOCH = 1_700_000_000.0


def _credentials(data_dir: Path) -> dict[str, str]:
    lines = (data_dir / "admin-credentials").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


async def test_everything_survives_a_restart(tmp_path: Path) -> None:
    async with running(tmp_path, admin_password=None) as controller:
        credentials = _credentials(tmp_path)
        anon = Api(create_app(controller), controller=controller)
        admin = await anon.login(credentials["username"], credentials["password"])
        identity_id = await admin.create("/identities", {"name": "survivor", "type": "Device", "isAdmin": False,
                                                         "roleAttributes": ["blue"]})
        service_id = await admin.create("/services", {"name": "svc", "encryptionRequired": True,
                                                      "roleAttributes": ["web"]})
        last_use = await admin.get("/current-api-session")
        session_id = last_use.data["id"]
        last_activity = last_use.data["lastActivityAt"]

    async with running(tmp_path, admin_password=None) as controller:
        assert _credentials(tmp_path) == credentials  # not rewritten: no new password was made up
        anon = Api(create_app(controller), controller=controller)
        # The row as persisted at shutdown, read through a second admin session so the first is not touched.
        other = await anon.login(credentials["username"], credentials["password"])
        restored = await other.get(f"/api-sessions/{session_id}")
        assert restored.status == 200
        assert restored.data["lastActivityAt"] == last_activity

        admin = anon.with_token(admin.token)
        identity = await admin.get(f"/identities/{identity_id}")
        assert identity.status == 200
        assert (identity.data["name"], identity.data["type"]["id"], identity.data["roleAttributes"]) == (
            "survivor", "Device", ["blue"])
        assert (await admin.get(f"/services/{service_id}")).data["name"] == "svc"
        admins = await admin.get("/identities", query={"filter": "isDefaultAdmin = true"})
        assert len(admins.data) == 1
        assert len((await admin.get("/authenticators")).data) == 1


async def test_a_session_that_expired_while_down_is_gone(tmp_path: Path) -> None:
    async with running(tmp_path, Clock(wall_base=EPOCH), session_timeout=600, admin_password=None) as controller:
        credentials = _credentials(tmp_path)
        anon = Api(create_app(controller), controller=controller)
        stale = await anon.login(credentials["username"], credentials["password"])
        second = await anon.login(credentials["username"], credentials["password"])
        stale_id = (await stale.get("/current-api-session")).data["id"]
        stopped_at = controller.clock.now()

    # Ten minutes and one second after the first run stopped (whatever the time it took on this machine), on the wall
    # clock: every session of that run has expired.
    async with running(tmp_path, Clock(wall_base=stopped_at + 601), session_timeout=600,
                       admin_password=None) as controller:
        anon = Api(create_app(controller), controller=controller)
        assert (await anon.with_token(stale.token).get("/current-identity")).status == 401
        assert (await anon.with_token(second.token).get("/current-identity")).status == 401
        admin = await anon.login(credentials["username"], credentials["password"])
        await trio.testing.wait_all_tasks_blocked()
        assert (await admin.get(f"/api-sessions/{stale_id}")).status == 404
        assert [s["id"] for s in (await admin.get("/api-sessions")).data] == [
            (await admin.get("/current-api-session")).data["id"]]


async def test_sessions_are_found_again_after_their_index_is_built_on_open(tmp_path: Path) -> None:
    async with running(tmp_path, admin_password=None) as controller:
        credentials = _credentials(tmp_path)
        admin = await Api(create_app(controller), controller=controller).login(credentials["username"],
                                                                               credentials["password"])
        await admin.create("/edge-routers", {"name": "er1"})
        await admin.create("/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                     "edgeRouterRoles": ["#all"]})
        await admin.create("/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf",
                                                             "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
        for policy_type in ("Dial", "Bind"):
            await admin.create("/service-policies", {"name": policy_type, "type": policy_type, "semantic": "AnyOf",
                                                     "identityRoles": ["#all"], "serviceRoles": ["#all"]})
        services = [await admin.create("/services", {"name": f"svc{n}", "encryptionRequired": True})
                    for n in range(3)]
        _, client = await make_user(admin, "tunneler")
        client = client.as_client()
        sessions = {}
        for service_id in services:
            for session_type in ("Dial", "Bind"):
                reply = await client.post("/sessions", {"serviceId": service_id, "type": session_type})
                assert reply.status == 201, reply.body
                sessions[service_id, session_type] = reply.data["id"]
        assert len(set(sessions.values())) == 6

    # As a data directory written before sessions had the index looks: no such DB at all.
    env = lmdb.open(str(tmp_path / "db"), max_dbs=256)
    with env.begin(write=True) as txn:
        index = env.open_db(index_name("c", "sessions", SAME_REQUEST).encode(), txn=txn, create=False)
        assert txn.stat(index)["entries"] == 6
        txn.drop(index)
    env.close()

    async with running(tmp_path, admin_password=None) as controller:
        client = Api(create_app(controller), controller=controller).as_client().with_token(client.token)
        for (service_id, session_type), session_id in sessions.items():
            again = await client.post("/sessions", {"serviceId": service_id, "type": session_type})
            assert (again.status, again.data["id"]) == (201, session_id)
        admin = await Api(create_app(controller), controller=controller).login(credentials["username"],
                                                                               credentials["password"])
        await admin.delete(f"/sessions/{sessions[services[1], 'Bind']}")
        fresh = await client.post("/sessions", {"serviceId": services[1], "type": "Bind"})
        assert fresh.status == 201 and fresh.data["id"] not in sessions.values()
        assert len((await admin.get("/sessions")).data) == 6
