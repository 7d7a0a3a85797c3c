"""A node's life on a network: restarted on its data directory it catches up, on an empty one it rebuilds, after a
compaction of the history it missed it rebuilds; several nodes starting at once on an empty prefix initialise it
once; with etcd unreachable a start fails fast."""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, pkcs7

from controller.cluster.unsynced import current_boot
from controller.etcd import EtcdClient
from tests.cluster.controllers import CLIENT, Network, Node, Session, admin_session, login
from tests.cluster.etcd_cluster import EtcdCluster

UNREACHABLE_BOUND = 30.0
DISCARDED = ("the machine restarted while the replica was written without fsync: discarding it to rebuild it from "
             "etcd")


async def _services_created_while_away(admin: Session, node: Node, count: int) -> dict[str, str]:
    created = {}
    for _ in range(count):
        name = f"away-{uuid.uuid4().hex[:8]}"
        reply = await admin.post(node, "/services", {"name": name, "encryptionRequired": True})
        assert reply.status_code == 201, reply.text
        created[name] = reply.json()["data"]["id"]
    return created


async def _serves(admin: Session, node: Node, services: dict[str, str]) -> None:
    for name, service_id in services.items():
        detail = await admin.get(node, f"/services/{service_id}")
        assert detail.status_code == 200 and detail.json()["data"]["name"] == name, detail.text


async def test_a_node_restarted_on_its_data_directory_catches_up(net: Network) -> None:
    away = net.nodes[2]
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        assert (await admin.get(away, "/services?limit=1")).status_code == 200
        away.kill()
        rebuilt = len(away.log_lines("replica rebuilt from etcd"))
        created = await _services_created_while_away(admin, net.nodes[0], 5)
        away.spawn()
        await away.wait_serving()
        await _serves(admin, away, created)
        # It resumed its watch where it stopped: no rebuild.
        assert len(away.log_lines("replica rebuilt from etcd")) == rebuilt


async def test_a_node_restarted_on_an_empty_data_directory_rebuilds(net: Network) -> None:
    away = net.nodes[1]
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        created = await _services_created_while_away(admin, net.nodes[0], 3)
        away.kill()
        shutil.rmtree(away.data_dir)
        away.spawn()
        await away.wait_serving()
        await _serves(admin, away, created)
        assert (await login(http, away)).status_code == 200
        ca = (away.data_dir / "pki" / "ca.pem").read_bytes()
        assert ca == (net.nodes[0].data_dir / "pki" / "ca.pem").read_bytes()


async def test_a_node_away_while_etcd_compacted_its_history_rebuilds(net: Network, etcd: EtcdCluster) -> None:
    away = net.nodes[2]
    async with httpx.AsyncClient(timeout=30) as http, EtcdClient(etcd.endpoints) as client:
        admin = await admin_session(http, net.nodes[0])
        away.kill()
        compactions = len(away.log_lines("the replica's history was compacted in etcd: rebuilding it"))
        created = await _services_created_while_away(admin, net.nodes[1], 5)
        revision = (await client.range(b"/", count_only=True)).header.revision
        await etcd.compact(revision)
        away.spawn()
        await away.wait_serving()
        await _serves(admin, away, created)
        assert len(away.log_lines("the replica's history was compacted in etcd: rebuilding it")) > compactions


async def test_nodes_starting_at_once_on_an_empty_prefix_initialise_it_once(etcd: EtcdCluster,
                                                                             tmp_path: Path) -> None:
    """Three TLS nodes started at the same instant: one initialises, every node serves the same CA, each node's
    certificate chains to it and carries the one shared key, and an enrolment JWT one node signs verifies against
    the certificate another node presents (as the C SDK checks it)."""
    network = Network(tmp_path, etcd.endpoints, tls=True)
    try:
        await network.start()
        assert sum(len(node.log_lines("initialising the network")) for node in network.nodes) == 1
        bundles = set()
        async with httpx.AsyncClient(timeout=30, verify=False) as http:
            for node in network.nodes:
                reply = await http.get(f"{node.url}/.well-known/est/cacerts")
                assert reply.status_code == 200
                bundles.add(reply.text)
            [bundle] = bundles
            [ca] = pkcs7.load_der_pkcs7_certificates(base64.b64decode(bundle))
            leaves = [_presented_certificate(node) for node in network.nodes]
            for leaf in leaves:
                leaf.verify_directly_issued_by(ca)
            assert len({leaf.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
                        for leaf in leaves}) == 1
            admin = await admin_session(http, network.nodes[0])
            identities = await admin.get(network.nodes[2], '/identities?filter=isDefaultAdmin=true')
            assert len(identities.json()["data"]) == 1
            created = await admin.post(network.nodes[0], "/identities",
                                       {"name": "laptop", "type": "Device", "isAdmin": False,
                                        "enrollment": {"ott": True}})
            assert created.status_code == 201, created.text
            detail = await admin.get(network.nodes[1], f"/identities/{created.json()['data']['id']}")
            token = detail.json()["data"]["enrollment"]["ott"]["jwt"]
            for leaf in leaves:
                claims = jwt.decode(token, leaf.public_key(), algorithms=["RS256"], options={"verify_aud": False})
                assert claims["em"] == "ott"
            for node in network.nodes:
                assert (await login(http, node, api=CLIENT)).status_code == 200
    finally:
        network.stop()


