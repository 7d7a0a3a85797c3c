"""How long a cluster node's writes may wait when etcd does not answer (``controller/cluster/write_bounds.py``): each
is answered 503 within its bound from its queueing, however many batches queue behind one another. On virtual time,
with the node's writer and commit step over a real replica and an etcd that receives every txn and answers none."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from controller.cluster.commit import ReplicatedCommit
from controller.cluster.freshness import Ride
from controller.cluster.keys import NetworkKeys
from controller.cluster.local_replica import LocalReplica
from controller.cluster.shipments import Limits
from controller.cluster.snapshot import Snapshot
from controller.cluster.write_bounds import (
    ANSWER_WITHIN,
    LAST_TRY,
    SHOW_GRACE,
    WRITE_DEADLINE,
    Bounds,
    batch_bounds,
)
from controller.data.group_commit import Writer
from controller.errors import ApiError
from controller.etcd import TxnResult
from storage.store import KindLayout, Store, WriteTxn

KEYS = NetworkKeys("/bounds/")


def test_a_batch_of_fresh_writes_gets_the_whole_deadline_and_its_grace() -> None:
    assert batch_bounds(10.0, 10.0, troubled=False) == Bounds(10.0 + WRITE_DEADLINE, 10.0 + ANSWER_WITHIN)
    assert batch_bounds(10.0, 10.0, troubled=True) == Bounds(10.0 + WRITE_DEADLINE, 10.0 + ANSWER_WITHIN)
    assert WRITE_DEADLINE + SHOW_GRACE == ANSWER_WITHIN and ANSWER_WITHIN + LAST_TRY < 5.0  # the API's bound


def test_a_batch_whose_oldest_write_waited_gets_what_is_left_of_its_time() -> None:
    assert batch_bounds(13.5, 11.0, troubled=True) == Bounds(11.0 + WRITE_DEADLINE, 11.0 + ANSWER_WITHIN)
    # Less than the last try left: the try, unless etcd was in trouble for the batch before.
    assert batch_bounds(14.4, 11.0, troubled=False) == Bounds(14.4 + LAST_TRY, 11.0 + ANSWER_WITHIN)
    assert batch_bounds(14.4, 11.0, troubled=True) is None
    assert batch_bounds(20.0, 11.0, troubled=True) is None


class Silent:
    """An etcd that receives every txn and answers none."""

    def __init__(self) -> None:
        self.txns = 0

    async def txn(self, *args: object) -> TxnResult:
        self.txns += 1
        await trio.sleep_forever()
        raise AssertionError("unreachable")


class Barrier:
    """No read waits on the writer here."""

    def ride(self) -> Ride | None:
        return None

    @contextmanager
    def writing(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def writer_over(tmp_path: Path, etcd: Silent, max_batch: int) -> AsyncIterator[tuple[Writer, LocalReplica]]:
    """A running writer whose commit step sends to ``etcd``, and the replica it commits to."""
    store = Store(tmp_path / "replica", [KindLayout("things")], durable=False)
    local = LocalReplica(store, KEYS, network="n", lane_key=KEYS.lane("a"))
    step = ReplicatedCommit(local, etcd, KEYS, node="a", limits=Limits(), barrier=Barrier())  # type: ignore[arg-type]
    running = Writer(store, in_thread=False, max_batch=max_batch, step=step)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(running.run)
            yield running, local
            nursery.cancel_scope.cancel()
    finally:
        store.close()


@asynccontextmanager
async def writer(tmp_path: Path, etcd: Silent, max_batch: int) -> AsyncIterator[Writer]:
    async with writer_over(tmp_path, etcd, max_batch) as (running, _):
        yield running


def put(name: str) -> Any:
    def mutation(txn: WriteTxn) -> None:
        txn.put("things", {"id": name})
    return mutation


class Answers:
    """When each write was answered, and what its 503 said of whether it was applied."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.applied: dict[str, str] = {}

    async def write(self, running: Writer, name: str, after: float) -> None:
        await trio.sleep(after)
        with pytest.raises(ApiError) as refused:
            await running.submit(put(name))
        assert refused.value.code == "CLUSTER_UNAVAILABLE" and refused.value.cause is not None
        self.at[name] = round(trio.current_time() - self.start, 9)  # the clock is exact; float sums are not
        self.applied[name] = refused.value.cause["data"]["applied"]

    start = 0.0


