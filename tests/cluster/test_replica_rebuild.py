"""A replica rebuilt while the node serves (``controller/cluster/replica.py``, ``local_replica.py``): a write this
node makes while the rebuilt replica is read waits for the swap, so it is never served as absent, nor told to the
feed's listeners as deleted, in between. A cluster node in this process on the worker's etcd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from controller.cluster import AppliedWrite, replica
from controller.cluster.snapshot import Snapshot
from controller.etcd import Compacted
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import create_service, local_of, node


class Refusing:
    """A watch whose creation meets a compacted history."""

    async def __aenter__(self) -> None:
        raise Compacted("the watch's history was compacted (test)")

    async def __aexit__(self, *args: object) -> None:
        return None


async def test_a_write_made_while_the_replica_is_rebuilt_waits_for_the_swap(
        etcd: EtcdCluster, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with node(etcd, prefix, tmp_path, "a") as a:
        assert a.cluster is not None and a.cluster.replica is not None
        local, service = local_of(a), a.cluster.replica
        before = await create_service(a)
        read, release = trio.Event(), trio.Event()
        real_load = replica.load_snapshot

        async def load_then_hold(*args: Any, **kwargs: Any) -> Snapshot:
            snapshot = await real_load(*args, **kwargs)
            read.set()
            await release.wait()
            return snapshot

        monkeypatch.setattr(replica, "load_snapshot", load_then_hold)
        published: list[AppliedWrite] = []
        local.subscribe(published.append)
        client = a.cluster.etcd
        real_watch = client.watch

        def compacted_once(*args: Any, **kwargs: Any) -> Any:
            client.watch = real_watch  # type: ignore[method-assign]
            return Refusing()

        client.watch = compacted_once  # type: ignore[method-assign]
        rebuilds = service.rebuilds
        service.kick()
        made: list[dict[str, Any]] = []
        with trio.fail_after(20):
            await read.wait()  # the rebuilt replica is read, at a revision before the write below
            async with trio.open_nursery() as nursery:
                async def write() -> None:
                    made.append(await create_service(a))

                nursery.start_soon(write)
                with trio.move_on_after(1.0):
                    while not made:  # noqa: ASYNC110  # the write's own progress: it must not come
                        await trio.sleep(0.05)
                assert not made  # it waits for the swap
                swapped_at = len(published)
                release.set()
            while service.rebuilds == rebuilds:  # noqa: ASYNC110  # the service's own progress
                await trio.sleep(0.05)
        during = made[0]["id"]
        with a.domain.read() as ctx:
            assert {row["id"] for row in ctx.txn.scan("services")} >= {before["id"], during}
        deleted = [write for write in published[swapped_at:] if write.rows.get(("services", during), b"") is None]
        assert deleted == []
        assert any(("services", during) in write.rows for write in published[swapped_at:])
