"""A change that more identities re-check than the engine sends at once (``RECHECK_CHUNK``) is answered once every
one of them has re-checked, durably, on Trio's virtual clock: the re-checks go out a chunk at a time, behind the
restart's own re-check of every identity, and the write waits for all of them."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from bench.identity_seeding import ensure_network, seed_mfa_identities
from controller.clock import Clock
from controller.data.write_path import delete_row
from controller.model.spec import WriteContext
from controller.posture.rechecks import RECHECK_CHUNK
from controller.runtime.composition import Controller
from tests.support import make_settings, start_controller

T0 = 1_000.0
IDENTITIES = 2 * RECHECK_CHUNK + 88
ROLE, TIMEOUT = "many", 3_600


def _with_sessions(controller: Controller, ids: list[str]) -> list[str]:
    with controller.store.read() as txn:
        return [identity for identity in ids if txn.ids_by_ref("sessions", "identityId", identity)]


async def test_a_policy_deleted_is_answered_once_every_identity_has_lost_its_sessions(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    settings = make_settings(tmp_path)
    async with trio.open_nursery() as nursery:
        controller = await start_controller(settings, nursery, clock=Clock(wall_base=T0))
        ids = await seed_mfa_identities(controller, IDENTITIES, deadlines_per_second=10, start_in=600,
                                        timeout_seconds=TIMEOUT, role=ROLE)
        nursery.cancel_scope.cancel()
    controller.close()
    # Opened again, the controller knows every seeded API session: each identity is live and re-checks.
    async with trio.open_nursery() as nursery:
        controller = await start_controller(settings, nursery, clock=Clock(wall_base=T0))
        await controller.engine.adoptions_rechecked()  # what revokes below is the policy's deletion
        assert _with_sessions(controller, ids) == ids
        policy = (await ensure_network(controller, role=ROLE, timeout_seconds=TIMEOUT)).policy_id
        resource = controller.registry["service-policies"]

        def delete(ctx: WriteContext) -> None:
            delete_row(ctx, resource, policy)

        await controller.domain.write(delete)
        assert _with_sessions(controller, ids) == []
        nursery.cancel_scope.cancel()
    controller.close()
