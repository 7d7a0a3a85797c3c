"""Domain writes and what follows them: listeners told of every committed write, and identity actors whose identity
was deleted."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from controller.errors import ApiError
from controller.model.spec import Change, WriteContext
from controller.posture.engine import STATE_KIND
from controller.runtime.composition import Controller


async def test_listeners_hear_of_a_committed_write_whose_caller_was_cancelled(controller: Controller) -> None:
    heard: list[tuple[str, str]] = []
    controller.domain.subscribe(lambda changes: heard.extend((c.kind, c.id) for c in changes))
    create = controller.domain.validated_create("identities", {"name": "late", "type": "User", "isAdmin": False})
    scope = trio.CancelScope()

    def cancel_then_create(ctx: WriteContext) -> dict[str, Any]:
        scope.cancel()  # the caller (a request whose client went away) gives up while its write is in the batch
        return create(ctx)

    with scope:
        await controller.domain.write(cancel_then_create)
    assert scope.cancelled_caught
    with controller.store.read() as txn:
        [created] = [row for row in txn.scan("identities") if row["name"] == "late"]
    assert heard == [("identities", created["id"])]


async def test_a_barrier_is_awaited_by_the_caller_only(controller: Controller) -> None:
    order: list[str] = []

    async def barrier() -> None:
        order.append("barrier")

    def listener(changes: list[Change]) -> Any:
        order.append("listener")
        return barrier

    controller.domain.subscribe(listener)
    await controller.domain.create("identities", {"name": "waits", "type": "User", "isAdmin": False})
    order.append("answered")
    assert order == ["listener", "barrier", "answered"]


async def test_an_actor_whose_identity_was_deleted_answers_and_drops_its_state(controller: Controller) -> None:
    identity = await controller.domain.create("identities", {"name": "short-lived", "type": "User",
                                                             "isAdmin": False})
    identity_id = str(identity["id"])
    engine = controller.engine
    await engine.mfa_passed(identity_id, "api-1")
    with controller.store.read() as txn:
        assert txn.exists(STATE_KIND, identity_id)

    await controller.domain.delete("identities", identity_id)
    with pytest.raises(ApiError) as refused:
        await engine.request_session(identity_id, "api-1", "svc", "Dial", {})
    assert refused.value.code == "UNAUTHORIZED"
    with pytest.raises(ApiError) as missing:
        await engine.state(identity_id)
    assert missing.value.code == "NOT_FOUND"
    assert await engine.report_posture(identity_id, "api-1", (), woken=True) == []
    await engine.settle(identity_id)  # the state is dropped by a write of its own
    with controller.store.read() as txn:
        assert not txn.exists(STATE_KIND, identity_id)


async def test_a_create_never_takes_an_id_in_use(controller: Controller, monkeypatch: pytest.MonkeyPatch) -> None:
    first = await controller.domain.create("identities", {"name": "first", "type": "User", "isAdmin": False})
    # Ids made elsewhere (another process, or before the clock was set back) may be ahead of this sequence.
    offered = iter([str(first["id"]), "0000000001"])
    monkeypatch.setattr("controller.data.write_path.new_id", lambda now: next(offered))
    second = await controller.domain.create("identities", {"name": "second", "type": "User", "isAdmin": False})
    assert second["id"] == "0000000001"
    assert controller.domain.detail("identities", str(first["id"]))["name"] == "first"
