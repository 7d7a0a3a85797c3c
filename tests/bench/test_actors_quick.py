"""Smoke test of the ``actors`` benchmark (T3-T5): the quick run completes and writes the documented JSON shape.

Figures from a quick run mean nothing, so no target is asserted to be met; only that every target was measured,
and that the run did what it claims (every measured deadline decided and revoking its session, every restored
deadline re-armed). The bulk seeder the scenario stands on is checked against the write path it imitates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from bench.__main__ import main
from bench.actors_bench import QUICK
from bench.identity_seeding import ensure_network, seed_mfa_identities
from controller.runtime.composition import Controller
from tests.bench.quick_result import check_targets, finite

TARGETS = {"T3.decision_p99", "T3.decision_max", "T3.durable_p99", "T3.cpu", "T3.events", "T4.p99", "T4.cpu",
           "T4.memory", "T5.restore"}


def test_quick_run_writes_every_target(tmp_path: Path) -> None:
    path = tmp_path / "actors.json"
    assert main(["actors", "--quick", "--json", str(path)]) == 0
    result = json.loads(path.read_text())

    check_targets(result, "actors", TARGETS)

    rounds = result["rounds"]
    sides = {(r["part"], r["side"]) for r in rounds}
    assert {("T3", "subject"), ("T3", "baseline"), ("T3", "quiet"), ("T4", "subject"), ("T4", "memory"),
            ("T5", "subject"), ("T5", "baseline")} <= sides
    for part, count in (("T3", QUICK.rounds), ("T4", QUICK.t4_blocks), ("T5", QUICK.rounds)):
        assert len([r for r in rounds if r["part"] == part and r["side"] == "subject"]) == count, part
    for r in rounds:
        if r["side"] in ("subject", "quiet") and r["part"] in ("T3", "T4"):
            # Every measured deadline was decided and revoked exactly its identity's one Dial session.
            assert r["undecided"] == 0 and r["revoked"] == r["deadlines"], r
        if r["side"] == "subject" and r["part"] == "T5":
            assert r["armed"] == QUICK.t5_count, r
    assert all(finite(row["subject"]) for row in result["table"]), result["table"]


async def test_seeded_identities_are_what_the_write_path_makes(controller: Controller,
                                                               autojump_clock: trio.testing.MockClock) -> None:
    start = controller.clock.now()
    ids = await seed_mfa_identities(controller, 5, deadlines_per_second=2, start_in=60, timeout_seconds=600, role="r")
    network = await ensure_network(controller, role="r", timeout_seconds=600)
    with controller.store.read() as txn:
        first, copy = txn.get("identities", ids[0]), txn.get("identities", ids[3])
        assert first is not None and copy is not None
        assert set(copy) == set(first) and copy["roleAttributes"] == ["r"] and copy["authPolicyId"] == "default"
        assert txn.by_unique("identities", "name", copy["name"]) == ids[3]
        assert set(ids) <= set(txn.ids_by_set("identities", "roleAttributes", "r"))
        assert set(ids) <= set(txn.ids_by_ref("identities", "authPolicyId", "default"))
        [api_session] = txn.ids_by_ref("api-sessions", "identityId", ids[3])
        [session] = txn.ids_by_ref("sessions", "identityId", ids[3])
        assert txn.ids_by_ref("sessions", "apiSessionId", api_session) == [session]
        assert len(txn.ids_by_ref("sessions", "serviceId", network.service_id)) == 5
        for kind, row_id in (("api-sessions", api_session), ("sessions", session)):
            made = txn.get(kind, txn.ids_by_ref(kind, "identityId", ids[0])[0])
            assert made is not None and set(txn.get(kind, row_id) or {}) == set(made), kind
    state = await controller.engine.state(ids[3])
    assert state.sessions[api_session].mfa.passed_mfa_at == start + 60 + 1.5 - 600
    assert state.deadline == start + 60 + 1.5
    # The network grants a session as the Client API would: remove the seeded one and ask for it again.
    await controller.domain.delete("sessions", session)
    granted = await controller.engine.request_session(ids[3], api_session, network.service_id, "Dial", {})
    assert granted["identityId"] == ids[3] and granted["servicePolicies"] == [network.policy_id]
    # A second seeding with the same role reuses the network; another timeout for it is refused.
    assert await seed_mfa_identities(controller, 1, deadlines_per_second=1, start_in=60, timeout_seconds=600, role="r")
    with pytest.raises(ValueError, match="timeoutSeconds"):
        await ensure_network(controller, role="r", timeout_seconds=601)
