"""One network's rules across real controller processes: what any node acknowledged, every node serves at once, and
the rules a single node keeps (unique names, references, cascades, one-time tokens) hold across nodes."""

from __future__ import annotations

import uuid

import httpx
import trio

from tests.cluster.controllers import CLIENT, MGMT, Network, admin_session, login

ROUNDS = 12


def _name(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


async def test_a_login_on_one_node_is_a_session_on_every_node_at_once(net: Network) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for round_ in range(ROUNDS):
            here, there = net.nodes[round_ % 3], net.nodes[(round_ + 1) % 3]
            reply = await login(http, here)
            assert reply.status_code == 200, reply.text
            token = reply.json()["data"]["token"]
            seen = await http.get(f"{there.url}{MGMT}/current-api-session", headers={"zt-session": token})
            assert seen.status_code == 200, seen.text
            assert seen.json()["data"]["id"] == reply.json()["data"]["id"]
            # Logged out on the second node: refused on the first at once.
            out = await http.delete(f"{there.url}{MGMT}/current-api-session", headers={"zt-session": token})
            assert out.status_code == 200, out.text
            refused = await http.get(f"{here.url}{MGMT}/current-api-session", headers={"zt-session": token})
            assert refused.status_code == 401


async def test_what_one_node_creates_every_node_reads_and_lists_at_once(net: Network) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        for round_ in range(ROUNDS):
            here, there = net.nodes[round_ % 3], net.nodes[(round_ + 2) % 3]
            name = _name("svc")
            created = await admin.post(here, "/services", {"name": name, "encryptionRequired": True})
            assert created.status_code == 201, created.text
            service_id = created.json()["data"]["id"]
            detail = await admin.get(there, f"/services/{service_id}")
            assert detail.status_code == 200 and detail.json()["data"]["name"] == name
            listed = await admin.get(there, f'/services?filter=name="{name}"')
            assert [row["id"] for row in listed.json()["data"]] == [service_id]
            gone = await admin.delete(there, f"/services/{service_id}")
            assert gone.status_code == 200
            assert (await admin.get(here, f"/services/{service_id}")).status_code == 404


async def test_two_nodes_creating_one_name_at_once_one_succeeds(net: Network) -> None:
    """Each round, two nodes are asked for the same name at the same instant: exactly one creates it, and the other
    answers what a single node answers for a duplicate."""
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        first = {"name": _name("dup"), "encryptionRequired": True}
        assert (await admin.post(net.nodes[0], "/services", first)).status_code == 201
        duplicate = (await admin.post(net.nodes[0], "/services", first)).json()
        for round_ in range(ROUNDS):
            name = _name("same")
            replies: list[httpx.Response] = []

            async def create(index: int, name: str = name, replies: list[httpx.Response] = replies) -> None:
                replies.append(await admin.post(net.nodes[index], "/services",
                                                {"name": name, "encryptionRequired": True}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(create, round_ % 3)
                nursery.start_soon(create, (round_ + 1) % 3)
            statuses = sorted(reply.status_code for reply in replies)
            assert statuses == [201, 400], [reply.text for reply in replies]
            refused = next(reply for reply in replies if reply.status_code == 400).json()
            assert refused["error"]["code"] == duplicate["error"]["code"]
            assert refused["error"]["cause"]["reason"] == duplicate["error"]["cause"]["reason"]
            listed = await admin.get(net.nodes[2], f'/services?filter=name="{name}"')
            assert len(listed.json()["data"]) == 1


async def test_references_and_cascades_hold_across_nodes(net: Network) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        a, b, c = net.nodes
        # A reference to a row another node just created is accepted...
        config_type = await admin.post(a, "/config-types", {"name": _name("ct")})
        assert config_type.status_code == 201
        type_id = config_type.json()["data"]["id"]
        config = await admin.post(b, "/configs", {"name": _name("cfg"), "configTypeId": type_id, "data": {}})
        assert config.status_code == 201, config.text
        # ... and the row it names cannot be deleted from a third node while it is referenced.
        referenced = await admin.delete(c, f"/config-types/{type_id}")
        assert referenced.status_code == 409, referenced.text
        # A reference to a row another node deleted is refused.
        assert (await admin.delete(a, f"/configs/{config.json()['data']['id']}")).status_code == 200
        assert (await admin.delete(b, f"/config-types/{type_id}")).status_code == 200
        dangling = await admin.post(c, "/configs", {"name": _name("cfg"), "configTypeId": type_id, "data": {}})
        assert dangling.status_code == 400, dangling.text
        # Deleting an identity on one node ends its API sessions, whose tokens every node refuses at once.
        user = _name("user")
        identity = await admin.post(a, "/identities", {"name": user, "type": "User", "isAdmin": False,
                                                       "enrollment": {"updb": user}})
        assert identity.status_code == 201, identity.text
        identity_id = identity.json()["data"]["id"]
        token = (await admin.get(b, f"/identities/{identity_id}")).json()["data"]["enrollment"]["updb"]["token"]
        enrolled = await http.post(f"{c.url}/enroll?method=updb&token={token}", json={"password": "user-pass-1"})
        assert enrolled.status_code == 200, enrolled.text
        logged_in = await login(http, a, user, "user-pass-1", api=CLIENT)
        assert logged_in.status_code == 200, logged_in.text
        session = {"zt-session": logged_in.json()["data"]["token"]}
        assert (await http.get(f"{b.url}{CLIENT}/current-identity", headers=session)).status_code == 200
        assert (await admin.delete(c, f"/identities/{identity_id}")).status_code == 200
        for node in net.nodes:
            assert (await http.get(f"{node.url}{CLIENT}/current-identity", headers=session)).status_code == 401


async def test_an_enrolment_token_works_once_across_nodes(net: Network) -> None:
    """Two nodes are handed the same one-time token at the same instant: one enrols, the other refuses it."""
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        for round_ in range(4):
            user = _name("ott")
            created = await admin.post(net.nodes[round_ % 3], "/identities",
                                       {"name": user, "type": "User", "isAdmin": False, "enrollment": {"updb": user}})
            assert created.status_code == 201
            detail = await admin.get(net.nodes[(round_ + 1) % 3], f"/identities/{created.json()['data']['id']}")
            token = detail.json()["data"]["enrollment"]["updb"]["token"]
            replies: list[httpx.Response] = []

            async def enrol(index: int, token: str = token, replies: list[httpx.Response] = replies) -> None:
                replies.append(await http.post(f"{net.nodes[index].url}/enroll?method=updb&token={token}",
                                               json={"password": f"password-{index}"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(enrol, round_ % 3)
                nursery.start_soon(enrol, (round_ + 2) % 3)
            assert sorted(reply.status_code for reply in replies) == [200, 400], [r.text for r in replies]
            refused = next(reply for reply in replies if reply.status_code == 400)
            assert refused.json()["error"]["code"] == "INVALID_ENROLLMENT_TOKEN"


async def test_every_node_lists_every_live_node(net: Network) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        for node in net.nodes:
            for api in (MGMT, CLIENT):
                reply = await http.get(f"{node.url}{api}/controllers", headers=admin.headers())
                assert reply.status_code == 200, reply.text
                rows = {row["name"]: row for row in reply.json()["data"]}
                assert {n.name for n in net.nodes} <= rows.keys()
                for other in net.nodes:
                    row = rows[other.name]
                    assert row["isOnline"] is True
                    assert row["apiAddresses"]["edge-client"][0]["url"] == f"{other.url}/edge/client/v1"
                    assert ("ctrlAddress" in row) == (api == MGMT)
