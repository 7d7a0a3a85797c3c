"""Keeping a lease alive, and knowing on this process's own clock until when it surely is.

etcd counts a renewed lease's TTL from the moment it handles the keepalive, which is after the moment this process
sent it. So the send time of the last answered keepalive plus the TTL it renewed to is a time before which the lease
is alive whatever the network did: ``LeaseKeeper.valid_until``. A holder that acts under a lease (an owner fencing
its writes) stops acting before that time, and ``run`` raises ``LeaseExpired`` at that time if no keepalive
succeeded meanwhile, so that the holder's task tree is cancelled before the lease can expire in etcd. A leader
change in etcd renews every lease, so the lease may outlive ``valid_until``; it ends sooner only when etcd revokes it
(an old leader of etcd 3.4.23 may, etcd#15247), and then ``valid_until`` is set to the moment etcd said so.
"""

from __future__ import annotations

from typing import NoReturn

import trio

from controller.etcd.client import EtcdClient
from controller.etcd.errors import LeaseExpired, LeaseNotFound, Unavailable
from controller.etcd.model import Lease

__all__ = ["LeaseKeeper"]


class LeaseKeeper:
    """One lease and its keepalives: ``run`` it in a nursery (``await nursery.start(keeper.run)``)."""

    def __init__(self, client: EtcdClient, lease: Lease, *, valid_until: float, interval: float | None = None) -> None:
        self._client = client
        self.lease = lease
        self.valid_until = valid_until
        self.interval = interval if interval is not None else lease.ttl / 3
        self.renewals = 0
        self.renewed = trio.lowlevel.ParkingLot()  # unparked at every successful renewal

    @classmethod
    async def grant(cls, client: EtcdClient, ttl: int, *, interval: float | None = None) -> LeaseKeeper:
        """Grant a new lease of ``ttl`` seconds (or etcd's minimum, if higher) and a keeper for it."""
        sent = trio.current_time()
        lease = await client.lease_grant(ttl)
        return cls(client, lease, valid_until=sent + lease.ttl, interval=interval)

    @property
    def lease_id(self) -> int:
        return self.lease.id

    def remaining(self, now: float) -> float:
        """Seconds (on Trio's clock) the lease surely lives after ``now``; 0 or less once that is no longer sure."""
        return self.valid_until - now

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> NoReturn:
        """Renew the lease every ``interval`` seconds, for ever.

        Raises LeaseNotFound when etcd says the lease is gone, and LeaseExpired once ``valid_until`` passes without
        a renewal (etcd unreachable or without quorum for a whole TTL). A renewal that fails otherwise is tried
        again at the next beat."""
        task_status.started()
        with trio.CancelScope(deadline=self.valid_until) as lifetime:
            while True:
                sent = trio.current_time()
                try:
                    ttl = await self._client.lease_keepalive(self.lease.id)
                except Unavailable:
                    pass  # the next beat tries again, while the lease surely lives
                except LeaseNotFound:
                    # Gone before it could have expired (an old leader's revocation, etcd#15247): not alive now.
                    self.valid_until = trio.current_time()
                    self.renewed.unpark_all()  # who waits for the next renewal looks again
                    raise
                else:
                    self.valid_until = sent + ttl
                    lifetime.deadline = self.valid_until
                    self.renewals += 1
                    self.renewed.unpark_all()
                await trio.sleep_until(sent + self.interval)
        raise LeaseExpired(f"lease {self.lease.id:x}: no keepalive succeeded before it could have expired")
