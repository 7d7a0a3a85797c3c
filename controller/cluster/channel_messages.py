"""The internal channel's messages (``controller/cluster/channel.py`` is the calling side of a link,
``web/internal_channel.py`` the serving side): the frames a message carries, a list of :class:`CallFrame` one way and
of :class:`ReplyFrame` the other, msgpack-encoded, and the :class:`Outbox` that puts the frames ready together in one
message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import msgspec
import trio
import trio.lowlevel

__all__ = ["MESSAGE_BYTES", "CallFrame", "Outbox", "ReplyFrame"]


class CallFrame(msgspec.Struct, array_like=True, frozen=True):
    """One call: ``id`` (the link's own), its ``signature`` (``call_signing.signature`` over ``body``), ``body``."""

    id: int
    signature: str
    body: bytes


class ReplyFrame(msgspec.Struct, array_like=True, frozen=True):
    """The answer to the call ``id``: an HTTP-like status and a JSON body, as ``RoutedPosture.serve`` gives them."""

    id: int
    status: int
    body: bytes


_encoder = msgspec.msgpack.Encoder()

F = TypeVar("F", CallFrame, ReplyFrame)


MESSAGE_BYTES = 1 << 20
"""The most bytes of frames an :class:`Outbox` puts in one message (one larger frame goes alone): well under the
16 MiB hypercorn takes in a WebSocket message, whatever the calls' sizes."""


class _Slot(Generic[F]):
    """A frame waiting in an :class:`Outbox`, whether a message has taken it (or its put gave it up first), and
    whether that message was written whole."""

    __slots__ = ("frame", "given_up", "size", "taken", "written")

    def __init__(self, frame: F) -> None:
        self.frame: F = frame
        self.size = len(frame.body) + 256  # the id, the status or signature, and the framing, generously
        self.taken = False
        self.given_up = False
        self.written = False


class Outbox(Generic[F]):
    """Frames written as messages, each message a list of the frames waiting when it is written (at most
    ``max_bytes`` of them, in order; the rest go in the next).

    :meth:`put` returns once its frame was written (by this task or by another's :meth:`put`); :meth:`put_all` once
    its frames were. The first writer yields one scheduler turn before it takes the waiting frames, so that frames
    put in the same turn join it; frames put while it writes wait for the next message. A frame whose :meth:`put` is
    cancelled before a message took it is never written (nor are those of a :meth:`put_all` that no message took by
    then, though it was writing others); a message taken is written whole even if the task writing it is cancelled
    meanwhile (``write`` bounds its own time). ``write`` writes one encoded message and says whether it wrote it
    whole; what it raises reaches the task that called it.
    """

    def __init__(self, write: Callable[[bytes], Awaitable[bool]], *, max_bytes: int = MESSAGE_BYTES) -> None:
        self._write = write
        self._max_bytes = max_bytes
        self._waiting: list[_Slot[F]] = []
        self._writing = trio.Lock()

    async def put(self, frame: F) -> bool:
        """Whether ``frame`` went out in a message written whole."""
        return await self.put_all((frame,))

    async def put_all(self, frames: Sequence[F]) -> bool:
        """:meth:`put` for several frames, in order (in one message where they fit): whether each went out in a
        message written whole."""
        if not frames:
            return True
        slots = [_Slot(frame) for frame in frames]
        self._waiting += slots
        try:
            # Acquiring the lock is a checkpoint (as every Trio async function): the frames put in this turn are
            # waiting when the task that holds it goes on.
            async with self._writing:
                while not slots[-1].taken:  # else written with a message another put wrote (taken in order)
                    await trio.lowlevel.checkpoint_if_cancelled()  # given up: no more of them is taken
                    message = self._take()
                    # Shielded: the frames are out of the queue, and half a message would leave the link unusable.
                    with trio.CancelScope(shield=True):
                        whole = await self._write(_encoder.encode([taken.frame for taken in message]))
                    for taken in message:
                        taken.written = whole
        finally:
            if not slots[-1].taken:  # given up before a message took them all: those left are never written
                for slot in slots:
                    slot.given_up = not slot.taken  # passed over where they wait: a cancel costs no search
        return all(slot.written for slot in slots)

    def _take(self) -> list[_Slot[F]]:
        message: list[_Slot[F]] = []
        size = 0
        passed = 0
        for slot in self._waiting:
            if not slot.given_up:
                if message and size + slot.size > self._max_bytes:
                    break
                slot.taken = True
                message.append(slot)
                size += slot.size
            passed += 1
        del self._waiting[:passed]
        return message
