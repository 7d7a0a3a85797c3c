"""Cluster nodes in the test's own process, on the worker's etcd: starting one, writing through it, and keeping its
replica from hearing of what etcd sends for as long as a test needs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from controller.cluster import LocalReplica
from controller.etcd import Compare
from controller.runtime.composition import Controller
from tests.cluster.etcd_cluster import EtcdCluster
from tests.support import make_settings, serving

__all__ = ["HeldWatch", "create_service", "local_of", "node", "served_node"]


@asynccontextmanager
async def node(etcd: EtcdCluster, prefix: str, directory: Path, name: str,
               **overrides: Any) -> AsyncIterator[Controller]:
    """A cluster node named ``name`` of the network under ``prefix``, serving on a free port (lease TTL 2 s)."""
    async with served_node(etcd, prefix, directory, name, **overrides) as (controller, _http):
        yield controller


@asynccontextmanager
async def served_node(etcd: EtcdCluster, prefix: str, directory: Path, name: str,
                      **overrides: Any) -> AsyncIterator[tuple[Controller, httpx.AsyncClient]]:
    """:func:`node`, and a client of its API."""
    settings = make_settings(directory / name, port=0, etcd=tuple(etcd.endpoints), etcd_prefix=prefix,
                             node_name=name, lease_ttl=2, **overrides)
    async with serving(settings) as (controller, urls), \
            httpx.AsyncClient(base_url=urls[0], verify=False, timeout=30) as http:
        yield controller, http


async def create_service(controller: Controller, conditions: Sequence[Compare] = ()) -> dict[str, Any]:
    """Create a service of a fresh name through ``controller``, under ``conditions``: the stored row."""
    write = controller.domain.validated_create("services", {"name": f"svc-{uuid.uuid4().hex[:10]}",
                                                            "encryptionRequired": True})
    row: dict[str, Any] = await controller.domain.write(write, conditions=conditions)
    return row


def local_of(controller: Controller) -> LocalReplica:
    """The node's replica."""
    assert controller.cluster is not None and controller.cluster.local is not None
    return controller.cluster.local


class HeldWatch:
    """From its creation, the updates of ``controller``'s replica watch are kept here, not applied, until
    :meth:`release` hands them over (``drop``: they are thrown away, and so is everything after)."""

    def __init__(self, controller: Controller, *, drop: bool = False) -> None:
        self._local = local_of(controller)
        self._hand_over = self._local.enqueue
        self.held: list[Any] = []
        self._local.enqueue = (lambda update: None) if drop else self.held.append  # type: ignore[method-assign]

    def release(self) -> None:
        self._local.enqueue = self._hand_over  # type: ignore[method-assign]
        for update in self.held:
            self._hand_over(update)
