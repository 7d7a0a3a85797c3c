"""How long a cluster node's commit step (``controller/cluster/commit.py``) lets a batch of writes take, whatever
etcd does: a plain function of the time, the batch's oldest write and what the batch before it met.

Every caller is answered within :data:`ANSWER_WITHIN` of its write's queueing, or at most :data:`LAST_TRY` past it:
quorum lost, a write answers 503 within the 5 s the API promises, however many batches queued behind one another.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANSWER_WITHIN", "LAST_TRY", "SHOW_GRACE", "WRITE_DEADLINE", "Bounds", "batch_bounds"]

ANSWER_WITHIN = 4.5
"""Seconds from a write's queueing within which the commit step answers it, whatever etcd does: the API promises
5 s, and the rest is room to send the answer. A batch's bounds count from its oldest write (:func:`batch_bounds`)."""
WRITE_DEADLINE = 3.5
"""Seconds a batch may take to reach etcd (an election included) before its callers are answered 503; less when its
oldest write waited in the queue."""
SHOW_GRACE = 1.0
"""Seconds past a batch's deadline in which the replica may still show the writes etcd committed before the batch
broke off, before their callers are answered 503 all the same (saying that etcd holds them)."""
LAST_TRY = 0.25
"""Seconds a batch whose oldest write waited out its time in the queue still gets to reach etcd, when the batch
before it met no trouble: its callers are then answered up to this much past :data:`ANSWER_WITHIN`."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """When a batch's txns must have been answered, their settling and catch-ups included (``send``), and when the
    writes etcd committed before the batch broke off must show in the replica (``show``)."""

    send: float
    show: float


def batch_bounds(now: float, oldest: float, troubled: bool) -> Bounds | None:
    """The bounds of a batch taken at ``now`` whose oldest write a caller waits for was queued at ``oldest``, within
    :data:`ANSWER_WITHIN` of it where the time left allows :data:`LAST_TRY`. None: the batch is answered 503 at
    once, untried: its oldest write has waited out its time and etcd failed the last batch that asked it
    (``troubled``), so that the batches queued during an outage are each answered in time, rather than each taking
    a try after the last. A backlog on a healthy etcd is tried, however old."""
    limit = oldest + ANSWER_WITHIN
    send = min(now + WRITE_DEADLINE, limit - SHOW_GRACE)
    if send < now + LAST_TRY:
        if troubled:
            return None
        send = now + LAST_TRY
    return Bounds(send, max(send, min(send + SHOW_GRACE, limit)))
