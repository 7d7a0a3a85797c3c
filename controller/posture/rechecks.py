"""The engine's queue of re-checks sent a chunk at a time: adopted identities', and those of a write that many
identities re-check (``controller/posture/engine.py``).

Trio runs every runnable task before it looks for I/O again: a hundred thousand actors woken at once would hold the
event loop for seconds (no request answered, no deadline fired, no lease renewed). The queue posts
:data:`RECHECK_CHUNK` re-checks, each with a settle in the same step of the actor, and waits for them before the
next chunk.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import trio

from actors.live_actors import OneShot
from controller.posture.messages import IdentityMessage, Reevaluate, Settle

__all__ = ["RECHECK_CHUNK", "RecheckQueue"]

RECHECK_CHUNK = 256
"""Re-checks sent to the actors at once."""


class _Handled(OneShot[None]):
    """The reply of a settle that only paces the queue: a failure answers it too (an actor that crashed on its
    re-check was logged at the actor boundary, and goes on from its state before)."""

    __slots__ = ()

    def fail(self, error: BaseException) -> None:
        self.send(None)


class _Batch:
    """Identities queued for one re-check message; the first ``sent`` of them are sent."""

    __slots__ = ("identity_ids", "message", "sent")

    def __init__(self, identity_ids: Sequence[str], message: Reevaluate) -> None:
        self.identity_ids = identity_ids
        self.message = message
        self.sent = 0


class RecheckQueue:
    """Re-checks waiting to be sent, and how many were ever queued and settled.

    Args:
        post: delivers a message to an identity's actor.
        hosts: whether this node still hosts an identity (one let go is its next host's to re-check).
    """

    def __init__(self, post: Callable[[str, IdentityMessage], None], hosts: Callable[[str], bool]) -> None:
        self._post = post
        self._hosts = hosts
        self._batches: collections.deque[_Batch] = collections.deque()
        self.queued = 0
        """Re-checks ever queued: what :meth:`settled` waits for, to know that those queued so far are settled."""
        self._settled = 0
        self._arrived = trio.lowlevel.ParkingLot()
        self._progress = trio.lowlevel.ParkingLot()

    def add(self, identity_ids: Sequence[str], message: Reevaluate) -> int:
        """Queue ``message`` for each identity; returns the count :meth:`settled` waits for, for these."""
        if identity_ids:
            self._batches.append(_Batch(identity_ids, message))
            self.queued += len(identity_ids)
            self._arrived.unpark_all()
        return self.queued

    def waiting(self, among: set[str]) -> list[tuple[str, Reevaluate]]:
        """The re-checks not yet sent to identities in ``among``."""
        return [(identity_id, batch.message) for batch in self._batches
                for identity_id in batch.identity_ids[batch.sent:] if identity_id in among]

    async def settled(self, count: int) -> None:
        """Return once the first ``count`` re-checks ever queued are settled."""
        while self._settled < count:
            await self._progress.park()

    async def run(self) -> None:
        """Send the queued re-checks a chunk at a time, each chunk settled before the next, until cancelled."""
        while True:
            while not self._batches:
                await self._arrived.park()
            batch = self._batches[0]
            chunk = batch.identity_ids[batch.sent:batch.sent + RECHECK_CHUNK]
            batch.sent += len(chunk)
            if batch.sent >= len(batch.identity_ids):
                self._batches.popleft()
            replies: list[_Handled] = []
            for identity_id in chunk:
                if self._hosts(identity_id):
                    # Posted together, the re-check and the settle are one step of the actor.
                    reply = _Handled()
                    self._post(identity_id, batch.message)
                    self._post(identity_id, Settle(reply))
                    replies.append(reply)
            for reply in replies:
                await reply.receive()
            self._settled += len(chunk)
            self._progress.unpark_all()
