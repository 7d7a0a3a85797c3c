"""Following the event log on Trio's virtual clock: a follower passes each matching event once, in order, from the
store and then live; a nudge wakes it without losing a buffered event; a posture state write calls back the
identity's watchers only, and only while they watch."""

from __future__ import annotations

import trio
import trio.testing

from controller.insight import EventFilter, KeptEvent, latest_id
from controller.insight.follow import QUIET, EventFollower
from controller.runtime.composition import Controller
from tests.support import Api, make_user
from tests.web.test_client_posture import MAC_OK


async def test_a_follower_passes_each_event_once_and_a_nudge_loses_none(admin: Api, controller: Controller,
                                                                        autojump_clock: trio.testing.MockClock
                                                                        ) -> None:
    await admin.create("/services", {"name": "before", "encryptionRequired": True})
    with controller.store.read() as txn:
        start = latest_id(txn)
    with controller.events_hub.subscribe() as subscription:
        follower = EventFollower(controller.store, subscription, EventFilter(types=("entityChange",)), start - 1)
        [caught] = follower.catch_up()
        assert isinstance(caught, KeptEvent) and caught.id == start and caught.fields["entityType"] == "services"

        arrival = QUIET
        with trio.move_on_after(5):
            arrival = await follower.next()
        assert arrival.timed_out

        subscription.nudge()
        await admin.create("/services", {"name": "after", "encryptionRequired": True})
        first = await follower.next()  # the events were buffered before the reader woke: they come first
        kinds = {item.fields["entityType"] for item in first.items if isinstance(item, KeptEvent)}
        assert kinds == {"services"} and not first.nudged and follower.last > start
        second = await follower.next()
        assert second.nudged and not second.items
        with trio.move_on_after(5):
            arrival = await follower.next()
        assert arrival is QUIET  # nothing more: the nudge is taken once


async def test_posture_writes_call_back_the_identitys_watchers_while_they_watch(admin: Api,
                                                                               controller: Controller) -> None:
    identity_id, user = await make_user(admin, "watched")
    other_id, other = await make_user(admin, "other")
    calls: list[str] = []
    with controller.engine.watchers.watch(identity_id, lambda: calls.append(identity_id)):
        assert (await other.as_client().post("/posture-response", MAC_OK)).status == 201
        assert calls == []
        assert (await user.as_client().post("/posture-response", MAC_OK)).status == 201
        assert calls == [identity_id]  # durable before the report was answered, and called back then
    assert (await user.as_client().post("/posture-response", MAC_OK)).status == 201
    assert calls == [identity_id]
    assert other_id != identity_id


async def test_a_watch_that_ends_leaves_the_other_identities_watched(admin: Api, controller: Controller) -> None:
    first_id, first = await make_user(admin, "first")
    second_id, second = await make_user(admin, "second")
    calls: list[str] = []
    watchers = controller.engine.watchers
    assert not watchers.watching
    with watchers.watch(second_id, lambda: calls.append(second_id)):
        with watchers.watch(first_id, lambda: calls.append(first_id)):
            assert watchers.watching
        assert watchers.watching  # the second identity is still watched
        assert (await first.as_client().post("/posture-response", MAC_OK)).status == 201
        assert (await second.as_client().post("/posture-response", MAC_OK)).status == 201
        assert calls == [second_id]
    assert not watchers.watching
    assert (await second.as_client().post("/posture-response", MAC_OK)).status == 201
    assert calls == [second_id]
