"""Requests that need the leader go to it (``controller/etcd/routing.py``): found before the first such request,
found again after an election, a silent member skipped; the choice itself as plain state."""

from __future__ import annotations

import httpx
import trio

from controller.etcd import EtcdClient, Header, MemberStatus
from controller.etcd.routing import ROUTE_WITHIN, LeaderRoute
from tests.cluster.controllers import wait_until
from tests.cluster.etcd_cluster import EtcdCluster


def followers_first(etcd: EtcdCluster, leader: int) -> list[str]:
    return [endpoint for index, endpoint in enumerate(etcd.endpoints) if index != leader] + [etcd.endpoints[leader]]


async def member_id(etcd: EtcdCluster, index: int) -> int:
    async with httpx.AsyncClient(timeout=10) as http:
        status = (await http.post(f"{etcd.endpoints[index]}/v3/maintenance/status", json={})).json()
    return int(status["header"]["member_id"])


async def test_writes_and_linearizable_reads_go_to_the_leader(etcd: EtcdCluster, prefix: str) -> None:
    """Given the followers first, the client answers a serializable read from the first of them without asking
    anyone's status, then finds the leader before its first write: the leader answers the write and the
    linearizable read after it."""
    leader = await etcd.leader()
    endpoints = followers_first(etcd, leader)
    async with EtcdClient(endpoints) as client:
        await client.get(f"{prefix}k", serializable=True)
        assert client.current_endpoint == endpoints[0]
        assert "maintenance/status" not in client.requests
        written = await client.put(f"{prefix}k", "v")
        assert client.current_endpoint == etcd.endpoints[leader]
        assert client.requests["maintenance/status"] == 3  # both followers named the leader; the leader itself
        assert written.header.member_id == await member_id(etcd, leader)
        read = await client.range(f"{prefix}k")
        assert read.header.member_id == written.header.member_id
        assert client.requests["maintenance/status"] == 3


async def test_the_client_follows_the_leader_to_another_member(etcd: EtcdCluster, prefix: str) -> None:
    """Leadership moves to another member (etcd's own transfer): the first answer after it carries the new term,
    and the request after that goes to the new leader."""
    leader = await etcd.leader()
    async with EtcdClient(etcd.endpoints) as client:
        before = await client.put(f"{prefix}k", "1")
        assert client.current_endpoint == etcd.endpoints[leader]
        successor = (leader + 1) % len(etcd.members)
        target = await member_id(etcd, successor)
        async with httpx.AsyncClient(timeout=10) as http:
            moved = await http.post(f"{etcd.endpoints[leader]}/v3/maintenance/transfer-leadership",
                                    json={"targetID": str(target)})
        assert moved.status_code == 200, moved.text

        async def moved_on() -> bool:  # the member asked may learn of the move a moment later
            return await etcd.leader() == successor

        await wait_until(moved_on, 10)
        with trio.fail_after(10):
            after = await client.put(f"{prefix}k", "2")  # the old leader forwards it; its answer bears the new term
            assert after.header.raft_term > before.header.raft_term
            again = await client.put(f"{prefix}k", "3")
        assert client.current_endpoint == etcd.endpoints[successor]
        assert again.header.member_id == target


async def test_a_silent_member_is_passed_over_within_its_bound(etcd: EtcdCluster, prefix: str) -> None:
    """The first endpoint is a paused follower (its sockets open, nothing answering): the client waits
    ``ROUTE_WITHIN`` for its status, not its request timeout, asks the others, and the write goes to the leader."""
    leader = await etcd.leader()
    endpoints = followers_first(etcd, leader)
    silent = etcd.endpoints.index(endpoints[0])
    etcd.pause(silent)
    try:
        async with EtcdClient(endpoints, request_timeout=10) as client:
            began = trio.current_time()
            written = await client.put(f"{prefix}k", "v")
            took = trio.current_time() - began
            assert client.current_endpoint == etcd.endpoints[leader]
            assert written.header.member_id == await member_id(etcd, leader)
    finally:
        etcd.resume(silent)
    assert ROUTE_WITHIN <= took < 5


def status(member: int, leader: int, term: int) -> MemberStatus:
    return MemberStatus(header=Header(member_id=member, raft_term=term), leader=leader)


def test_the_route_is_chosen_again_when_the_term_or_the_member_changes() -> None:
    route = LeaderRoute()
    assert route.due("a")
    route.choosing = True
    assert not route.due("a")  # one request finds it; the others do not wait for that
    assert route.leads(status(member=2, leader=1, term=4), 0) == (False, 1)
    assert route.leads(status(member=1, leader=1, term=4), 1) == (True, 1)
    route.chosen("b")
    assert not route.choosing
    assert not route.due("b")
    assert route.due("a")  # the transport moved on from the member chosen
    route.saw(Header(raft_term=3))
    assert not route.due("b")  # an older term changes nothing
    route.saw(Header(raft_term=5))
    assert route.due("b")


def test_no_member_leads_while_none_names_a_leader() -> None:
    route = LeaderRoute()
    assert route.leads(status(member=7, leader=0, term=2), 0) == (False, 0)
    assert route.leads(status(member=8, leader=0, term=2), 0) == (False, 0)
    assert route.term == 2
