"""The internal channel's ``Outbox`` (``controller/cluster/channel.py``) on Trio's scheduler alone: which frames go in
which message."""

from __future__ import annotations

import msgspec
import trio
import trio.testing

from controller.cluster.channel_messages import CallFrame, Outbox


def frame(n: int) -> CallFrame:
    return CallFrame(n, "sig", b"body%d" % n)


class Writes:
    """Records each message's frame ids (sorted unless ``in_order``: Trio runs a turn's tasks in an order of its
    own); a write waits while ``held`` is set."""

    def __init__(self, *, in_order: bool = False) -> None:
        self.messages: list[list[int]] = []
        self.held: trio.Event | None = None
        self.writing = trio.Event()
        self._in_order = in_order

    async def __call__(self, message: bytes) -> bool:
        ids = [f.id for f in msgspec.msgpack.decode(message, type=list[CallFrame])]
        self.messages.append(ids if self._in_order else sorted(ids))
        self.writing.set()
        if self.held is not None:
            await self.held.wait()
        return True


async def test_frames_put_in_one_turn_go_in_one_message_and_those_put_during_a_write_in_the_next() -> None:
    writes = Writes()
    outbox = Outbox[CallFrame](writes)
    writes.held = release = trio.Event()
    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(outbox.put, frame(n))
        await writes.writing.wait()
        for n in range(3, 5):
            nursery.start_soon(outbox.put, frame(n))
        await trio.testing.wait_all_tasks_blocked()
        assert writes.messages == [[0, 1, 2]]
        release.set()
    assert writes.messages == [[0, 1, 2], [3, 4]]


async def test_a_frame_given_up_before_a_message_took_it_is_never_written() -> None:
    writes = Writes()
    outbox = Outbox[CallFrame](writes)
    writes.held = release = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.put, frame(0))
        await writes.writing.wait()
        nursery.start_soon(outbox.put, frame(1))  # waits for the lock, its frame waiting
        gave_up = trio.CancelScope()

        async def put_then_give_up() -> None:
            with gave_up:
                await outbox.put(frame(2))

        nursery.start_soon(put_then_give_up)
        await trio.testing.wait_all_tasks_blocked()
        gave_up.cancel()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert writes.messages == [[0], [1]]


async def test_a_message_taken_is_written_whole_though_its_writer_is_cancelled() -> None:
    """The task writing a message is cancelled (its call moved, or its deadline came) while the message is half out:
    the write goes on to its end, so the link is not left with half a message."""
    finished: list[int] = []
    release = trio.Event()

    async def write(message: bytes) -> bool:
        await release.wait()  # half out
        finished.append(len(msgspec.msgpack.decode(message, type=list[CallFrame])))
        return True

    outbox = Outbox[CallFrame](write)
    cancelled = trio.CancelScope()

    async def put_then_cancelled() -> None:
        with cancelled:
            await outbox.put(frame(0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(put_then_cancelled)
        await trio.testing.wait_all_tasks_blocked()
        cancelled.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert finished == []
        release.set()
    assert finished == [1]


async def test_a_message_holds_at_most_its_bytes_and_the_frames_go_in_order() -> None:
    """Frames waiting together beyond ``max_bytes`` go in several messages, in the order they were put; a frame
    larger than that goes alone."""
    writes = Writes(in_order=True)
    writes.held = release = trio.Event()  # the first message holds the others back: they wait together
    outbox = Outbox[CallFrame](writes, max_bytes=3 * (1000 + 256))
    sizes = [10, 1000, 1000, 1000, 1000, 5000, 10]

    async def put(n: int) -> None:
        await outbox.put(CallFrame(n, "sig", b"x" * sizes[n]))

    async with trio.open_nursery() as nursery:
        for n in range(len(sizes)):
            nursery.start_soon(put, n)
            await trio.testing.wait_all_tasks_blocked()  # put in this order
        release.set()
    assert writes.messages == [[0], [1, 2, 3], [4], [5], [6]]


async def test_each_frame_learns_whether_its_message_was_written_whole() -> None:
    """A message written whole: every frame in it says so; one cut short (the link broke): none of them does, and
    the next message's frames are told of theirs."""
    results: dict[int, bool] = {}
    whole = [False, True]
    release = trio.Event()

    async def write(message: bytes) -> bool:
        await release.wait()
        return whole.pop(0)

    outbox = Outbox[CallFrame](write)

    async def put(n: int) -> None:
        results[n] = await outbox.put(frame(n))

    async with trio.open_nursery() as nursery:
        for n in range(2):
            nursery.start_soon(put, n)
        await trio.testing.wait_all_tasks_blocked()  # 0 and 1 in the first message, which is being written
        nursery.start_soon(put, 2)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert results == {0: False, 1: False, 2: True}


async def test_frames_put_together_go_in_order_as_they_fit_and_those_given_up_never() -> None:
    """``put_all``: five frames of 1,000 bytes, three to a message, behind a message being written; a second
    ``put_all``, given up while it waits, leaves nothing behind; the first learns that all five went out."""
    writes = Writes(in_order=True)
    writes.held = release = trio.Event()
    outbox = Outbox[CallFrame](writes, max_bytes=3 * (1000 + 256))
    written: list[bool] = []
    gave_up = trio.CancelScope()

    async def put_all(first: int) -> None:
        written.append(await outbox.put_all([CallFrame(n, "sig", b"x" * 1000) for n in range(first, first + 5)]))

    async def put_all_then_give_up() -> None:
        with gave_up:
            await outbox.put_all([frame(n) for n in range(100, 103)])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.put, frame(0))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(put_all, 10)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(put_all_then_give_up)
        await trio.testing.wait_all_tasks_blocked()
        gave_up.cancel()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert writes.messages == [[0], [10, 11, 12], [13, 14]] and written == [True]
    assert await outbox.put_all([]) is True


async def test_frames_put_together_stop_going_out_once_their_put_is_given_up() -> None:
    """Five frames, one to a message: given up while the first message is being written, the put writes that one
    whole and no other."""
    writes = Writes(in_order=True)
    writes.held = release = trio.Event()
    outbox = Outbox[CallFrame](writes, max_bytes=1000 + 256)
    gave_up = trio.CancelScope()

    async def put_all_then_give_up() -> None:
        with gave_up:
            await outbox.put_all([CallFrame(n, "sig", b"x" * 1000) for n in range(5)])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(put_all_then_give_up)
        await trio.testing.wait_all_tasks_blocked()
        gave_up.cancel()
        release.set()
    assert writes.messages == [[0]]
    assert await outbox.put(frame(9)) and writes.messages == [[0], [9]]  # those given up wait no more
