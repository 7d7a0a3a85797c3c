"""The posture engine reports when each MFA deadline was decided and when its revocation became durable.

On Trio's virtual clock (commits on the Trio thread, a wall clock starting at 1000 s so that the arithmetic is
exact), a decision taken at its deadline is reported exactly on time, and one taken late exactly that late.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from actors.lateness import DeadlineOutcome
from bench.identity_seeding import seed_mfa_identities, wake_all
from controller.clock import Clock
from controller.runtime.composition import Controller
from tests.support import make_settings, start_controller

T0 = 1_000.0


def _sessions_of(controller: Controller, identity_id: str) -> list[str]:
    with controller.store.read() as txn:
        return txn.ids_by_ref("sessions", "identityId", identity_id)


async def test_deadlines_are_reported_decided_and_durable_on_time(tmp_path: Path,
                                                                   autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start_controller(make_settings(tmp_path), nursery, clock=Clock(wall_base=T0))
        start = controller.clock.now()
        ids = await seed_mfa_identities(controller, 3, deadlines_per_second=2, start_in=10, timeout_seconds=600)
        seen: list[DeadlineOutcome] = []
        controller.engine.lateness.add_observer(seen.append)
        await wake_all(controller, ids)
        assert seen == [] and all(_sessions_of(controller, i) for i in ids)

        await trio.sleep_until(controller.clock.to_trio(start + 20))
        await trio.testing.wait_all_tasks_blocked()
        deadlines = [start + 10, start + 10.5, start + 11]
        assert seen == [DeadlineOutcome(i, d, d, d, 1) for i, d in zip(ids, deadlines, strict=True)]
        assert not any(_sessions_of(controller, i) for i in ids)
        stats = controller.engine.lateness.statistics()
        assert stats["deadlines"] == 3 and stats["revoked"] == 3
        assert stats["decision_max_ms"] == 0.0 and stats["durable_max_ms"] == 0.0
        nursery.cancel_scope.cancel()
    controller.close()


async def test_a_deadline_passed_while_unarmed_is_reported_as_late_as_it_was(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start_controller(make_settings(tmp_path), nursery, clock=Clock(wall_base=T0))
        start = controller.clock.now()
        [identity] = await seed_mfa_identities(controller, 1, deadlines_per_second=1, start_in=10, timeout_seconds=600)
        seen: list[DeadlineOutcome] = []
        controller.engine.lateness.add_observer(seen.append)
        # Seeded into a running engine, the deadline is not armed until the actor wakes, 5 s after it passed.
        await trio.sleep_until(controller.clock.to_trio(start + 15))
        assert _sessions_of(controller, identity)
        await wake_all(controller, [identity])
        await trio.testing.wait_all_tasks_blocked()
        assert seen == [DeadlineOutcome(identity, start + 10, start + 15, start + 15, 1)]
        assert seen[0].decision_lateness == 5.0
        assert not _sessions_of(controller, identity)
        assert controller.engine.lateness.statistics()["decision_max_ms"] == 5_000.0
        nursery.cancel_scope.cancel()
    controller.close()
