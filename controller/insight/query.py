"""Which kept events an operator asks for: by type, identity, service and time, a page at a time.

A filter applies to ``GET /events``, to each ``GET /events/stream`` and to ``tollgate events``:

* ``type``: namespaces (``access``) or types (``access.revoked``), any of them;
* ``identity`` / ``service``: events about that identity or service (its ``identity_id`` / ``service_id``, or an
  entity change of that very entity);
* ``since`` / ``until``: the event's instant is at or after / before (RFC 3339).

Pages go by event id: with ``after`` the first ``limit`` matching events after that id, oldest first; otherwise the
last ``limit`` matching events before ``before`` (default: the newest), still oldest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.clock import format_time, parse_time
from controller.errors import ApiError, field_cause
from controller.insight.event_log import kept_events, latest_id, oldest_id
from controller.insight.kept import KeptEvent
from controller.model.events import NAMESPACES
from storage.store import ReadTxn

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "EventFilter", "EventPage", "page", "paging_numbers", "resume_after"]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class EventFilter:
    """What events to show; empty fields match everything."""

    types: tuple[str, ...] = ()
    identity_id: str | None = None
    service_id: str | None = None
    since: str | None = None  # RFC 3339 as events write it, so that text order is time order
    until: str | None = None

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> EventFilter:
        """From query parameters (one value each; ``type`` may be comma-separated or repeated by the caller).

        Raises:
            ApiError: 400 COULD_NOT_VALIDATE naming the parameter, for an unknown namespace or a bad time.
        """
        types = tuple(t.strip() for t in str(args.get("type") or "").split(",") if t.strip())
        for name in types:
            if not any(name == ns or name.startswith(ns + ".") for ns in NAMESPACES):
                raise ApiError("COULD_NOT_VALIDATE", field_cause(
                    "type", f"unknown event namespace; one of {', '.join(NAMESPACES)}", name))
        return cls(types, _text(args.get("identity")), _text(args.get("service")),
                   _time(args.get("since"), "since"), _time(args.get("until"), "until"))

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether the event (its JSON object) passes every part of the filter."""
        if self.types:
            namespace = str(event.get("namespace"))
            full = f"{namespace}.{event.get('event_type')}"
            if not any(t in (namespace, full) for t in self.types):
                return False
        if self.identity_id is not None and not _about(event, self.identity_id, "identity_id", "identities"):
            return False
        if self.service_id is not None and not _about(event, self.service_id, "service_id", "services"):
            return False
        stamp = str(event.get("timestamp"))
        if self.since is not None and stamp < self.since:
            return False
        return self.until is None or stamp < self.until


def _about(event: Mapping[str, Any], wanted: str, field: str, kind: str) -> bool:
    if event.get(field) == wanted:
        return True
    return event.get("entityType") == kind and event.get("entityId") == wanted


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _time(value: Any, name: str) -> str | None:
    if value is None:  # absent; an empty value is no time, and is refused below
        return None
    try:
        return format_time(parse_time(str(value)))
    except ValueError:
        raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} must be an RFC 3339 time", value)) from None


@dataclass(frozen=True, slots=True)
class EventPage:
    """A page of events, oldest first, and where the log stands."""

    events: list[KeptEvent]
    more: bool  # further matching events lie beyond the page in its direction
    latest_id: int
    oldest_id: int | None

    def meta(self, limit: int) -> dict[str, Any]:
        return {"limit": limit, "more": self.more, "latestEventId": self.latest_id, "oldestEventId": self.oldest_id}


def page(txn: ReadTxn, wanted: EventFilter, *, after: int | None = None, before: int | None = None,
         limit: int = DEFAULT_LIMIT) -> EventPage:
    """The matching kept events after ``after`` (oldest first), or else the last ones before ``before``."""
    found: list[KeptEvent] = []
    more = False
    if after is not None:
        for event in kept_events(txn, after + 1):
            if before is not None and event.id >= before:
                break
            if wanted.matches(event.fields):
                if len(found) == limit:
                    more = True
                    break
                found.append(event)
    else:
        for event in kept_events(txn, None if before is None else before - 1, reverse=True):
            if wanted.matches(event.fields):
                if len(found) == limit:
                    more = True
                    break
                found.append(event)
        found.reverse()
    return EventPage(found, more, latest_id(txn), oldest_id(txn))


def paging_numbers(args: Mapping[str, Any]) -> tuple[int | None, int | None, int]:
    """``after``, ``before`` and ``limit`` (1..:data:`MAX_LIMIT`, default :data:`DEFAULT_LIMIT`) from query
    parameters.

    Raises:
        ApiError: 400 INVALID_PAGINATION naming the parameter.
    """
    values: list[int | None] = []
    for name in ("after", "before", "limit"):
        raw = args.get(name)
        if raw in (None, ""):
            values.append(None)
            continue
        try:
            number = int(str(raw))
        except ValueError:
            raise ApiError("INVALID_PAGINATION", field_cause(name, f"{name} must be a whole number", raw)) from None
        if number < 0 or (name == "limit" and not 1 <= number <= MAX_LIMIT):
            raise ApiError("INVALID_PAGINATION", field_cause(
                name, f"{name} must be {'1 to ' + str(MAX_LIMIT) if name == 'limit' else 'at least 0'}", raw))
        values.append(number)
    after, before, limit = values
    return after, before, DEFAULT_LIMIT if limit is None else limit


def resume_after(header: str | None, query: list[str]) -> int | None:
    """The event id a stream resumes after: the ``Last-Event-ID`` header (what a reconnecting browser sends) or
    else the ``lastEventId`` query parameter, None when neither is given. Every value given must be one event id
    (a non-negative integer), the one not used as well.

    Raises:
        ApiError: COULD_NOT_VALIDATE, naming the value that is not an event id, or a repeated query parameter.
    """
    if len(query) > 1:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("lastEventId", "must be given at most once", query))
    given = [("Last-Event-ID", header), ("lastEventId", query[0] if query else None)]
    found = [(name, value) for name, value in given if value not in (None, "")]
    for name, value in found:
        if not str(value).isdigit():
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, "must be an event id", value))
    return int(str(found[0][1])) if found else None
