"""The ownership watchdog (``controller/cluster/ownership.py``) on virtual time, over a membership whose lease the
test holds: it stops acting before the lease could expire, and waits out a lapsed lease, however long etcd takes to
grant another, without going round."""

from __future__ import annotations

from collections.abc import Callable

import trio

from controller.cluster.keys import NetworkKeys
from controller.cluster.ownership import MARGIN, ShardOwnership

KEYS = NetworkKeys("/watchdog/")


class Keeper:
    """A lease valid until ``valid_until`` that is never renewed."""

    lease_id = 1

    def __init__(self, valid_until: float) -> None:
        self.valid_until = valid_until
        self.renewed = trio.lowlevel.ParkingLot()

    def remaining(self, now: float) -> float:
        return self.valid_until - now


class Members:
    """The membership as the watchdog sees it: the current lease, and who hears of its replacement."""

    def __init__(self, keeper: Keeper) -> None:
        self.keeper = keeper
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def replace(self, keeper: Keeper) -> None:
        self.keeper = keeper
        for listener in self._listeners:
            listener()


async def test_a_lapsed_lease_is_waited_out_until_another_is_granted(autojump_clock: trio.abc.Clock) -> None:
    start = trio.current_time()
    members = Members(Keeper(valid_until=start + 2.0))
    ownership = ShardOwnership(None, KEYS, members, None)  # type: ignore[arg-type]  # the watchdog alone runs
    lapses: list[float] = []
    real_mark = ownership._rerun.mark

    def mark() -> None:  # the watchdog's mark when a lease ran out
        lapses.append(trio.current_time() - start)
        assert len(lapses) <= 3, "the watchdog goes round while the lease is lapsed"
        real_mark()

    ownership._rerun.mark = mark  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ownership._watchdog)
        await trio.sleep(5.0)  # etcd grants no other lease for 3 s after the first ran out
        assert lapses == [2.0]
        members.replace(Keeper(valid_until=trio.current_time() + 3.0))
        await trio.sleep(5.0)
        assert lapses == [2.0, 8.0] and MARGIN < 2.0
        nursery.cancel_scope.cancel()
