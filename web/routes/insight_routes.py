"""Seeing why, on the Management API (administrators only; our own operations, in our OpenAPI document):

* ``GET /events``: the kept events (``--events-keep``), filtered by ``type``, ``identity``, ``service``, ``since``
  and ``until``, a page at a time by id (``after`` / ``before``, ``limit``);
* ``GET /events/stream``: the same events live, as Server-Sent Events (``id:`` the event id, ``data:`` the event's
  JSON); a client that comes back with ``Last-Event-ID`` first gets the kept events after it (a ``gap`` event names
  any that are no longer kept), and a comment line keeps a quiet stream alive every ``--events-heartbeat`` seconds.
  The stream runs in its request's own task and ends when the controller stops or the caller's API session ends;
* ``GET /identities/{id}/access/{serviceId}``: why the identity can or cannot use the service now
  (``controller/insight/access_explained.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import trio
from quart import Blueprint, Response, request

from controller.insight import EventFilter, KeptEvent, page, paging_numbers, resume_after
from controller.insight.access_explained import explain_identity_access
from controller.insight.catalog import ACCESS_EXPLANATION, EVENT
from controller.insight.follow import QUIET, EventFollower, Gap
from controller.runtime.composition import Controller
from web.envelope import ok
from web.guards import Access, current_session
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_STRING: dict[str, Any] = {"type": "string"}
_FILTERS: dict[str, dict[str, Any]] = {
    "type": {**_STRING, "description": "namespaces (access) or types (access.revoked), comma-separated"},
    "identity": {**_STRING, "description": "events about this identity (id)"},
    "service": {**_STRING, "description": "events about this service (id)"},
    "since": {**_STRING, "format": "date-time", "description": "at or after this instant"},
    "until": {**_STRING, "format": "date-time", "description": "before this instant"},
}
_PAGING: dict[str, dict[str, Any]] = {
    "after": {"type": "integer", "description": "the first events after this id, oldest first"},
    "before": {"type": "integer", "description": "the last events before this id (default: the newest)"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "events per page (100)"},
}


def _filter() -> EventFilter:
    args = request.args
    return EventFilter.parse({"type": ",".join(args.getlist("type")), **{
        name: args.get(name) for name in ("identity", "service", "since", "until")}})


def _resume_id() -> int | None:
    return resume_after(request.headers.get("Last-Event-ID"), request.args.getlist("lastEventId"))


def _frames(items: list[KeptEvent | Gap]) -> bytes:
    out = []
    for item in items:
        if isinstance(item, Gap):
            gap = {"firstMissing": item.first, "lastMissing": item.last}
            out.append(b"event: gap\ndata: %s\n\n" % msgspec.json.encode(gap))
        else:
            out.append(b"id: %d\ndata: %s\n\n" % (item.id, item.data))
    return b"".join(out)


async def _stream(controller: Controller, wanted: EventFilter, resume: int | None,
                  api_session_id: str) -> AsyncIterator[bytes]:
    """The event stream's body (see the module docstring)."""
    heartbeat = controller.settings.events_heartbeat
    with controller.events_hub.subscribe() as subscription:
        follower = EventFollower(controller.store, subscription, wanted, resume)
        yield b": tollgate events\nretry: 2000\n\n" + _frames(follower.catch_up())
        while True:
            arrival = QUIET
            with trio.move_on_after(heartbeat):
                arrival = await follower.next()
            if not arrival.lagged and controller.sessions.get(api_session_id) is None:
                return  # the caller's API session ended: so does what it was shown
            if arrival.closed:
                return  # the controller is stopping
            if arrival.timed_out:
                yield b": heartbeat\n\n"
            elif arrival.items:
                yield _frames(arrival.items)


def register(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    """Add the event and access-explanation operations to the management blueprint."""
    group = RouteGroup(routes, bp, "management", tag="Events", access=Access.ADMIN)

    async def list_events() -> Response:
        wanted = _filter()
        after, before, limit = paging_numbers(request.args)
        with controller.store.read() as txn:
            found = page(txn, wanted, after=after, before=before, limit=limit)
        return ok([msgspec.Raw(event.data) for event in found.events], found.meta(limit))

    async def stream_events() -> Response:
        wanted = _filter()
        resume = _resume_id()
        body = _stream(controller, wanted, resume, current_session().id)
        response = Response(body, mimetype="text/event-stream",
                            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        response.timeout = None  # a stream lasts as long as its client listens
        return response

    async def explain(id: str, serviceId: str) -> Response:
        return ok(await explain_identity_access(controller.domain, controller.posture, id, serviceId,
                                                request.args.get("apiSessionId") or None,
                                                evaluate_posture=controller.settings.evaluate_posture))

    group.add("GET", "/events", "listEvents", list_events, query={**_FILTERS, **_PAGING},
              summary="The kept events, filtered and paged by id (oldest first in each page; meta: limit, more, "
                      "latestEventId, oldestEventId)",
              data={"type": "array", "items": EVENT})
    group.add("GET", "/events/stream", "streamEvents", stream_events,
              query={**_FILTERS, "lastEventId": {"type": "integer", "description": "as the Last-Event-ID header"}},
              headers={"Last-Event-ID": {"type": "integer",
                                         "description": "resume after this event (Server-Sent Events)"}},
              summary="The events as they happen, as Server-Sent Events: 'id:' the event id, 'data:' its JSON; "
                      "resumes after Last-Event-ID from the kept events; a comment line every heartbeat",
              # No body schema: Swagger 2.0 has no way to describe a stream of events, and "string" would tell
              # clients that read one (as schemathesis does) to expect a single value.
              produces="text/event-stream", raw=True)
    group.add("GET", "/identities/{id}/access/{serviceId}", "explainIdentityAccess", explain, tag="Identity",
              query={"apiSessionId": {**_STRING, "description": "the API session whose MFA state counts (default: "
                                                                "the identity's newest)"}},
              summary="Why the identity can or cannot dial or bind the service now: the policies, checks and "
                      "verdicts a session request would get, the next change, and what to do",
              data=ACCESS_EXPLANATION)
