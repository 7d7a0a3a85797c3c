"""How a cluster node answers writes when etcd fails them in ways other than a conflict (``controller/cluster/
commit.py``, ``head_txns.py``): a txn cut off by its deadline is unknown, not refused; a refusal (etcd out of space)
answers 503 and the writer goes on; an answer this node cannot read is settled by looking, and a settling etcd
refuses answers 503 unknown; the writes committed before a batch broke off are answered as written; a condition etcd
fails and this node misjudges fails at once."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from controller.cluster import write_bounds
from controller.cluster.head_txns import send_guarded
from controller.cluster.keys import HeadValue, NetworkKeys
from controller.cluster.shipments import condition_holds
from controller.data.commit_step import ConditionFailed
from controller.errors import ApiError
from controller.etcd import (
    Compare,
    CompareOp,
    CompareTarget,
    EtcdClient,
    NoSpace,
    Op,
    OutcomeUnknown,
    ProtocolError,
    Put,
    TxnResult,
    Unavailable,
)
from controller.runtime.composition import Controller
from tests.cluster.etcd_cluster import EtcdCluster
from tests.cluster.in_process import HeldWatch, node

KEYS = NetworkKeys("/t/")


class Silent:
    """An etcd client whose txns are sent and never answered."""

    async def txn(self, *args: object) -> TxnResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


class Refusing:
    """An etcd client whose txns are refused, not applied (no leader)."""

    async def txn(self, *args: object) -> TxnResult:
        raise Unavailable("no leader")


async def test_a_txn_its_deadline_cuts_off_is_unknown_and_one_etcd_refused_is_not_applied() -> None:
    deadline = trio.current_time() + 0.2
    with pytest.raises(OutcomeUnknown):
        await send_guarded(Silent(), KEYS, KEYS.head, [], 0, HeadValue("w", "n"), [], deadline)  # type: ignore[arg-type]
    deadline = trio.current_time() + 0.2
    with pytest.raises(Unavailable) as refused:
        await send_guarded(Refusing(), KEYS, KEYS.head, [], 0, HeadValue("w", "n"), [], deadline)  # type: ignore[arg-type]
    assert not isinstance(refused.value, OutcomeUnknown)


def client_of(controller: Controller) -> EtcdClient:
    assert controller.cluster is not None
    return controller.cluster.etcd


def creates_services(success: Sequence[Op]) -> bool:
    return any(isinstance(op, Put) and isinstance(op.key, bytes) and b"/d/r/services/" in op.key for op in success)


async def create(controller: Controller, name: str) -> dict[str, Any]:
    write = controller.domain.validated_create("services", {"name": name, "encryptionRequired": True})
    row: dict[str, Any] = await controller.domain.write(write)
    return row


def names(controller: Controller) -> set[str]:
    with controller.domain.read() as ctx:
        return {row["name"] for row in ctx.txn.scan("services")}


async def test_a_write_etcd_refuses_answers_503_and_the_writer_goes_on(etcd: EtcdCluster, prefix: str,
                                                                       tmp_path: Path) -> None:
    async with node(etcd, prefix, tmp_path, "a") as a:
        real = client_of(a).txn
        refused: list[int] = []

        async def out_of_space(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                               failure: Sequence[Op] = ()) -> TxnResult:
            if not refused and creates_services(success):
                refused.append(1)
                raise NoSpace("etcdserver: mvcc: database space exceeded")
            return await real(compare, success, failure)

        client_of(a).txn = out_of_space  # type: ignore[method-assign]
        with trio.fail_after(10), pytest.raises(ApiError) as error:
            await create(a, "first")
        assert error.value.code == "CLUSTER_UNAVAILABLE" and error.value.status == 503
        assert error.value.cause is not None and error.value.cause["data"] == {"applied": "no"}
        with trio.fail_after(10):
            await create(a, "second")
        assert "second" in names(a) and "first" not in names(a)


def fences(success: Sequence[Op]) -> bool:
    """Whether a txn is a fence: it puts one head and nothing else (``head_txns.fence``)."""
    return len(success) == 1 and isinstance(success[0], Put) and isinstance(success[0].key, bytes) and (
        success[0].key.endswith(b"/d/head") or b"/d/lane/" in success[0].key)


async def test_a_write_whose_answer_this_node_cannot_read_is_settled_by_looking(etcd: EtcdCluster, prefix: str,
                                                                                tmp_path: Path) -> None:
    """etcd commits the create and its answer cannot be read: the write may have committed, so it is not refused;
    the fence finds that it did, and the create is answered as written."""
    async with node(etcd, prefix, tmp_path, "a") as a:
        real = client_of(a).txn
        garbled: list[int] = []

        async def unreadable(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                             failure: Sequence[Op] = ()) -> TxnResult:
            result = await real(compare, success, failure)
            if not garbled and creates_services(success):
                garbled.append(1)
                raise ProtocolError("etcd's answer could not be read (test)")
            return result

        client_of(a).txn = unreadable  # type: ignore[method-assign]
        with trio.fail_after(10):
            row = await create(a, "kept")
        assert garbled == [1] and row["name"] == "kept" and "kept" in names(a)


async def test_a_lost_write_etcd_refuses_to_settle_answers_503_unknown_and_the_writer_goes_on(
        etcd: EtcdCluster, prefix: str, tmp_path: Path) -> None:
    """The create's txn is lost on its way (not sent), and etcd refuses the fence that would settle it (out of
    space): whether it committed is not known, so 503 ``unknown``, and the next write goes through."""
    async with node(etcd, prefix, tmp_path, "a") as a:
        real = client_of(a).txn
        lost: list[str] = []

        async def out_of_space(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                               failure: Sequence[Op] = ()) -> TxnResult:
            if not lost and creates_services(success):
                lost.append("write")
                raise OutcomeUnknown("the connection broke (test)")
            if lost == ["write"] and fences(success):
                lost.append("fence")
                raise NoSpace("etcdserver: mvcc: database space exceeded")
            return await real(compare, success, failure)

        client_of(a).txn = out_of_space  # type: ignore[method-assign]
        with trio.fail_after(10), pytest.raises(ApiError) as error:
            await create(a, "first")
        assert lost == ["write", "fence"]
        assert error.value.code == "CLUSTER_UNAVAILABLE" and error.value.status == 503
        assert error.value.cause is not None and error.value.cause["data"] == {"applied": "unknown"}
        with trio.fail_after(10):
            await create(a, "second")
        assert "second" in names(a) and "first" not in names(a)


async def test_writes_committed_before_a_batch_broke_off_are_answered_as_written(
        etcd: EtcdCluster, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 8 operations per txn, 30 creates at once go in several txns; after the first, etcd refuses the rest until
    the batch's deadline, and the node's watch stays silent past it. The creates of the first txn are in etcd:
    answered 503 saying so (``applied: yes``), the others 503 ``applied: no``; once the watch speaks, the node
    holds exactly the first."""
    monkeypatch.setattr(write_bounds, "WRITE_DEADLINE", 1.0)
    monkeypatch.setattr(write_bounds, "SHOW_GRACE", 0.3)
    async with node(etcd, prefix, tmp_path, "b") as b, node(etcd, prefix, tmp_path, "a", etcd_max_txn_ops=8) as a:
        real = client_of(a).txn
        committed: list[int] = []

        async def breaking(compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                           failure: Sequence[Op] = ()) -> TxnResult:
            if creates_services(success):
                if committed:
                    raise Unavailable("no leader")
                committed.append(1)
            return await real(compare, success, failure)

        client_of(a).txn = breaking  # type: ignore[method-assign]
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
        watch = HeldWatch(a)
        applied: dict[str, str] = {}
        batch = [f"svc-{uuid.uuid4().hex[:10]}" for _ in range(30)]

        async def one(name: str) -> None:
            try:
                await create(a, name)
                applied[name] = "answered"
            except ApiError as error:
                assert error.code == "CLUSTER_UNAVAILABLE" and error.cause is not None
                applied[name] = error.cause["data"]["applied"]

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for name in batch:
                    nursery.start_soon(one, name)
        watch.release()
        client_of(a).txn = real  # type: ignore[method-assign]
        with trio.fail_after(10):
            await a.freshness.wait_fresh()
            await b.freshness.wait_fresh()
        written = {name for name, said in applied.items() if said == "yes"}
        assert committed == [1] and written and set(applied.values()) == {"yes", "no"}, applied
        assert names(a) & set(batch) == names(b) & set(batch) == written


async def test_a_condition_etcd_fails_and_this_node_misjudges_fails_at_once(etcd: EtcdCluster, prefix: str,
                                                                            tmp_path: Path) -> None:
    """A compare of the value of a key that does not exist: etcd fails it whatever the operand. The write fails
    with ConditionFailed at once, rather than running again until its deadline and answering 503."""
    missing = f"{prefix}claims/absent".encode()
    empty_value = Compare(missing, CompareTarget.VALUE, CompareOp.EQUAL, b"")
    assert not condition_holds(empty_value, None)
    async with node(etcd, prefix, tmp_path, "a") as a:
        write = a.domain.validated_create("services", {"name": "guarded", "encryptionRequired": True})
        with trio.fail_after(write_bounds.WRITE_DEADLINE / 2), pytest.raises(ConditionFailed):
            await a.domain.write(write, conditions=[empty_value])
        assert "guarded" not in names(a)