async def test_writes_queued_behind_a_batch_etcd_did_not_answer_are_answered_within_their_bound(
        tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    """``first`` is sent at 0 and cut off at the deadline; ``early`` and ``late``, queued meanwhile, are sent at once
    after, with what is left of ``early``'s time; ``last``, queued during that batch, gets a deadline of its own."""
    etcd, answers = Silent(), Answers()
    async with writer(tmp_path, etcd, max_batch=64) as running:
        answers.start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answers.write, running, "first", 0.0)
            nursery.start_soon(answers.write, running, "early", 0.5)
            nursery.start_soon(answers.write, running, "late", 1.0)
            nursery.start_soon(answers.write, running, "last", 3.7)
    assert answers.at == {"first": 3.5, "early": 4.0, "late": 4.0, "last": 7.2}
    assert set(answers.applied.values()) == {"unknown"}


async def test_batches_queued_during_an_outage_are_each_answered_within_the_bound(
        tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    """Batches of two: ``first`` goes alone and is cut off at 3.5; ``b0`` and ``b1`` have until 4.0, ``b2`` and
    ``b3``, queued as early, have no time left after a batch in trouble: answered at once, never sent."""
    etcd, answers = Silent(), Answers()
    async with writer(tmp_path, etcd, max_batch=2) as running:
        answers.start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answers.write, running, "first", 0.0)
            for n in range(4):
                nursery.start_soon(answers.write, running, f"b{n}", 0.5)
    assert answers.at == {"first": 3.5, "b0": 4.0, "b1": 4.0, "b2": 4.0, "b3": 4.0}
    assert sorted(answers.applied.values()) == ["no", "no", "unknown", "unknown", "unknown"]
    assert etcd.txns == 2  # one txn per batch sent (the deadline had passed for the fence that would settle it)


async def test_writes_nobody_waits_for_bound_no_batch(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    """Posted writes (the identity actors' own) have no caller to answer within the API's bound: a batch of them
    queued behind one etcd did not answer gets a whole deadline of its own, rather than what is left of theirs, or
    none."""
    etcd = Silent()
    done: dict[str, float] = {}
    async with writer(tmp_path, etcd, max_batch=64) as running:
        start = trio.current_time()

        def post(name: str) -> None:
            running.post(put(name), lambda outcome: done.__setitem__(name, round(trio.current_time() - start, 9)))

        post("first")
        await trio.sleep(0.5)
        post("queued")
        while len(done) < 2:  # noqa: ASYNC110  # the writer's own progress, on virtual time
            await trio.sleep(0.5)
    assert done == {"first": 3.5, "queued": 3.5 + WRITE_DEADLINE} and etcd.txns == 2


@pytest.mark.parametrize(("swap", "answered", "applied", "sent"), [(1.0, 3.5, "unknown", 1), (3.0, 4.0, "no", 0)])
async def test_a_write_waiting_for_a_rebuilt_replica_is_sent_only_with_time_left_after_the_swap(
        tmp_path: Path, autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch,
        swap: float, answered: float, applied: str, sent: int) -> None:
    """A write queued at 0 while a rebuild reads; the rebuilt replica is handed over at 1 and takes ``swap`` seconds
    to swap in before the write's batch runs. Swapped by its send deadline (3.5), the write is sent and cut off
    there; swapped after it, it is answered 503 ``no`` as the swap ends, never sent."""
    etcd, answers = Silent(), Answers()
    async with writer_over(tmp_path, etcd, max_batch=64) as (running, local):
        real_swap = local._swap_in

        async def slow_swap(snapshot: Snapshot) -> None:
            await trio.sleep(swap)
            await real_swap(snapshot)

        monkeypatch.setattr(local, "_swap_in", slow_swap)
        answers.start = trio.current_time()
        rebuilt = Snapshot(Store(tmp_path / "rebuilt", [KindLayout("things")], durable=False), revision=0, head=0)
        async with trio.open_nursery() as nursery, local.rebuilding() as hand_over:
            nursery.start_soon(answers.write, running, "queued", 0.0)
            await trio.sleep(1.0)
            hand_over(rebuilt)
        assert rebuilt.done.is_set()
    assert answers.at == {"queued": answered} and answers.applied == {"queued": applied} and etcd.txns == sent
