"""The writes of API sessions, as plain functions that build mutations (``controller/authentication/api_sessions.py``
submits them): a session's activity, its ending, its second factors. Each reads the row it changes inside its own
write, so that what another write (or another node) stored meanwhile is respected."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from controller.authentication.live_session import EXT_JWT_UNTIL, KIND, row_lifetime
from controller.clock import format_time, parse_time
from controller.data.write_path import delete_row
from controller.model.spec import Change, Resource, WriteContext

__all__ = ["activity_write", "expiry_write", "ext_jwt_write", "flags_write", "removal_write"]

_EXPIRY = {"code": "expiry"}


def activity_write(stale: Sequence[tuple[str, float]], *, forward_only: bool) -> Callable[[WriteContext], None]:
    """Store each session's ``lastActivityAt`` (wall-clock seconds, by session id); ``forward_only``: never over a
    later one another node stored meanwhile."""
    def write(ctx: WriteContext) -> None:
        for session_id, last in stale:
            row = ctx.txn.get(KIND, session_id)
            if row is not None and not (forward_only and parse_time(row["lastActivityAt"]) >= last):
                new = {**row, "lastActivityAt": format_time(last)}
                ctx.txn.put(KIND, new)
                ctx.changes.append(Change(KIND, session_id, row, new))

    return write


def removal_write(resource: Resource, session_ids: Sequence[str], cause: str) -> Callable[[WriteContext], None]:
    """Delete the sessions that still exist, ended by ``cause`` (what their events name: ``logout``, ``expiry``)."""
    why = {"code": cause}

    def write(ctx: WriteContext) -> None:
        for session_id in session_ids:
            if ctx.txn.exists(KIND, session_id):
                ctx.end_cause(KIND, session_id, why)
                delete_row(ctx, resource, session_id)

    return write


def expiry_write(resource: Resource, session_ids: Sequence[str], timeout: float,
                 grace: float) -> Callable[[WriteContext], list[dict[str, Any]]]:
    """Delete the sessions whose stored activity is older than their lifetime (``row_lifetime``) at the write's
    instant; returns the rows of those that live on (used elsewhere since)."""
    def write(ctx: WriteContext) -> list[dict[str, Any]]:
        kept = []
        for session_id in session_ids:
            row = ctx.txn.get(KIND, session_id)
            if row is None:
                continue
            if parse_time(row["lastActivityAt"]) + row_lifetime(row, timeout, grace) > ctx.now:
                kept.append(row)
            else:
                ctx.end_cause(KIND, session_id, _EXPIRY)
                delete_row(ctx, resource, session_id)
        return kept

    return write


def flags_write(session_id: str, flags: dict[str, bool]) -> Callable[[WriteContext], None]:
    """Set MFA flags (``isMfaRequired``, ``isMfaComplete``) on a session that still exists."""
    def write(ctx: WriteContext) -> None:
        row = ctx.txn.get(KIND, session_id)
        if row is not None:
            ctx.txn.put(KIND, {**row, **flags})

    return write


def ext_jwt_write(session_id: str, until: float) -> Callable[[WriteContext], None]:
    """Record that an external JWT satisfies the session's factor until ``until``; two requests may bring JWTs at
    once: the later expiry wins whatever order their writes commit in."""
    def write(ctx: WriteContext) -> None:
        row = ctx.txn.get(KIND, session_id)
        if row is not None and until > float(row.get(EXT_JWT_UNTIL, -math.inf)):
            ctx.txn.put(KIND, {**row, EXT_JWT_UNTIL: until})

    return write
