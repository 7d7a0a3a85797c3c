"""Disabling an identity: by an admin (``POST /identities/{id}/disable`` and ``/enable``) or by a login lockout.

Disabled is a time window on the identity row (``disabledAt``, ``disabledUntil``) read at every login, so a timed
disable lapses by itself without any task; disabling also ends the identity's API sessions at once.
"""

from __future__ import annotations

from typing import Any

from controller.authentication.api_sessions import KIND as API_SESSIONS
from controller.clock import format_time
from controller.data.domain import Domain
from controller.data.write_path import delete_row, put_row
from controller.errors import ApiError, field_cause, not_found
from controller.model.field import Mode
from controller.model.spec import WriteContext
from controller.model.validation import SchemaCheck
from controller.resources.identities import IDENTITIES, identity_disabled

__all__ = ["DISABLE_SCHEMA", "disable", "disable_identity", "enable_identity"]


DISABLE_SCHEMA: dict[str, Any] = {"type": "object", "required": ["durationMinutes"],
                                  "properties": {"durationMinutes": {"type": "integer"}}}
_disable_check = SchemaCheck.of(DISABLE_SCHEMA)


async def disable_identity(domain: Domain, identity_id: str, body: Any) -> None:
    """``POST /identities/{id}/disable``: disabled from now for ``durationMinutes`` (0 or less: indefinitely).

    The identity's API sessions end at once. The default admin cannot be disabled: that would lock every operator
    out (400 COULD_NOT_VALIDATE on ``id``).
    """
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("disable", "disable in body is required", None))
    _disable_check.validate(body)
    await disable(domain, identity_id, int(body["durationMinutes"]))


async def disable(domain: Domain, identity_id: str, minutes: int, *, lockout: bool = False) -> bool:
    """Disable from now for ``minutes`` (0 or less: indefinitely) and end the identity's API sessions, in one
    write: a crash can never leave a disabled identity with a session that works after the restart.

    A ``lockout`` (a login's wrong password, ``lockout.py``) decides on the row as it is when the write runs, and
    does nothing to an identity deleted since the login read it, to the default admin, or to one already disabled
    (it must not shorten or lengthen what an admin or an earlier lockout set); returns whether it disabled.
    An admin's disable raises instead: 404 for an unknown id, 400 for the default admin.
    """
    resource = domain.registry[IDENTITIES.kind]

    def write(ctx: WriteContext) -> bool:
        old = ctx.txn.get(IDENTITIES.kind, identity_id)
        if lockout and (old is None or old.get("isDefaultAdmin") or identity_disabled(old, ctx.now)):
            return False
        if old is None:
            raise not_found(resource.singular, identity_id)
        if old.get("isDefaultAdmin"):
            raise ApiError("COULD_NOT_VALIDATE", field_cause("id", "the default admin cannot be disabled",
                                                             identity_id))
        # Capped at about 1900 years so that any integer a client sends stays a representable timestamp.
        until = format_time(ctx.now + min(minutes, 10**9) * 60) if minutes > 0 else None
        row = {**old, "disabledAt": format_time(ctx.now), "disabledUntil": until, "updatedAt": format_time(ctx.now)}
        put_row(ctx, resource, row, old, Mode.PATCH)
        sessions = ctx.registry[API_SESSIONS]
        why = {"code": "lockout" if lockout else "disable",
               "by": ctx.author.identity_id if ctx.author is not None and not lockout else None}
        for session_id in ctx.txn.ids_by_ref(API_SESSIONS, "identityId", identity_id):
            # Their tokens are refused once this commits: the controller forgets the deleted sessions then.
            ctx.end_cause(API_SESSIONS, session_id, why)
            delete_row(ctx, sessions, session_id)
        return True

    disabled: bool = await domain.write(write)
    return disabled


async def enable_identity(domain: Domain, identity_id: str) -> None:
    """``POST /identities/{id}/enable``: clear both disabled timestamps (a no-op on an enabled identity)."""
    resource = domain.registry[IDENTITIES.kind]

    def write(ctx: WriteContext) -> None:
        old = ctx.txn.get(IDENTITIES.kind, identity_id)
        if old is None:
            raise not_found(resource.singular, identity_id)
        if old.get("disabledAt") is None and old.get("disabledUntil") is None:
            return
        row = {**old, "disabledAt": None, "disabledUntil": None, "updatedAt": format_time(ctx.now)}
        put_row(ctx, resource, row, old, Mode.PATCH)

    await domain.write(write)
