"""A controller node reaching etcd over mutual TLS (``--etcd-ca``, ``--etcd-cert``, ``--etcd-key``): etcd that serves
clients only over TLS with a client certificate signed by its CA."""

from __future__ import annotations

from pathlib import Path

import httpx

from controller.etcd import TlsFiles
from tests.cluster.controllers import Node, admin_session
from tests.cluster.etcd_cluster import EtcdCluster, ServerTls
from tests.cluster.test_etcd_tls import tls_etcd, tls_files

__all__ = ["tls_etcd", "tls_files"]  # the fixtures this module uses


async def test_a_node_serves_through_an_etcd_that_takes_only_client_certificates(
        tls_etcd: EtcdCluster, tls_files: tuple[ServerTls, TlsFiles], tmp_path: Path) -> None:
    client = tls_files[1]
    node = Node("tls-node", tmp_path, tls_etcd.endpoints, "/tls-network/",
                extra=["--etcd-ca", str(client.ca), "--etcd-cert", str(client.cert), "--etcd-key", str(client.key)])
    node.spawn()
    try:
        await node.wait_serving()
        async with httpx.AsyncClient(timeout=30) as http:
            admin = await admin_session(http, node)
            created = await admin.post(node, "/services", {"name": "over-tls", "encryptionRequired": True})
            assert created.status_code == 201, created.text
            listed = await admin.get(node, "/controllers")
            assert [row["isOnline"] for row in listed.json()["data"]] == [True]
    finally:
        node.kill()
