"""The events of one write: those its producers recorded, and those its changes make, in the order they happened.

A change makes an event by its kind:

* ``api-sessions``: ``edge.apiSessions`` ``created`` / ``deleted`` (with the cause its producer gave: ``logout``,
  ``expiry``, ``disable``, ``lockout``; else ``deleted``, by the write's author when there is one);
* ``sessions``: ``edge.sessions`` ``created``; a session that ends is either ``edge.sessions`` ``deleted`` (its API
  session ended by logout or expiry) or, taken away for any other reason, ``access`` ``revoked`` naming the cause
  (the posture engine's, the end of its API session by a disable or lockout, a delete): one event per change;
* every other resource kind: ``entityChange`` ``created`` / ``updated`` / ``deleted``, naming the entity, the fields
  an update changed and who made the change, never the entity's values (some hold secrets).

Field names are OpenZiti's for its namespaces (``identity_id``, ``api_session_id``, ``entityType``); the same names
are used for Tollgate's own. Tokens are never copied from a row. Sessions created and revoked, the commonest
events, are arrays of their values (``controller/insight/kept.py``: ``POSITIONAL`` names them, in this order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.insight.kept import Values
from controller.model.events import ACCESS, API_SESSIONS, ENTITY_CHANGE, SESSIONS, Author, Cause
from controller.model.spec import Change, WriteContext

__all__ = ["CLIENT_ENDED", "NOT_ENTITIES", "Derived", "derive", "metadata"]

Derived = tuple[str, str, Values]
"""An event before it is numbered: namespace, type, fields (a dict, or the values ``POSITIONAL`` names)."""

API_SESSION_KIND = "api-sessions"
SESSION_KIND = "sessions"
NOT_ENTITIES = frozenset({API_SESSION_KIND, SESSION_KIND, "api-session-certificates"})
"""Kinds whose changes are not entity changes: sessions and API sessions have namespaces of their own, and an API
session's certificates are part of its login."""
CLIENT_ENDED = frozenset({"logout", "expiry"})
"""API-session end causes that are the client's doing: the sessions they take along are not revocations."""
_ACCOUNT_ENDED = {"disable": "identityDisabled", "lockout": "identityLockedOut"}
_SKIPPED_FIELDS = frozenset({"updatedAt"})


def derive(ctx: WriteContext) -> list[Derived]:
    """Every event of the write ``ctx`` describes, in order: each recorded event at its place among the changes."""
    out: list[Derived] = []
    recorded = ctx.events or ()
    position = 0
    authored: list[dict[str, Any]] = []  # the write's metadata, once an entity change needs it
    causes = ctx.causes
    for index, change in enumerate(ctx.changes):
        while position < len(recorded) and recorded[position][0] <= index:
            event = recorded[position][1]
            out.append((event.namespace, event.event_type, event.fields))
            position += 1
        before, after = change.before, change.after
        # The commonest changes with an event, inline: a session created (every granted decision), and one revoked
        # with its cause (the posture engine's).
        if change.kind == SESSION_KIND and before is None and after is not None:
            out.append((SESSIONS, "created", (change.id, after.get("type"), "legacy", after.get("apiSessionId"),
                                              after.get("identityId"), after.get("serviceId"),
                                              after.get("servicePolicies") or ())))
        elif causes is not None and after is None and change.kind == SESSION_KIND and before is not None and (
                cause := causes.get((SESSION_KIND, change.id))) is not None:
            out.append((ACCESS, "revoked", (before.get("identityId"), change.id, before.get("apiSessionId"),
                                            before.get("serviceId"), before.get("type"), cause)))
        else:
            _from_change(ctx, change, out, authored)
    for _, event in recorded[position:]:
        out.append((event.namespace, event.event_type, event.fields))
    return out


def metadata(author: Author | None, name: str | None) -> dict[str, Any]:
    """Who made a change, in OpenZiti's ``metadata`` keys: an identity (with its API session) or the controller."""
    if author is None:
        return {"author.type": "controller"}
    return {"author.type": "identity", "author.id": author.identity_id, "author.name": name,
            "author.apiSessionId": author.api_session_id}


