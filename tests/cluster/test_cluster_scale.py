"""A network larger than one etcd txn and one page of a range, with cluster nodes in this process on the worker's
etcd: a node rebuilt on an empty data directory holds every row and accepts every API session; a change of policies
that every identity re-checks is answered once their states are stored; the activity of many API sessions is stored
when a node stops. Each writes or reads more than etcd takes at once (``--max-txn-ops`` 128, a range's page)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import trio

from bench.identity_seeding import SeededLogin, seed_mfa_logins
from controller.authentication.api_sessions import TOKEN_DIGEST, token_digest
from controller.clock import parse_time
from controller.cluster.local_replica import PUBLISH_PART
from controller.cluster.snapshot import FIRST_PAGE
from controller.posture.state import STATE_KIND, IdentityState, decode_state
from controller.runtime.composition import Controller
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import node, served_node
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, CLIENT, MGMT

SEEDED = 300  # identities, four rows each: more than a page, a part, and a txn's 128 operations
OWNED_WITHIN = 20.0  # seconds for a lone node to hold every shard once the seeding node has left


async def seeded(etcd: EtcdCluster, prefix: str, directory: Path) -> list[SeededLogin]:
    """:data:`SEEDED` identities, each with an API session, written by a node that has left when this returns."""
    async with node(etcd, prefix, directory, "seeder") as seeder:
        return await seed_mfa_logins(seeder, SEEDED, deadlines_per_second=10, start_in=600, timeout_seconds=3600)


def states(controller: Controller, logins: list[SeededLogin]) -> dict[str, IdentityState]:
    """The stored posture state of each seeded identity."""
    found = {}
    with controller.store.read() as txn:
        for login in logins:
            data = txn.get_raw(STATE_KIND, login.identity_id)
            assert data is not None, login.identity_id
            found[login.identity_id] = decode_state(login.identity_id, data)
    return found


async def hosts_all(controller: Controller, logins: list[SeededLogin]) -> None:
    assert controller.cluster is not None and controller.cluster.ownership is not None
    ownership = controller.cluster.ownership
    with trio.fail_after(OWNED_WITHIN):
        while not all(ownership.owns(login.identity_id) for login in logins):
            await ownership.changed.park()


async def test_a_rebuilt_node_holds_every_row_and_stores_every_sessions_activity_when_it_stops(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    assert max(FIRST_PAGE, PUBLISH_PART) < SEEDED * 4
    logins = await seeded(etcd, prefix, tmp_path)
    seeded_by = math.floor(time.time() * 1000) / 1000  # stored times have milliseconds
    async with served_node(etcd, prefix, tmp_path, "b") as (rebuilt, http):
        with rebuilt.store.read() as txn:
            for login in logins:
                identity = login.identity_id
                assert txn.get("identities", identity) is not None
                assert txn.get_raw(STATE_KIND, identity) is not None
                api_session = txn.get("api-sessions", identity + "a")
                assert api_session is not None and api_session[TOKEN_DIGEST] == token_digest(login.api_token)
                assert txn.get("sessions", identity + "s") is not None
        for login in logins:
            reply = await http.get(f"{CLIENT}/current-api-session", headers={"zt-session": login.api_token})
            assert reply.status_code == 200, reply.text
    # "b" stopped cleanly, having stored every session's activity: a node rebuilt after it reads it from etcd.
    async with node(etcd, prefix, tmp_path, "c") as after:
        with after.store.read() as txn:
            for login in logins:
                api_session = txn.get("api-sessions", login.identity_id + "a")
                assert api_session is not None
                assert parse_time(api_session["lastActivityAt"]) >= seeded_by


async def test_a_policy_change_every_identity_rechecks_is_answered_once_their_states_are_stored(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    logins = await seeded(etcd, prefix, tmp_path)
    async with served_node(etcd, prefix, tmp_path, "b") as (lone, http):
        await hosts_all(lone, logins)
        before = {identity: state.access_digest for identity, state in states(lone, logins).items()}
        login = await http.post(f"{MGMT}/authenticate?method=password",
                                json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD})
        admin = {"zt-session": login.json()["data"]["token"]}
        for path, body in (("/services", {"name": "svc", "encryptionRequired": True, "roleAttributes": ["s"]}),
                           ("/service-policies", {"name": "p", "type": "Dial", "semantic": "AnyOf",
                                                  "identityRoles": ["#all"], "serviceRoles": ["#s"]})):
            reply = await http.post(f"{MGMT}{path}", json=body, headers=admin)
            assert reply.status_code == 201, reply.text
        after = states(lone, logins)
        assert [identity for identity, digest in before.items() if after[identity].access_digest == digest] == []
