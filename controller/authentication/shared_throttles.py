"""Throttles and failure counts every node of a cluster sees: rows of ``guess-counters``, written through the one
replicated write path.

A bucket (wrong passwords per username and per address, wrong MFA codes per identity) is a row holding its tokens
and when it was last touched (wall-clock seconds); a failure takes a token in a write, so two nodes counting at once
are serialised like any other write, and a check reads the row from the local replica, which the read barrier has
brought up to every write acknowledged before the request. A count (consecutive wrong passwords per authenticator,
wrong MFA codes per identity) is a row holding the count, added to and cleared in writes. A failure is answered only
once its row is durable, so a guess on another node right after sees it: guesses spread over the nodes are
throttled as on one node, and a lockout counts them all.

A bucket refilled is worth nothing: :meth:`SharedThrottles.run` deletes each bucket row once its tokens are back
(a deadline per row on one heap, no sweep), so made-up names cannot grow the table for ever. Every node does so for
every row; a row touched again meanwhile is left alone.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import logging
from collections.abc import Mapping
from typing import Any

import trio

from controller.authentication.throttle import (
    ADDRESS_BUCKET,
    MFA_BUCKET,
    MFA_LOCKOUT_FAILURES,
    USERNAME_BUCKET,
    Bucket,
    refuse,
)
from controller.data.domain import Domain
from controller.errors import ApiError
from controller.model.spec import Change, WriteContext

__all__ = ["KIND", "SharedThrottles"]

KIND = "guess-counters"
_BUCKETS = {bucket.name: bucket for bucket in (USERNAME_BUCKET, ADDRESS_BUCKET, MFA_BUCKET)}
_LOGINS = "logins"
_MFA_CODES = "mfa-codes"
_RETRY_SECONDS = 1.0

log = logging.getLogger("tollgate.auth")


def _row_id(table: str, key: str) -> str:
    """The row of ``key`` in ``table``: the key hashed, so any username or address fits in an id."""
    return f"{table}.{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def _tokens(bucket: Bucket, row: Mapping[str, Any] | None, now: float) -> float:
    """The tokens a bucket row holds at ``now`` (a missing row is a full bucket)."""
    if row is None:
        return float(bucket.burst)
    refilled = float(row["tokens"]) + (now - float(row["at"])) / bucket.every
    return min(float(bucket.burst), refilled)


def _full_at(row: Mapping[str, Any]) -> float | None:
    """When a bucket row's tokens are all back (None: the row is a count, kept until cleared)."""
    bucket = _BUCKETS.get(str(row.get("table")))
    if bucket is None:
        return None
    return float(row["at"]) + (bucket.burst - float(row["tokens"])) * bucket.every


