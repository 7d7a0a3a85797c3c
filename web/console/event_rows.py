"""Events as the console's tables show them: one row per event (its id, instant, type, the identity and service it
is about, and one line saying what happened and why), read from the kept events (``GET /events``'s query) or made
from an event as the live stream passes it on.

The line is built from the event's own fields (``controller/insight/catalog.py`` names them): a cause's code and the
rule of each failing check in words, the fields an entity change touched, who did it. Events never carry secrets;
the line shows nothing the event does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.insight import EventFilter, KeptEvent, page
from storage.store import Store

__all__ = ["RECENT_EVENTS", "EventRow", "describe", "recent_rows"]

RECENT_EVENTS = 20
"""How many of the latest events a page lists when it opens (live ones are added above them)."""


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event as a table row."""

    id: int
    at: str
    type: str
    what: str
    identity_id: str | None
    service_id: str | None


def _cause(cause: Any) -> str:
    if not isinstance(cause, Mapping):
        return ""
    parts = [str(cause.get("code") or "")]
    for key in ("reason", "apiSessionCause", "by", "event"):
        if cause.get(key):
            parts.append(f"{key} {cause[key]}")
    if cause.get("at"):
        parts.append(f"at {cause['at']}")
    checks = [_check(check) for check in cause.get("checks") or () if isinstance(check, Mapping)]
    text = ", ".join(part for part in parts if part)
    return text + (": " + "; ".join(checks) if checks else "")


def _check(check: Mapping[str, Any]) -> str:
    name = check.get("postureCheckName") or check.get("postureCheckId") or "a check"
    rule = check.get("rule")
    return f"{name} ({rule})" if rule else str(name)


def _session(fields: Mapping[str, Any]) -> str:
    return f"{fields.get('session_type') or ''} session {fields.get('session_id') or fields.get('id') or ''}".strip()


def _line(namespace: str, event_type: str, fields: Mapping[str, Any]) -> str:
    full = f"{namespace}.{event_type}"
    cause = _cause(fields.get("cause"))
    match full:
        case "edge.apiSessions.created":
            return f"API session {fields.get('id')} started from {fields.get('ip_address') or 'an unknown address'}"
        case "edge.apiSessions.deleted":
            return f"API session {fields.get('id')} ended: {cause}"
        case "edge.sessions.created":
            policies = ", ".join(str(p) for p in fields.get("service_policy_ids") or ())
            return f"{_session(fields)} granted through policy {policies}"
        case "edge.sessions.deleted":
            return f"{_session(fields)} ended with its API session: {cause}"
        case "access.revoked":
            return f"{_session(fields)} revoked: {cause}"
        case "posture.denied":
            return f"{fields.get('session_type')} request refused: {cause}"
        case "posture.wouldDeny":
            checks = "; ".join(_check(c) for c in fields.get("checks") or () if isinstance(c, Mapping))
            return f"report-only checks would have refused the {fields.get('decision')}: {checks}"
        case "authentication.fail":
            return f"{fields.get('type')} login refused: {fields.get('reason')}"
        case "mfa.passed":
            return f"MFA passed ({fields.get('method')}) by API session {fields.get('api_session_id')}"
        case "mfa.failed":
            locked = " (locked out)" if fields.get("locked_out") else ""
            return f"MFA code refused on {fields.get('operation')}: {fields.get('reason')}{locked}"
        case "mfa.enrolled":
            return "MFA enrolment completed"
        case "mfa.removed":
            return f"MFA enrolment removed by {fields.get('by')}"
    if namespace == "entityChange":
        metadata = fields.get("metadata")
        author = metadata if isinstance(metadata, Mapping) else {}
        who = author.get("author.name") or author.get("author.id") or "the controller"
        changed = fields.get("changedFields")
        touched = f" ({', '.join(str(f) for f in changed)})" if changed else ""
        return f"{fields.get('entityType')} {fields.get('entityId')} {event_type}{touched} by {who}"
    return cause or full


def describe(event: KeptEvent) -> EventRow:
    """The row of ``event``."""
    fields = event.fields
    namespace, event_type = str(fields.get("namespace")), str(fields.get("event_type"))
    identity = fields.get("identity_id")
    service = fields.get("service_id")
    if namespace == "entityChange":
        identity = fields.get("entityId") if fields.get("entityType") == "identities" else None
        service = fields.get("entityId") if fields.get("entityType") == "services" else None
    return EventRow(event.id, str(fields.get("timestamp")), f"{namespace}.{event_type}",
                    _line(namespace, event_type, fields), str(identity) if identity else None,
                    str(service) if service else None)


def recent_rows(store: Store, wanted: EventFilter, limit: int = RECENT_EVENTS) -> tuple[list[EventRow], int]:
    """The latest ``limit`` kept events matching ``wanted``, newest first, and the id of the last event recorded
    (where a live stream of the page goes on from)."""
    with store.read() as txn:
        found = page(txn, wanted, limit=limit)
    return [describe(event) for event in reversed(found.events)], found.latest_id
