"""Seeing why: the event log (every change of access and every security-relevant action as a numbered event, kept
in the store), its sinks (the JSON-lines file, the live subscriptions behind ``GET /events/stream``), the queries
of ``GET /events``, and the access explanation of ``GET /identities/{id}/access/{serviceId}``.

* ``derive``: the events of one write, from what its producers recorded and from its changes;
* ``event_log``, ``kept``: numbering, storing and trimming events in the write's transaction; reading them back;
* ``hub``: committed events handed to live subscribers; ``file_sink``: the event file, written behind;
* ``query``: filters and pages over the kept events;
* ``catalog``: every event type and its fields, as the OpenAPI document and the README describe them;
* ``access_explained``: why an identity can or cannot use a service now.

Producers below it record events through ``controller.model.events`` and ``WriteContext``; the domain reaches the
log only through its ``Journal`` interface. It imports posture, authentication-free parts of the domain (data,
access, model) and storage; the runtime and the web layer build on it.
"""

from controller.insight.event_log import EVENTS_KIND, LAYOUTS, EventLog, kept_events, latest_id
from controller.insight.file_sink import EventFile, write_events_behind
from controller.insight.hub import EventHub, Lagged, Subscription
from controller.insight.kept import KeptEvent
from controller.insight.query import EventFilter, EventPage, page, paging_numbers, resume_after

__all__ = [
    "EVENTS_KIND",
    "LAYOUTS",
    "EventFile",
    "EventFilter",
    "EventHub",
    "EventLog",
    "EventPage",
    "KeptEvent",
    "Lagged",
    "Subscription",
    "kept_events",
    "latest_id",
    "page",
    "paging_numbers",
    "resume_after",
    "write_events_behind",
]
