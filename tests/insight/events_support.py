"""Reading the events a controller recorded, for the insight tests: straight from the store, as the sinks read them."""

from __future__ import annotations

from typing import Any

from controller.insight import kept_events, latest_id
from controller.insight.catalog import event_fields
from controller.runtime.composition import Controller

__all__ = ["mark", "named", "of_type", "since"]


def mark(controller: Controller) -> int:
    """The id of the last event recorded so far (0 before any)."""
    with controller.store.read() as txn:
        return latest_id(txn)


def since(controller: Controller, after: int = 0) -> list[dict[str, Any]]:
    """Every kept event after id ``after``, oldest first, each checked against the catalog: exactly the envelope
    and its type's fields, ids one apart."""
    with controller.store.read() as txn:
        found = [dict(event.fields) for event in kept_events(txn, after + 1)]
    for event in found:
        name = f"{event['namespace']}.{event['event_type']}"
        assert set(event) == event_fields(name), (name, set(event) ^ event_fields(name))
    ids = [event["event_id"] for event in found]
    assert ids == list(range(after + 1, after + 1 + len(ids))), ids
    return found


def named(events: list[dict[str, Any]]) -> list[str]:
    """``namespace.event_type`` of each event, in order."""
    return [f"{e['namespace']}.{e['event_type']}" for e in events]


def of_type(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if f"{e['namespace']}.{e['event_type']}" == name]