class SharedThrottles:
    """The :class:`~controller.authentication.throttle.Throttles` of a node of a cluster, over ``domain``'s rows."""

    def __init__(self, domain: Domain) -> None:
        self._domain = domain
        self._clock = domain.clock
        self._due: list[tuple[float, str, float]] = []  # (full at, row id, its "at"): rows to delete then
        self._wake: trio.CancelScope | None = None

    # -- checks and failures ---------------------------------------------------------------------------------

    def _retry_after(self, bucket: Bucket, key: str) -> float:
        with self._domain.read() as ctx:
            row = ctx.txn.get(KIND, _row_id(bucket.name, key))
        tokens = _tokens(bucket, row, self._clock.now())
        return 0.0 if tokens >= 1 else (1 - tokens) * bucket.every

    async def _take(self, *pairs: tuple[Bucket, str]) -> None:
        def write(ctx: WriteContext) -> list[dict[str, Any]]:
            rows = []
            for bucket, key in pairs:
                row_id = _row_id(bucket.name, key)
                tokens = _tokens(bucket, ctx.txn.get(KIND, row_id), ctx.now)
                rows.append({"id": row_id, "table": bucket.name, "tokens": tokens - 1, "at": ctx.now})
                ctx.txn.put(KIND, rows[-1])
            return rows

        for row in await self._domain.write(write):
            self._arm(row)  # other nodes arm it when the row reaches them (changes_committed)

    async def _add(self, table: str, key: str, *, wraps_at: int | None = None) -> int:
        def write(ctx: WriteContext) -> int:
            row_id = _row_id(table, key)
            row = ctx.txn.get(KIND, row_id)
            count = int(row["count"]) + 1 if row is not None else 1
            if wraps_at is not None and count >= wraps_at:
                ctx.txn.delete(KIND, row_id)
            else:
                ctx.txn.put(KIND, {"id": row_id, "table": table, "count": count})
            return count

        count: int = await self._domain.write(write)
        return count

    async def _clear(self, table: str, key: str) -> None:
        row_id = _row_id(table, key)
        with self._domain.read() as ctx:
            if not ctx.txn.exists(KIND, row_id):
                return  # nothing to clear: no write at all (every login would otherwise write)
        await self._domain.write(lambda ctx: ctx.txn.delete(KIND, row_id) and None)

    def check_password(self, username: str, address: str) -> None:
        refuse(max(self._retry_after(USERNAME_BUCKET, username), self._retry_after(ADDRESS_BUCKET, address)))

    async def password_failed(self, username: str, address: str) -> None:
        await self._take((USERNAME_BUCKET, username), (ADDRESS_BUCKET, address))

    def check_mfa(self, identity_id: str) -> None:
        refuse(self._retry_after(MFA_BUCKET, identity_id))

    async def mfa_failed(self, identity_id: str) -> int:
        await self._take((MFA_BUCKET, identity_id))
        return await self._add(_MFA_CODES, identity_id, wraps_at=MFA_LOCKOUT_FAILURES)

    async def mfa_passed(self, identity_id: str) -> None:
        await self._clear(_MFA_CODES, identity_id)

    async def login_failed(self, authenticator_id: str) -> int:
        return await self._add(_LOGINS, authenticator_id)

    async def login_counted_out(self, authenticator_id: str) -> None:
        await self._clear(_LOGINS, authenticator_id)

    # -- refilled buckets go ----------------------------------------------------------------------------------

    def changes_committed(self, changes: list[Change]) -> None:
        """Arm the deletion of every bucket row written, by any node (a listener over :data:`KIND`)."""
        for change in changes:
            if change.after is not None:
                self._arm(change.after)

    def _arm(self, row: Mapping[str, Any]) -> None:
        full_at = _full_at(row)
        if full_at is None:
            return
        heapq.heappush(self._due, (full_at, str(row["id"]), float(row["at"])))
        if self._wake is not None and self._due[0][0] == full_at:
            self._wake.deadline = self._clock.to_trio(full_at)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Delete bucket rows as their tokens come back, until cancelled."""
        with self._domain.read() as ctx:
            for row in ctx.txn.scan(KIND):
                self._arm(row)
        task_status.started()
        while True:
            deadline = self._clock.to_trio(self._due[0][0]) if self._due else float("inf")
            with trio.CancelScope(deadline=deadline) as self._wake:
                await trio.sleep_forever()
            self._wake = None
            now = self._clock.now()
            due = []
            while self._due and self._due[0][0] <= now:
                due.append(heapq.heappop(self._due))
            try:
                await self._domain.write(functools.partial(_delete_refilled, due=due))
            except ApiError as error:  # the cluster's store is unavailable: try again shortly
                log.warning("deleting refilled throttle rows failed", extra={"error": error.code})
                for _, row_id, at in due:
                    heapq.heappush(self._due, (now + _RETRY_SECONDS, row_id, at))


def _delete_refilled(ctx: WriteContext, *, due: list[tuple[float, str, float]]) -> None:
    """Delete the rows of ``due`` not touched since they were armed (their ``at`` unchanged)."""
    for _, row_id, at in due:
        row = ctx.txn.get(KIND, row_id)
        if row is not None and float(row.get("at", -1.0)) == at:
            ctx.txn.delete(KIND, row_id)
