"""The etcd client: the key-value store, txns, leases, compaction, cluster membership and watches, over etcd's JSON
gateway (``/v3/...``) on Trio.

Requests that need the leader (writes, linearizable reads) go to the member that leads, if it is one of the
endpoints (``controller/etcd/routing.py``); the others go to whichever member requests go to now.

Every call either returns etcd's answer or raises an ``EtcdError`` within the client's ``request_timeout`` (a Trio
deadline; a caller that needs a shorter bound puts the call in its own cancel scope, and must then count a write it
cancelled as one of unknown outcome). Which errors a caller may retry:

- ``Unavailable``: nothing was changed (no leader, no quorum, no member answered a read in time); retry later.
- ``OutcomeUnknown`` (an ``Unavailable``): a write (put, delete, a txn that writes, a lease grant or revoke, a
  compaction) was sent and not answered. Retry only what a txn compare guards, such as a create-if-absent
  (``Compare.absent``) or an update of a known revision (``Compare.unchanged``).
- anything else: etcd refused the request itself; retrying changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from types import TracebackType

import trio

from controller.etcd.answers import (
    decode,
    decode_header,
    decode_keepalive,
    decode_lease_grant,
    decode_members,
    decode_status,
    decode_time_to_live,
    decode_txn,
)
from controller.etcd.bodies import (
    MAX_REQUEST_BYTES,
    MAX_TXN_OPS,
    delete_body,
    encode,
    put_body,
    range_body,
    txn_body,
)
from controller.etcd.errors import Unavailable
from controller.etcd.model import (
    Bytes,
    Compare,
    Delete,
    DeleteResult,
    Header,
    KeyValue,
    Lease,
    LeaseInfo,
    Member,
    MemberStatus,
    Op,
    Put,
    PutResult,
    Range,
    RangeResult,
    TxnResult,
)
from controller.etcd.routing import ROUTE_WITHIN, LeaderRoute
from controller.etcd.transport import TlsFiles, Transport
from controller.etcd.watch import Watch

__all__ = ["EtcdClient"]


class EtcdClient:
    """A client of one etcd cluster, given its members' client URLs (``http://`` or, with ``tls``, ``https://``).

    Use it as ``async with EtcdClient(urls) as etcd:``; one client serves any number of concurrent calls (at most
    ``max_connections`` at a time) and watches."""

    def __init__(self, endpoints: Sequence[str], *, request_timeout: float = 5.0, tls: TlsFiles | None = None,
                 connect_timeout: float = 1.0, max_connections: int = 64,
                 max_txn_ops: int = MAX_TXN_OPS, max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.request_timeout = request_timeout
        self.max_txn_ops = max_txn_ops
        self.max_request_bytes = max_request_bytes
        self._transport = Transport(endpoints, tls=tls, connect_timeout=connect_timeout,
                                    max_connections=max_connections)
        self._route = LeaderRoute()
        self.requests: dict[str, int] = {}
        """Requests sent, by call (``kv/range``, ``kv/txn``, ``lease/keepalive``...; a range or txn that only reads
        a member's own view ends in ``-serializable``, a txn that only reads in ``-read``): what the metrics show."""

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self._transport.endpoints

    @property
    def current_endpoint(self) -> str:
        """The member requests go to now (it changes when one fails)."""
        return self._transport.current

    async def _call(self, path: str, body: dict[str, object], *, write: bool, needs_leader: bool = True,
                    only: str | None = None, call: str | None = None) -> bytes:
        if needs_leader and only is None and self._route.due(self._transport.current):
            await self._find_leader()
        name = call or path.removeprefix("/v3/")
        self.requests[name] = self.requests.get(name, 0) + 1
        return await self._transport.call(path, encode(body, max_bytes=self.max_request_bytes),
                                          within=self.request_timeout, write=write, needs_leader=needs_leader,
                                          only=only)

    async def _find_leader(self) -> None:
        """Send requests to the endpoint that leads, if one does (``controller/etcd/routing.py``): ask the members'
        status, the current one first, until the one that answers is the leader; each within :data:`ROUTE_WITHIN`."""
        route = self._route
        route.choosing = True
        try:
            leader = 0
            for endpoint in self._transport.in_order():
                status = None
                # A member down, cut off or silent is not the one to send to: ask the next.
                with trio.move_on_after(ROUTE_WITHIN), contextlib.suppress(Unavailable):
                    status = await self.status(endpoint)
                if status is None:
                    continue
                leads, leader = route.leads(status, leader)
                if leads:
                    self._transport.prefer(endpoint)
                    break
        finally:
            route.chosen(self._transport.current)

    # -- key-value ------------------------------------------------------------------------------------------------

    async def range(self, key: Bytes, range_end: Bytes | None = None, *, prefix: bool = False, revision: int = 0,
                    limit: int = 0, serializable: bool = False, keys_only: bool = False,
                    count_only: bool = False) -> RangeResult:
        """The key, the keys up to ``range_end`` (exclusive), or (``prefix``) every key under ``key``, sorted by key.

        ``revision``: as of that revision (Compacted if it is older than the history kept). ``serializable``: the
        answering member's own view, possibly stale, served even without a leader."""
        request = Range(key, range_end, prefix, revision, limit, serializable, keys_only, count_only)
        answer = await self._call("/v3/kv/range", range_body(request), write=False, needs_leader=not serializable,
                                  call="kv/range-serializable" if serializable else None)
        result = decode(answer, RangeResult)
        self._route.saw(result.header)
        return result

    async def get(self, key: Bytes, *, revision: int = 0, serializable: bool = False) -> KeyValue | None:
        """One key, or None if it does not exist."""
        return (await self.range(key, revision=revision, serializable=serializable)).first

    async def put(self, key: Bytes, value: Bytes, *, lease: int = 0, prev_kv: bool = False) -> PutResult:
        """Set a key (attached to ``lease`` unless 0). LeaseNotFound if the lease does not exist."""
        answer = await self._call("/v3/kv/put", put_body(Put(key, value, lease, prev_kv)), write=True)
        result = decode(answer, PutResult)
        self._route.saw(result.header)
        return result

    async def delete_range(self, key: Bytes, range_end: Bytes | None = None, *, prefix: bool = False,
                           prev_kv: bool = False) -> DeleteResult:
        """Delete the key, the keys up to ``range_end``, or (``prefix``) every key under ``key``."""
        answer = await self._call("/v3/kv/deleterange", delete_body(Delete(key, range_end, prefix, prev_kv)),
                                  write=True)
        return decode(answer, DeleteResult)

    async def txn(self, compare: Sequence[Compare] = (), success: Sequence[Op] = (),
                  failure: Sequence[Op] = ()) -> TxnResult:
        """If every compare holds, run ``success``, else ``failure``, atomically, as one revision.

        At most ``max_txn_ops`` operations per branch (TooManyOperations) and no key written twice
        (InvalidArgument). A txn that only reads is retried like a read; one that writes may raise
        OutcomeUnknown."""
        write = any(not isinstance(op, Range) for op in (*success, *failure))
        serializable = not write and all(op.serializable for op in (*success, *failure) if isinstance(op, Range))
        body = txn_body(compare, success, failure, max_ops=self.max_txn_ops)
        kind = "kv/txn" if write else "kv/txn-serializable" if serializable else "kv/txn-read"
        answer = await self._call("/v3/kv/txn", body, write=write, needs_leader=not serializable, call=kind)
        result = decode_txn(answer)
        self._route.saw(result.header)
        return result

    async def compact(self, revision: int, *, physical: bool = False) -> Header:
        """Drop the history before ``revision``; with ``physical``, return only once every member has.
        Compacted if the history is already compacted at or past it."""
        body: dict[str, object] = {"revision": revision, "physical": physical}
        answer = await self._call("/v3/kv/compaction", body, write=True)
        return decode_header(answer)

    # -- leases ---------------------------------------------------------------------------------------------------

    async def lease_grant(self, ttl: int, *, lease_id: int = 0) -> Lease:
        """A new lease of ``ttl`` seconds (etcd raises a TTL below its minimum); ``lease_id`` 0 lets etcd choose."""
        body: dict[str, object] = {"TTL": ttl, "ID": lease_id}
        answer = await self._call("/v3/lease/grant", body, write=True)
        return decode_lease_grant(answer)

    async def lease_keepalive(self, lease_id: int) -> int:
        """Renew a lease to its full TTL and return that TTL; LeaseNotFound if it expired or was revoked."""
        answer = await self._call("/v3/lease/keepalive", {"ID": lease_id}, write=False)
        return decode_keepalive(answer, lease_id)

    async def lease_revoke(self, lease_id: int) -> None:
        """End a lease now, deleting its keys; LeaseNotFound if it is already gone."""
        await self._call("/v3/lease/revoke", {"ID": lease_id}, write=True)

    async def lease_time_to_live(self, lease_id: int, *, keys: bool = False) -> LeaseInfo:
        """A lease's remaining seconds (and its keys, with ``keys``); LeaseNotFound if it is gone."""
        answer = await self._call("/v3/lease/timetolive", {"ID": lease_id, "keys": keys}, write=False)
        return decode_time_to_live(answer, lease_id)

    # -- cluster --------------------------------------------------------------------------------------------------

    async def member_list(self) -> tuple[Member, ...]:
        """The cluster's members."""
        answer = await self._call("/v3/cluster/member/list", {}, write=False)
        return decode_members(answer)

    async def status(self, endpoint: str) -> MemberStatus:
        """The status of the member at ``endpoint`` (one of this client's), answered by that member alone."""
        answer = await self._call("/v3/maintenance/status", {}, write=False, only=endpoint)
        return decode_status(answer)

    # -- watch ----------------------------------------------------------------------------------------------------

    def watch(self, key: Bytes, range_end: Bytes | None = None, *, prefix: bool = False, start_revision: int = 0,
              prev_kv: bool = False, progress_notify: bool = True, idle_timeout: float | None = None,
              unavailable_timeout: float = 10.0) -> Watch:
        """A watch of the key, the keys up to ``range_end``, or (``prefix``) every key under ``key``, from
        ``start_revision`` (inclusive; 0: from now on). Enter it with ``async with`` and iterate it.

        ``idle_timeout``: move to another member when the stream brings nothing (not even a progress notification,
        which etcd sends as often as its ``--experimental-watch-progress-notify-interval``) for that long.
        ``unavailable_timeout``: raise Unavailable when no member has carried the watch for that long."""
        request = Range(key, range_end, prefix)
        return Watch(self._transport, request, start_revision=start_revision, prev_kv=prev_kv,
                     progress_notify=progress_notify, idle_timeout=idle_timeout, create_timeout=self.request_timeout,
                     unavailable_timeout=unavailable_timeout)