def _from_change(ctx: WriteContext, change: Change, out: list[Derived], authored: list[dict[str, Any]]) -> None:
    kind = change.kind
    if kind == SESSION_KIND:
        _session(ctx, change, out)
    elif kind == API_SESSION_KIND:
        _api_session(ctx, change, out)
    elif kind in ctx.registry.resources:
        if not authored:
            author = ctx.author
            identity = ctx.txn.get("identities", author.identity_id) if author is not None else None
            authored.append(metadata(author, identity.get("name") if identity is not None else None))
        out.append(_entity(change, authored[0]))


def _cause(ctx: WriteContext, kind: str, row_id: str) -> Cause | None:
    causes = ctx.causes
    return causes.get((kind, row_id)) if causes is not None else None


def _code(cause: Cause | None) -> Any:
    """The code of an API session's end cause (always a map)."""
    return cause.get("code") if isinstance(cause, Mapping) else None


def _by_author(ctx: WriteContext) -> dict[str, Any]:
    author = ctx.author
    return {"code": "deleted", "by": author.identity_id if author is not None else None}


def _api_session(ctx: WriteContext, change: Change, out: list[Derived]) -> None:
    row = change.after if change.after is not None else change.before
    assert row is not None  # a change always has one side
    fields: dict[str, Any] = {"id": change.id, "type": "legacy", "identity_id": row.get("identityId"),
                              "ip_address": row.get("ipAddress"), "authenticator_id": row.get("authenticatorId")}
    if change.after is None:
        fields["cause"] = _cause(ctx, API_SESSION_KIND, change.id) or _by_author(ctx)
        out.append((API_SESSIONS, "deleted", fields))
    elif change.before is None:
        out.append((API_SESSIONS, "created", fields))


def _session(ctx: WriteContext, change: Change, out: list[Derived]) -> None:
    """A session ended (one created is :func:`derive`'s): ``access`` ``revoked`` when it was taken away, else
    ``edge.sessions`` ``deleted`` (its API session ended by logout or expiry). One event per change."""
    after, before = change.after, change.before
    if before is None or after is not None:
        return
    cause = _cause(ctx, SESSION_KIND, change.id)
    revoked = True
    if cause is None:
        api_session_id = str(before.get("apiSessionId"))
        ended = _cause(ctx, API_SESSION_KIND, api_session_id)
        code = _code(ended)
        if code in CLIENT_ENDED:
            cause, revoked = {"code": "apiSessionEnded", "apiSessionCause": code}, False
        elif code in _ACCOUNT_ENDED and isinstance(ended, Mapping):
            cause = {"code": _ACCOUNT_ENDED[str(code)], "by": ended.get("by")}
        elif not ctx.txn.exists(API_SESSION_KIND, api_session_id):
            cause = {"code": "apiSessionDeleted", "by": ctx.author.identity_id if ctx.author else None}
        else:
            cause = _by_author(ctx)
    if revoked:
        out.append((ACCESS, "revoked", (before.get("identityId"), change.id, before.get("apiSessionId"),
                                        before.get("serviceId"), before.get("type"), cause)))
    else:
        out.append((SESSIONS, "deleted", {
            "id": change.id, "session_type": before.get("type"), "provider": "legacy",
            "api_session_id": before.get("apiSessionId"), "identity_id": before.get("identityId"),
            "service_id": before.get("serviceId"), "cause": cause}))


def _entity(change: Change, meta: dict[str, Any]) -> Derived:
    before, after = change.before, change.after
    event_type = "created" if before is None else "deleted" if after is None else "updated"
    fields: dict[str, Any] = {"eventType": event_type, "entityType": change.kind, "entityId": change.id,
                              "isParentEvent": False}
    if before is not None and after is not None:
        # Names only: the values of some fields are secrets (hashes, enrollment token digests, TOTP data).
        names = {key.lstrip("_") for key in before.keys() | after.keys()
                 if key not in _SKIPPED_FIELDS and before.get(key) != after.get(key)}
        fields["changedFields"] = sorted(names)
    fields["metadata"] = dict(meta)
    return ENTITY_CHANGE, event_type, fields
