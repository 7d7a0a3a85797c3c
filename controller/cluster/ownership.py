"""Shard ownership: exactly one live node hosts each identity's actor, fenced by etcd.

Every node watches the ``owners/`` keys and the live nodes (``controller/cluster/membership.py``). For each virtual
shard (``controller/cluster/shards.py``) the live node that should own it claims it when nobody holds it: a txn
that creates ``owners/NNN`` under the node's lease only if the key is absent (``CREATE == 0``), so one node at most
holds it. Once claimed, and once the node's replica holds every write acknowledged before (the read barrier), the
posture engine adopts the shard's identities (:class:`ShardHost`): their replicated state is loaded and every
deadline re-armed. A node that holds a shard another live node should own (a node joined, or came back) releases
it: the engine stops those actors first, then the key is deleted, and the rightful owner claims it. A key of this
node's for a shard it neither hosts nor should (its delete failed) is deleted at its next turn, so that no shard
stays held by a node that does not host it.

**Fencing.** Every write the engine makes for an owned identity carries a compare of the shard key's creation
revision (:meth:`ShardOwnership.fence`): once the key is gone (the lease expired while this process was paused,
say) or belongs to someone else, etcd refuses the write. And the node stops acting on its own clock: when its lease
is no longer surely alive (``LeaseKeeper.valid_until`` less :data:`MARGIN`, without a renewal), it releases every
shard locally, before etcd can expire the lease and let another node claim them. A node whose key vanished under
it (seen on the watch, or missing when the holders are read again after the watch broke) releases that shard too.
A node that takes back a shard whose key survived on its lease creates the key anew: the writes its stopped actors
still had queued carry the old key's fence, and fail.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import trio

from controller.cluster.keys import NetworkKeys
from controller.cluster.membership import Membership
from controller.cluster.reruns import RETRY_PAUSE, Rerun
from controller.cluster.shards import SHARDS, desired_owner, shard_of
from controller.etcd import (
    Compacted,
    Compare,
    CompareOp,
    CompareTarget,
    Delete,
    EtcdClient,
    EtcdError,
    EventType,
    LeaseKeeper,
    Put,
)
from controller.posture.adoption import Adoption

__all__ = ["MARGIN", "Freshness", "HolderChanges", "ShardHost", "ShardOwnership"]

log = logging.getLogger("tollgate.cluster")

MARGIN = 0.5
"""Seconds before its lease could expire (on this node's clock) at which a node stops acting for its shards."""


class ShardHost(Protocol):
    """What hosts the identity actors of the shards this node owns (the posture engine)."""

    async def read_adoption(self, select: Callable[[str], bool]) -> Adoption:
        """Read what adopting the identities ``select`` accepts re-arms, while nobody writes their states."""

    def adopt(self, select: Callable[[str], bool], adoption: Adoption | None = None) -> None:
        """Host the identities ``select`` accepts, from their stored state (``adoption``), deadlines re-armed."""

    def release(self, select: Callable[[str], bool]) -> int:
        """Stop hosting the identities ``select`` accepts."""


class Freshness(Protocol):
    async def wait_current(self) -> None:
        """Return once the replica holds every write acknowledged before the call, however long that takes."""


class HolderChanges:
    """Told whenever a shard's holder changes (:meth:`unpark_all`): wakes the tasks parked on it, and calls the
    callbacks registered meanwhile, on the telling task (a callback must not block)."""

    def __init__(self) -> None:
        self._parked = trio.lowlevel.ParkingLot()
        self._callbacks: set[Callable[[], None]] = set()

    async def park(self) -> None:
        """Return once a holder changed."""
        await self._parked.park()

    def unpark_all(self) -> None:
        self._parked.unpark_all()
        for callback in list(self._callbacks):
            callback()

    @contextmanager
    def calling(self, callback: Callable[[], None]) -> Iterator[None]:
        """Within the block, ``callback`` is called at every change."""
        self._callbacks.add(callback)
        try:
            yield
        finally:
            self._callbacks.discard(callback)


class ShardOwnership:
    """This node's shards (an ``Ownership`` of the posture engine), and who holds every other one."""

    def __init__(self, etcd: EtcdClient, keys: NetworkKeys, membership: Membership, freshness: Freshness) -> None:
        self._etcd = etcd
        self._keys = keys
        self._membership = membership
        self._freshness = freshness
        self.name = ""  # this node's name, once it serves (it claims nothing before)
        self.host: ShardHost | None = None
        self._holders: dict[int, str] = {}  # shard -> the node whose key holds it
        self._claims: dict[int, int] = {}  # shard -> its key's create revision (a claim taken anew has a new one)
        self._mine: dict[int, Compare] = {}  # shard -> its fence (adopted: the engine hosts its identities)
        self._claiming = 0  # claims made in etcd and not yet adopted (or given up)
        self._adopted = trio.lowlevel.ParkingLot()  # woken when the claims under way are adopted or given up
        self._lease = 0  # the lease this node's keys are on
        self._rerun = Rerun(failed="claiming or releasing shards failed; trying again")
        self.changed = HolderChanges()
        membership.on_change(self._rerun.mark)

    # -- what the engine and the router ask ---------------------------------------------------------------------

    def owns(self, identity_id: str) -> bool:
        return shard_of(identity_id) in self._mine

    def fence(self, identity_id: str) -> Sequence[object]:
        fence = self._mine.get(shard_of(identity_id))
        return () if fence is None else (fence,)

    def holder(self, identity_id: str) -> str | None:
        """The node holding the identity's shard, as the watch last told (None: nobody, for now)."""
        return self._holders.get(shard_of(identity_id))

    def claim(self, identity_id: str) -> tuple[str, int] | None:
        """The node holding the identity's shard and its claim's create revision, as the watch last told: a node that
        let the shard go (or restarted) and took it back holds it by another claim."""
        shard = shard_of(identity_id)
        holder = self._holders.get(shard)
        return None if holder is None else (holder, self._claims.get(shard, 0))

    def owned(self) -> list[int]:
        return sorted(self._mine)

    def holdings(self) -> dict[int, object]:
        """The shards this node hosts now, each with its claim (a shard let go and claimed again has a new one)."""
        return dict(self._mine)

    def holder_of(self, shard: int) -> str | None:
        """The node holding ``shard``, as the watch last told (None: nobody, for now)."""
        return self._holders.get(shard)

    async def claims_adopted(self) -> None:
        """Return once no claim this node made is still waiting to be adopted. A shard this node holds in etcd is
        then hosted by its engine, or not held any more, or its claim broke off on an etcd error (the reconciler
        claims it again shortly, and adopts it then)."""
        while self._claiming:
            await self._adopted.park()

    # -- the service --------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the holders, claim and release shards as the live nodes change, and stop acting before the
        lease could expire. Cancelled, it releases every shard it holds (the engine first)."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._follow)
                nursery.start_soon(self._rerun.run, self._step)
                nursery.start_soon(self._watchdog)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                await self._release(sorted(self._mine))

    async def _follow(self) -> None:
        """Keep ``_holders`` as etcd holds it: read every key, then watch from that read."""
        while True:
            try:
                found = await self._etcd.range(self._keys.owners, prefix=True)
                holders: dict[int, str] = {}
                created: dict[int, int] = {}
                for kv in found.kvs:
                    shard = self._keys.shard_of_owner_key(kv.key)
                    if shard is not None:
                        holders[shard] = kv.value.decode(errors="replace")
                        created[shard] = kv.create_revision
                self._holders, self._claims = holders, created
                # Read again after a broken or compacted watch: a key of this node's that went meanwhile was not
                # seen going. (A claim made while the read was on its way is newer than the read: left alone.)
                revision = found.header.revision
                self._drop([shard for shard, fence in self._mine.items()
                            if isinstance(fence.operand, int) and fence.operand <= revision
                            and created.get(shard) != fence.operand], "its ownership key is gone")
                self._held_changed()
                async with self._etcd.watch(self._keys.owners, prefix=True, start_revision=found.header.revision + 1,
                                            unavailable_timeout=math.inf) as watch:
                    async for update in watch:
                        vanished: list[int] = []
                        for event in update.events:
                            shard = self._keys.shard_of_owner_key(event.kv.key)
                            if shard is None:
                                continue
                            if event.type is EventType.DELETE:
                                self._holders.pop(shard, None)
                                self._claims.pop(shard, None)
                                if self._claim_deleted(shard, event.kv.mod_revision):
                                    vanished.append(shard)
                            else:
                                self._holders[shard] = event.kv.value.decode(errors="replace")
                                self._claims[shard] = event.kv.create_revision
                        self._drop(vanished, "its ownership key vanished")
                        self._held_changed()
            except Compacted:
                continue
            except EtcdError as error:
                log.debug("the shard holders' view lost etcd; reading again", extra={"error": str(error)})
                await trio.sleep(RETRY_PAUSE)

    def _claim_deleted(self, shard: int, deleted_at: int) -> bool:
        """Whether a delete of ``shard``'s key at revision ``deleted_at`` ended this node's claim on it: not released
        by this node, its lease ended under it. A delete older than the claim was of a key before it (the one a
        reclaim replaced, a former holder's that this claim followed), which a lagging watch may bring late."""
        fence = self._mine.get(shard)
        return fence is not None and not (isinstance(fence.operand, int) and deleted_at < fence.operand)

    def _held_changed(self) -> None:
        self.changed.unpark_all()
        self._rerun.mark()

    async def _step(self) -> None:
        membership = self._membership
        live = membership.live()
        keeper = membership.keeper
        if not self.name or self.name not in live or keeper is None:
            return
        if keeper.lease_id != self._lease:
            self._drop(list(self._mine), "this node's lease changed")  # keys on the old lease are gone with it
            self._lease = keeper.lease_id
        desired = {shard for shard in range(SHARDS) if desired_owner(shard, live) == self.name}
        await self._release(sorted(set(self._mine) - desired))
        await self._delete_strays(desired)
        if keeper.remaining(trio.current_time()) <= MARGIN:
            return  # not surely alive: the watchdog asks again once the lease is renewed
        self._claiming += 1
        try:
            await self._claim_and_adopt(desired, keeper)
        finally:
            self._claiming -= 1
            self._adopted.unpark_all()

    async def _claim_and_adopt(self, desired: set[int], keeper: LeaseKeeper) -> None:
        claimed: dict[int, Compare] = {}
        for shard in sorted(desired - set(self._mine)):
            holder = self._holders.get(shard)
            if holder is None:
                fence = await self._claim(shard, self._lease)
            elif holder == self.name:  # dropped by the watchdog, or before a restart: its key may still be ours
                fence = await self._reclaim(shard, self._lease)
            else:
                continue
            if fence is not None:
                claimed[shard] = fence
        if claimed:
            # The replica first holds every write made before the claim: the state the old owner left (never a
            # stale replica's, which the new owner's writes would then be applied under).
            await self._freshness.wait_current()
            shards = frozenset(claimed)

            def select(identity_id: str) -> bool:
                return shard_of(identity_id) in shards

            # Read before the shards are this node's, when nothing writes their identities' states: the claims
            # fence their old owner out, and this node does not act for them yet.
            adoption = None if self.host is None else await self.host.read_adoption(select)
            if self._membership.keeper is not keeper or keeper.remaining(trio.current_time()) <= MARGIN:
                return  # lost meanwhile: the keys went with the lease
            self._mine.update(claimed)
            if self.host is not None:
                self.host.adopt(select, adoption)
            self.changed.unpark_all()  # calls waiting for a holder: this node hosts them now
            log.info("shards claimed", extra={"shards": sorted(shards)})

    async def _claim(self, shard: int, lease: int) -> Compare | None:
        """Create the shard's key under ``lease`` if nobody holds it; its fence, or None if someone did."""
        key = self._keys.owner(shard)
        result = await self._etcd.txn([Compare.absent(key)], [Put(key, self.name.encode(), lease=lease)])
        if not result.succeeded:
            return None
        return Compare(key, CompareTarget.CREATE, CompareOp.EQUAL, result.header.revision)

    async def _reclaim(self, shard: int, lease: int) -> Compare | None:
        """A new fence for the shard whose key is this node's, on ``lease`` (else None: it expires with an old
        lease, and is claimed anew then). The key is created anew, not taken as it is: writes still queued by the
        actors that held the shard before (the watchdog stopped them) carry the old key's fence, and must fail
        rather than commit behind the new actors' backs."""
        key = self._keys.owner(shard)
        found = (await self._etcd.range(key)).first
        if found is None or found.lease != lease or found.value != self.name.encode():
            return None
        deleted = await self._etcd.txn([Compare(key, CompareTarget.CREATE, CompareOp.EQUAL, found.create_revision)],
                                       [Delete(key)])
        return await self._claim(shard, lease) if deleted.succeeded else None

    async def _delete_strays(self, desired: set[int]) -> None:
        """Delete the keys this node holds on its lease for shards it neither hosts nor should (a release whose
        delete failed, a shard dropped by the watchdog and owed to another node since): until they go, the
        rightful owner takes the shard for held."""
        for shard, holder in sorted(self._holders.items()):
            if holder != self.name or shard in self._mine or shard in desired:
                continue
            key = self._keys.owner(shard)
            await self._etcd.txn([Compare(key, CompareTarget.VALUE, CompareOp.EQUAL, self.name.encode()),
                                  Compare(key, CompareTarget.LEASE, CompareOp.EQUAL, self._lease)], [Delete(key)])

    async def _release(self, shards: Sequence[int]) -> None:
        """Hand the shards on: stop their actors, then delete each one's key (only if still this node's)."""
        fences = [fence for shard in shards if (fence := self._mine.get(shard)) is not None]
        self._drop(shards, "another node should own it")
        for fence in fences:
            await self._etcd.txn([fence], [Delete(fence.key)])

    def _drop(self, shards: Sequence[int], why: str) -> None:
        """Stop acting for ``shards`` at once (no etcd call): their actors stop in one pass over the actors, which
        a hundred thousand identities make long enough to do once, not once per shard."""
        dropped = frozenset(shard for shard in shards if self._mine.pop(shard, None) is not None)
        if not dropped:
            return
        if self.host is not None:
            self.host.release(lambda identity_id: shard_of(identity_id) in dropped)
        self.changed.unpark_all()
        for shard in sorted(dropped):
            log.info("shard released", extra={"shard": shard, "why": why})

    async def _watchdog(self) -> None:
        """Release every shard once this node's lease is no longer surely alive, before etcd may expire it; claim
        again once it is renewed (or replaced)."""
        while True:
            keeper = self._membership.keeper
            if keeper is None:
                await self._rerun.marked()
                continue
            with trio.move_on_at(keeper.valid_until - MARGIN) as waiting:
                await keeper.renewed.park()
            if not waiting.cancelled_caught or self._membership.keeper is not keeper:
                continue
            self._drop(list(self._mine), "this node's lease could not be renewed in time")
            with trio.move_on_at(keeper.valid_until):
                await keeper.renewed.park()
            self._rerun.mark()
            # Lapsed (or gone: etcd said so), it is never renewed: wait for the membership to replace it, which marks
            # a change, however long etcd takes to grant another (an outage), rather than go round again at once.
            while self._membership.keeper is keeper and keeper.remaining(trio.current_time()) <= 0:
                await self._rerun.marked()
