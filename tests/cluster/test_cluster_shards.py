"""Identity actors sharded over the live nodes, and calls forwarded to the owner: two nodes in this process on the
worker's etcd, reached over HTTP as clients reach them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from controller.cluster.call_signing import SIGNATURE_HEADER
from controller.cluster.channel import CHANNEL_PATH
from controller.cluster.shards import SHARDS, desired_owner
from controller.etcd import EtcdClient, Unavailable
from controller.insight import kept_events, latest_id
from controller.runtime.composition import Controller
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import HeldWatch
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, make_settings, serving, websocket_upgrade

MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"
SETTLE_WITHIN = 30.0


@asynccontextmanager
async def node(etcd: EtcdCluster, prefix: str, directory: Path, name: str) -> AsyncIterator[tuple[Controller, str]]:
    settings = make_settings(directory / name, port=0, etcd=tuple(etcd.endpoints), etcd_prefix=prefix,
                             node_name=name, lease_ttl=2, tls=False)
    async with serving(settings) as (controller, urls):
        yield controller, urls[0]


def owned(controller: Controller) -> set[int]:
    assert controller.cluster is not None and controller.cluster.ownership is not None
    return set(controller.cluster.ownership.owned())


async def until(condition: Callable[[], bool], within: float = SETTLE_WITHIN) -> None:
    """Wait (bounded) until ``condition()`` holds of nodes whose services run in this process."""
    with trio.fail_after(within):
        while not condition():  # noqa: ASYNC110  # several nodes' state: no one event says when it holds
            await trio.sleep(0.05)


async def settled(nodes: dict[str, Controller]) -> None:
    """Every shard is hosted by the node rendezvous hashing names among ``nodes``, and by no other."""
    def holds() -> bool:
        return all(owned(controller) == {s for s in range(SHARDS) if desired_owner(s, nodes) == name}
                   for name, controller in nodes.items())

    await until(holds)


async def test_each_shard_is_hosted_by_exactly_one_live_node(etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as (a, _):
        async with node(etcd, prefix, tmp_path, "b") as (b, _):
            await settled({"a": a, "b": b})
            assert owned(a) and owned(b) and not owned(a) & owned(b)
            keys = (await client.range(f"{prefix}owners/", prefix=True)).kvs
            holders = {int(kv.key.rsplit(b"/", 1)[1]): kv.value.decode() for kv in keys}
            assert holders == {s: desired_owner(s, ["a", "b"]) for s in range(SHARDS)}
            assert all(kv.lease != 0 for kv in keys)  # each on its holder's lease
        # b stopped: it handed its shards on, and a hosts every one.
        await settled({"a": a})
        assert owned(a) == set(range(SHARDS))


async def _admin(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    reply = await http.post(f"{url}{MGMT}/authenticate?method=password",
                            json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD})
    assert reply.status_code == 200, reply.text
    return {"zt-session": reply.json()["data"]["token"]}


async def _create(http: httpx.AsyncClient, url: str, headers: dict[str, str], path: str, body: Any) -> str:
    reply = await http.post(f"{url}{MGMT}{path}", json=body, headers=headers)
    assert reply.status_code == 201, reply.text
    return str(reply.json()["data"]["id"])


@dataclass(frozen=True)
class Posture:
    """A network whose Dial policy for service ``service`` needs the MAC check ``check``, and a user logged in on
    the node it was built through, whose actor node ``host`` hosts."""

    service: str
    check: str
    policy: str
    identity: str
    user: dict[str, str]


async def _posture_network(http: httpx.AsyncClient, url: str, admin: dict[str, str], host: Controller) -> Posture:
    await _create(http, url, admin, "/edge-routers", {"name": "er1", "roleAttributes": ["er"]})
    await _create(http, url, admin, "/edge-router-policies", {
        "name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    await _create(http, url, admin, "/service-edge-router-policies", {
        "name": "serp", "semantic": "AnyOf", "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    service = await _create(http, url, admin, "/services", {"name": "svc", "encryptionRequired": True,
                                                             "roleAttributes": ["s"]})
    check = await _create(http, url, admin, "/posture-checks", {
        "name": "mac", "typeId": "MAC", "roleAttributes": ["mac"], "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    policy = await _create(http, url, admin, "/service-policies", {
        "name": "p", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"],
        "postureCheckRoles": ["#mac"]})
    assert host.cluster is not None and host.cluster.ownership is not None
    index = 0
    while True:  # an identity whose actor ``host`` hosts
        index += 1
        identity = await _create(http, url, admin, "/identities", {
            "name": f"user{index}", "type": "User", "isAdmin": False, "roleAttributes": ["u"]})
        if host.cluster.ownership.owns(identity):
            break
    await _create(http, url, admin, "/authenticators", {"identityId": identity, "method": "updb",
                                                         "username": f"user{index}", "password": "pw-12345678"})
    login = await http.post(f"{url}{CLIENT}/authenticate?method=password",
                            json={"username": f"user{index}", "password": "pw-12345678"})
    assert login.status_code == 200, login.text
    return Posture(service, check, policy, identity, {"zt-session": login.json()["data"]["token"]})


async def _granted_session(http: httpx.AsyncClient, url: str, net: Posture) -> str:
    """The user reports the MAC the check wants, through ``url``, and is granted a Dial session: its id."""
    reported = await http.post(f"{url}{CLIENT}/posture-response", headers=net.user, json={
        "id": net.check, "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]})
    assert reported.status_code == 201, reported.text
    granted = await http.post(f"{url}{CLIENT}/sessions", json={"serviceId": net.service, "type": "Dial"},
                              headers=net.user)
    assert granted.status_code == 201, granted.text
    return str(granted.json()["data"]["id"])


async def test_a_request_to_another_node_gets_the_owners_decision(etcd: EtcdCluster, prefix: str,
                                                                   tmp_path: Path) -> None:
    """A posture report and session requests for an identity hosted by a, sent to b, get what a single node
    answers; a's actor decides them (b runs none), and the posture data b shows is a's."""
    async with node(etcd, prefix, tmp_path, "a") as (a, a_url), node(etcd, prefix, tmp_path, "b") as (b, b_url), \
            httpx.AsyncClient(timeout=30) as http:
        await settled({"a": a, "b": b})
        admin = await _admin(http, b_url)
        net = await _posture_network(http, b_url, admin, a)
        service, check, policy, identity, user = net.service, net.check, net.policy, net.identity, net.user

        async def dial() -> httpx.Response:
            return await http.post(f"{b_url}{CLIENT}/sessions", json={"serviceId": service, "type": "Dial"},
                                   headers=user)

        handled = a.engine.actors.handled, b.engine.actors.handled
        refused = await dial()
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "INVALID_POSTURE", refused.text
        assert refused.json()["error"]["cause"]["data"] == {policy: [{"id": check, "typeId": "MAC",
                                                                      "isPassing": False}]}
        reported = await http.post(f"{b_url}{CLIENT}/posture-response", headers=user, json={
            "id": check, "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]})
        assert reported.status_code == 201, reported.text
        granted = await dial()
        assert granted.status_code == 201, granted.text
        again = await dial()  # the same API session's Dial session: the one already granted
        assert again.status_code in (200, 201) and again.json()["data"]["id"] == granted.json()["data"]["id"]
        data = await http.get(f"{b_url}{MGMT}/identities/{identity}/posture-data", headers=admin)
        assert data.status_code == 200
        assert data.json()["data"]["mac"]["postureCheckId"] == check, data.text
        assert b.cluster is not None and b.cluster.router is not None and b.cluster.router.forwarded >= 4
        # a's actors decided (a request, a report, a re-check, two requests, a read); b's decided nothing.
        assert a.engine.actors.handled >= handled[0] + 5 and b.engine.actors.handled == handled[1]

        # The internal channel opens no link unsigned, nor signed with anything but the network's key.
        upgrade = websocket_upgrade()
        for signed in ({}, {SIGNATURE_HEADER: "1:00"}, {SIGNATURE_HEADER: f"{time.time()}:{'0' * 64}"}):
            refused = await http.get(f"{a_url}{CHANNEL_PATH}", headers=upgrade | signed)
            assert refused.status_code == 403


async def test_a_node_unsure_of_its_lease_stops_acting_and_hosts_its_shards_again(etcd: EtcdCluster, prefix: str,
                                                                                 tmp_path: Path) -> None:
    """Keepalives fail (etcd out of reach, as this node sees it): before its lease could expire the node hosts
    nothing; once they succeed again it hosts every shard again, each key on the lease it holds then (the same
    keys if the lease survived, new ones if it had to take a new lease)."""
    async with EtcdClient(etcd.endpoints) as client, node(etcd, prefix, tmp_path, "a") as (a, _):
        await settled({"a": a})
        assert a.cluster is not None
        cluster = a.cluster
        real = cluster.etcd.lease_keepalive

        async def unreachable(lease_id: int) -> int:
            raise Unavailable("etcd is out of reach (test)")

        cluster.etcd.lease_keepalive = unreachable  # type: ignore[method-assign]
        try:
            await until(lambda: not owned(a), 10)
        finally:
            cluster.etcd.lease_keepalive = real  # type: ignore[method-assign]
        await settled({"a": a})
        keeper = cluster.membership.keeper
        assert keeper is not None
        keys = (await client.range(f"{prefix}owners/", prefix=True)).kvs
        assert len(keys) == SHARDS and {kv.lease for kv in keys} == {keeper.lease_id}


async def test_forwarding_works_over_tls(etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """With TLS (the default), a node reaches the owner over HTTPS, checking its certificate against the
    network CA."""
    async def tls_node(name: str) -> Any:
        settings = make_settings(tmp_path / name, port=0, etcd=tuple(etcd.endpoints), etcd_prefix=prefix,
                                 node_name=name, lease_ttl=2, tls=True)
        return serving(settings)

    async with await tls_node("a") as (a, a_urls), await tls_node("b") as (b, _):
        assert a_urls[0].startswith("https://")
        await settled({"a": a, "b": b})
        created = await a.domain.create("identities", {"name": "tls-user", "type": "User", "isAdmin": False})
        identity = str(created["id"])
        with trio.fail_after(10):
            await b.freshness.wait_fresh()
        owner, other = (a, b) if a.cluster is not None and a.cluster.ownership is not None \
            and a.cluster.ownership.owns(identity) else (b, a)
        assert other.cluster is not None and other.cluster.router is not None
        state = await other.posture.state(identity)
        assert state.identity_id == identity and other.cluster.router.forwarded == 1
        assert owner is not other


async def test_a_policy_change_is_answered_once_the_other_nodes_have_re_checked(etcd: EtcdCluster, prefix: str,
                                                                              tmp_path: Path) -> None:
    """A posture check changed through b, which hosts no actor of the user: the answer comes once a, which does,
    has re-checked the user's session and revoked it, so that every node shows it gone at once (as a single node
    answers a policy change once its re-checks are durable)."""
    async with node(etcd, prefix, tmp_path, "a") as (a, a_url), node(etcd, prefix, tmp_path, "b") as (b, b_url), \
            httpx.AsyncClient(timeout=30) as http:
        await settled({"a": a, "b": b})
        admin = await _admin(http, b_url)
        net = await _posture_network(http, b_url, admin, a)
        session = await _granted_session(http, b_url, net)
        assert (await http.get(f"{a_url}{MGMT}/sessions/{session}", headers=admin)).status_code == 200
        # a hears of b's write only when the test hands it over: b's answer must wait for it.
        watch = HeldWatch(a)
        answered: list[httpx.Response] = []

        async def change() -> None:
            answered.append(await http.patch(f"{b_url}{MGMT}/posture-checks/{net.check}", headers=admin,
                                             json={"typeId": "MAC", "macAddresses": ["11-22-33-44-55-66"]}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(change)
            await trio.sleep(0.5)  # less than a replica's wait before it restarts its watch (a second)
            assert not answered, "answered before the node hosting the user re-checked"
            watch.release()
        assert answered[0].status_code == 200, answered[0].text
        for url in (b_url, a_url):
            gone = await http.get(f"{url}{MGMT}/sessions/{session}", headers=admin)
            assert gone.status_code == 404, gone.text


async def test_the_node_taking_over_a_shard_revokes_what_a_change_took_away(etcd: EtcdCluster, prefix: str,
                                                                           tmp_path: Path) -> None:
    """A posture check changed through b while a, which hosts the user, hears nothing of it, and a then stops before
    it re-checked: b, adopting a's shards, re-checks the user's session and revokes it, with the failing check as
    the cause, and only then answers the change."""
    async with node(etcd, prefix, tmp_path, "b") as (b, b_url), httpx.AsyncClient(timeout=30) as http, \
            trio.open_nursery() as requests:
        answered: list[httpx.Response] = []
        with trio.CancelScope() as running_a:
            async with node(etcd, prefix, tmp_path, "a") as (a, _):
                await settled({"a": a, "b": b})
                admin = await _admin(http, b_url)
                net = await _posture_network(http, b_url, admin, a)
                session = await _granted_session(http, b_url, net)
                HeldWatch(a, drop=True)  # a hears nothing more
                assert b.cluster is not None and b.cluster.router is not None
                b.cluster.router.within = 600.0  # b waits for the re-check however long the take-over takes here

                async def change() -> None:
                    answered.append(await http.patch(f"{b_url}{MGMT}/posture-checks/{net.check}", headers=admin,
                                                     json={"typeId": "MAC", "macAddresses": ["11-22-33-44-55-66"]}))

                requests.start_soon(change)
                with b.store.read() as txn:
                    before = latest_id(txn)

                def committed() -> bool:
                    with b.store.read() as txn:
                        row = txn.get("posture-checks", net.check)
                    return row is not None and row["macAddresses"] == ["11-22-33-44-55-66"]

                await until(committed)  # b waits for a's re-checks now
                assert not answered
                with a.store.read() as txn:
                    assert txn.exists("sessions", session)
                running_a.cancel()  # a stops at once, before it made them (its shards are let go as it stops)
        await until(lambda: bool(answered))
        assert answered[0].status_code == 200, answered[0].text
        assert owned(b) == set(range(SHARDS))
        with b.store.read() as txn:
            assert not txn.exists("sessions", session)
            events = [dict(event.fields) for event in kept_events(txn, before + 1)
                      if event.fields["event_type"] == "revoked"]
        assert [(event["session_id"], event["cause"]["code"]) for event in events] == [
            (session, "postureCheckFailed")]


async def test_re_checks_that_do_not_settle_are_waited_for_no_longer_than_the_bound(etcd: EtcdCluster, prefix: str,
                                                                                    tmp_path: Path) -> None:
    """A node whose actors do not settle a write's re-checks: the waiting call there ends at that node's own bound,
    while the node that made the write still waits (its bound is long here) and asks again; once the actors settle,
    the node answers, and so does the write."""
    async with node(etcd, prefix, tmp_path, "a") as (a, _), node(etcd, prefix, tmp_path, "b") as (b, b_url), \
            httpx.AsyncClient(timeout=30) as http:
        await settled({"a": a, "b": b})
        admin = await _admin(http, b_url)
        net = await _posture_network(http, b_url, admin, a)
        ended = trio.Event()

        async def never(identity_ids: Any) -> None:
            try:
                await trio.sleep_forever()
            finally:
                ended.set()

        a.engine.settle_hosted = never  # type: ignore[method-assign]
        assert a.cluster is not None and a.cluster.router is not None
        assert b.cluster is not None and b.cluster.router is not None
        a.cluster.router.within, b.cluster.router.within = 1.0, 600.0
        answered: list[httpx.Response] = []

        async def change() -> None:
            answered.append(await http.patch(f"{b_url}{MGMT}/posture-checks/{net.check}", headers=admin,
                                             json={"typeId": "MAC", "macAddresses": ["11-22-33-44-55-66"]}))

        with trio.fail_after(2 * SETTLE_WITHIN):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(change)
                await ended.wait()
                assert not answered
                del a.engine.settle_hosted  # the actors settle again; b asks again on its own
        assert answered[0].status_code == 200, answered[0].text