def _presented_certificate(node: Node) -> x509.Certificate:
    """The leaf certificate ``node`` presents in its TLS handshake."""
    host, port = node.url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_a_start_with_etcd_unreachable_fails_fast(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data_dir = tmp_path / "data"
    started = time.monotonic()
    finished = subprocess.run([str(Path(sys.executable).with_name("tollgate")), "serve", "--etcd",
                               f"http://127.0.0.1:{port}", "--port", "0", "--no-tls", "--data-dir", str(data_dir)],
                              capture_output=True, timeout=UNREACHABLE_BOUND + 30, check=False)
    took = time.monotonic() - started
    assert finished.returncode != 0
    assert took <= UNREACHABLE_BOUND, took
    assert b"did not answer within" in finished.stderr, finished.stderr[-2000:]
    assert not (data_dir / "db").exists() and not (data_dir / "pki").exists()  # nothing half-initialised


async def test_guesses_spread_over_nodes_are_throttled_as_on_one(net: Network) -> None:
    """A username's five wrong passwords, one node after the other: the sixth try is refused on every node."""
    username = f"nobody-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=30) as http:
        for attempt in range(5):
            reply = await login(http, net.nodes[attempt % 3], username, "wrong-password")
            assert reply.status_code == 401, reply.text
        for node in net.nodes:
            refused = await login(http, node, username, "wrong-password")
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["Retry-After"]) >= 1


async def test_a_lockout_counts_wrong_passwords_on_every_node(net: Network) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        policy = await admin.post(net.nodes[0], "/auth-policies", {
            "name": f"strict-{uuid.uuid4().hex[:8]}",
            "primary": {"cert": {"allowed": True, "allowExpiredCerts": True},
                        "extJwt": {"allowed": False, "allowedSigners": []},
                        "updb": {"allowed": True, "maxAttempts": 2, "lockoutDurationMinutes": 5,
                                 "minPasswordLength": 5, "requireMixedCase": False, "requireNumberChar": False,
                                 "requireSpecialChar": False}},
            "secondary": {"requireTotp": False}})
        assert policy.status_code == 201, policy.text
        user = f"locked-{uuid.uuid4().hex[:8]}"
        identity = await admin.post(net.nodes[1], "/identities", {
            "name": user, "type": "User", "isAdmin": False, "authPolicyId": policy.json()["data"]["id"],
            "enrollment": {"updb": user}})
        assert identity.status_code == 201, identity.text
        identity_id = identity.json()["data"]["id"]
        token = (await admin.get(net.nodes[2], f"/identities/{identity_id}")).json()["data"]["enrollment"]["updb"]
        enrolled = await http.post(f"{net.nodes[0].url}/enroll?method=updb&token={token['token']}",
                                   json={"password": "right-password"})
        assert enrolled.status_code == 200, enrolled.text
        for attempt in range(3):  # one more than maxAttempts, each on another node
            reply = await login(http, net.nodes[attempt], user, "wrong-password", api=CLIENT)
            assert reply.status_code == 401, reply.text
        detail = await admin.get(net.nodes[0], f"/identities/{identity_id}")
        assert detail.json()["data"]["disabled"] is True
        assert (await login(http, net.nodes[1], user, "right-password", api=CLIENT)).status_code == 401


async def test_a_data_directory_of_another_network_is_rebuilt_not_resumed(etcd: EtcdCluster, tmp_path: Path) -> None:
    """A node's data directory held another network's replica (another prefix): started on this network, it serves
    this network's rows only."""
    node = Node("mover", tmp_path, etcd.endpoints, f"/tests/{uuid.uuid4().hex}/")
    try:
        node.spawn()
        await node.wait_serving()
        async with httpx.AsyncClient(timeout=30) as http:
            admin = await admin_session(http, node)
            elsewhere = await _services_created_while_away(admin, node, 2)
            await node.stop()
            node.prefix = f"/tests/{uuid.uuid4().hex}/"
            node.spawn()
            await node.wait_serving()
            admin = await admin_session(http, node)
            for service_id in elsewhere.values():
                assert (await admin.get(node, f"/services/{service_id}")).status_code == 404
            assert len(node.log_lines("replica rebuilt from etcd")) == 2
    finally:
        node.kill()


async def test_a_node_whose_machine_went_down_rebuilds_its_unsynced_replica(net: Network) -> None:
    """The replica is written without fsync under a guard naming the boot: a node killed keeps its replica (same
    boot); one whose guard names another boot (the machine restarted) discards it and rebuilds from etcd; a clean
    stop removes the guard."""
    away = net.nodes[2]
    guard = away.data_dir / "db.unsynced"
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await admin_session(http, net.nodes[0])
        assert (await admin.get(away, "/services?limit=1")).status_code == 200
        assert guard.read_text() == current_boot()
        away.kill()
        rebuilt = len(away.log_lines("replica rebuilt from etcd"))
        created = await _services_created_while_away(admin, net.nodes[0], 3)
        guard.write_text("a-boot-before-a-crash-of-the-machine")
        away.spawn()
        await away.wait_serving()
        await _serves(admin, away, created)
        assert len(away.log_lines(DISCARDED)) == 1
        assert len(away.log_lines("replica rebuilt from etcd")) == rebuilt + 1
        assert guard.read_text() == current_boot()
        await away.stop()
        assert not guard.exists()
        away.spawn()
        await away.wait_serving()
        await _serves(admin, away, created)
        assert len(away.log_lines("replica rebuilt from etcd")) == rebuilt + 1  # resumed from the closed replica
