"""API sessions shared by the nodes of a cluster, on a virtual clock: two ``ApiSessions(shared=True)`` over one store
stand for two nodes (each hears every committed change, as a node hears every replicated one). A session used only
on one node is never ended early by the other, and ends within the grace after its last use anywhere."""

from __future__ import annotations

from pathlib import Path

import trio
from trio.testing import MockClock

from controller.authentication.api_sessions import KIND, SHARED_GRACE, ApiSessions
from controller.clock import Clock
from tests.support import make_settings, start_controller

EPOCH = 1_700_000_000.0
TIMEOUT = 120.0
GRACE = TIMEOUT * SHARED_GRACE


async def test_a_session_used_on_one_node_lives_on_every_node(tmp_path: Path, nursery: trio.Nursery,
                                                              autojump_clock: MockClock) -> None:
    controller = await start_controller(make_settings(tmp_path), nursery, Clock(wall_base=EPOCH))
    nodes = [ApiSessions(controller.domain, TIMEOUT, shared=True) for _ in range(2)]
    for node in nodes:
        controller.domain.subscribe(node.changes_committed, (KIND,))
        await nursery.start(node.run)
    here, there = nodes
    with controller.domain.read() as ctx:
        admin_id = str(ctx.txn.meta("defaultAdminId"))
    start = trio.current_time()
    row = await here.create(admin_id, "authenticator", "127.0.0.1", {})
    token = row["token"]
    assert there.lookup(token) is not None  # known on the other node at once
    # Used on the other node only, now and then: each use moved the activity past the grace, so it was stored.
    last_use = start
    for at in (40.0, 80.0, 120.0, 160.0):
        await trio.sleep_until(start + at)
        assert there.lookup(token) is not None
        last_use = trio.current_time()
        await trio.sleep(1)  # its write of the activity commits
    # The node that saw no use since the login holds it as live, well past a timeout after the login (looked at
    # without a use, which would extend it).
    await trio.sleep_until(last_use + TIMEOUT - 1)
    for node in nodes:
        session = node.get(row["id"])
        assert session is not None and session.deadline > trio.current_time()
    # It ends, everywhere, within the grace after the timeout from its last use (never before: checked above).
    await trio.sleep_until(last_use + TIMEOUT + GRACE + 1)
    assert here.get(row["id"]) is None and there.get(row["id"]) is None
    assert here.lookup(token) is None and there.lookup(token) is None
    with controller.domain.read() as ctx:
        assert ctx.txn.get(KIND, row["id"]) is None
