"""Fixtures of the cluster tests: one real three-member etcd per pytest worker, whole at the start of every test.

- ``etcd_cluster`` (session): the ``EtcdCluster`` of this worker, started on first use and stopped at the end.
- ``etcd`` (per test): the same cluster, healed first (paused members resumed, killed ones restarted, every member
  serving), so that a test may kill, pause and compact freely.
- ``prefix``: a key prefix of the test's own; every key a test writes goes under it, so tests never see each other's
  keys. Compaction is cluster-wide: a test only ever watches or reads from revisions it made itself.
- ``client``: an ``EtcdClient`` over every member.
- ``network`` (session): three controller processes of one network on this worker's etcd, started on first use;
  ``net`` (per test) is the same network with the etcd healed and every controller running again.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from controller.etcd import EtcdClient
from tests.cluster.controllers import Network
from tests.cluster.etcd_cluster import ETCD, EtcdCluster


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    if shutil.which(ETCD) is None:
        pytest.fail("etcd is not installed: `make test` installs it (Debian's etcd-server 3.4)")
    cluster = EtcdCluster.start(tmp_path_factory.mktemp("etcd"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def etcd(etcd_cluster: EtcdCluster) -> EtcdCluster:
    await etcd_cluster.heal()
    return etcd_cluster


@pytest.fixture
def prefix() -> str:
    return f"/tests/{uuid.uuid4().hex}/"


@pytest.fixture
async def client(etcd: EtcdCluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(etcd.endpoints) as etcd_client:
        yield etcd_client


@pytest.fixture(scope="session")
def network(etcd_cluster: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    shared = Network(tmp_path_factory.mktemp("network"), etcd_cluster.endpoints)
    try:
        shared.start_sync()
        yield shared
    finally:
        shared.stop()


@pytest.fixture
async def net(etcd: EtcdCluster, network: Network) -> Network:
    await network.heal()
    return network
