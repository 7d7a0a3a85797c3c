"""The console's live stream: ``GET /console/events/stream``, one per open page (``static/console.js`` opens it with
``EventSource``), as Server-Sent Events.

It follows the event log as ``GET /events/stream`` does (:class:`controller.insight.follow.EventFollower`: resumed
after ``Last-Event-ID``, or the ``lastEventId`` the page was rendered at, so that nothing between the page's own
list and the stream is missed) and sends each matching event as the table row the page shows
(``event: row``, the HTML of ``event_row.html``; ``event: gap`` for events no longer kept). Beyond the events:

* ``identity=ID``: only the events of that identity, and ``event: posture`` after each durable write of its posture
  state (the engine's watchers), so that its page reloads what it shows of its posture and its access;
* ``rates=1``: ``event: rates`` every :data:`RATES_SECONDS`, the session requests decided and the sessions revoked
  per second since the last one (the engine's counters);
* a comment every ``--events-heartbeat`` seconds of silence.

The stream is the response (it runs in its request's task, and starts nothing); it ends when the controller stops,
when the console session's API session ends, or when its identity is no longer an administrator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack

import msgspec
import trio
from jinja2 import Template
from quart import Blueprint, Response, current_app, request

from controller.insight import EventFilter, KeptEvent, resume_after
from controller.insight.follow import QUIET, EventFollower, Gap
from controller.runtime.composition import Controller
from web.console.event_rows import describe
from web.console.guard import current

__all__ = ["RATES_SECONDS", "register"]

RATES_SECONDS = 1.0
"""How often a stream with ``rates=1`` sends the rates."""


def _resume() -> int | None:
    return resume_after(request.headers.get("Last-Event-ID"), request.args.getlist("lastEventId"))


def _data(event: str, text: str, event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    lines = "".join(f"data: {line}\n" for line in text.splitlines() or [""])
    return f"{head}event: {event}\n{lines}\n".encode()


class _Rates:
    """Decisions and revocations per second between two readings of the engine's counters."""

    def __init__(self, controller: Controller) -> None:
        self._engine = controller.engine
        self._then, self._decisions, self._revocations = self._read()

    def _read(self) -> tuple[float, int, int]:
        return trio.current_time(), self._engine.decisions, sum(self._engine.revocations.values())

    def frame(self) -> bytes:
        now, decisions, revocations = self._read()
        seconds = max(now - self._then, 1e-9)
        rates = {"decisions": round((decisions - self._decisions) / seconds, 1),
                 "revocations": round((revocations - self._revocations) / seconds, 1)}
        self._then, self._decisions, self._revocations = now, decisions, revocations
        return _data("rates", msgspec.json.encode(rates).decode())


def register(bp: Blueprint, controller: Controller) -> None:
    """Add the live stream to the console's blueprint."""

    async def follow(wanted: EventFilter, resume: int | None, identity_id: str | None, rates: bool,
                     api_session_id: str, admin_id: str, row_template: Template,
                     gap_template: Template) -> AsyncIterator[bytes]:
        async def rows(items: list[KeptEvent | Gap]) -> bytes:
            out = []
            for item in items:
                if isinstance(item, Gap):
                    out.append(_data("gap", await gap_template.render_async(gap=item)))
                else:
                    out.append(_data("row", await row_template.render_async(row=describe(item)), item.id))
            return b"".join(out)

        heartbeat = controller.settings.events_heartbeat
        with controller.events_hub.subscribe() as subscription, ExitStack() as watch:
            if identity_id is not None:
                watch.enter_context(controller.engine.watchers.watch(identity_id, subscription.nudge))
            follower = EventFollower(controller.store, subscription, wanted, resume)
            meter = _Rates(controller) if rates else None  # measured from before the stream's first bytes
            yield b": tollgate console\nretry: 2000\n\n" + await rows(follower.catch_up())
            now = trio.current_time()
            next_rates = now + RATES_SECONDS if meter else float("inf")
            next_beat = now + heartbeat
            while True:
                arrival = QUIET
                with trio.move_on_at(min(next_rates, next_beat)):
                    arrival = await follower.next()
                if controller.sessions.get(api_session_id) is None or not controller.is_admin(admin_id):
                    return  # what the session was shown ends with it, or with its identity's admin rights
                if arrival.closed:
                    return  # the controller is stopping
                out = [await rows(arrival.items)] if arrival.items else []
                if arrival.nudged:
                    out.append(_data("posture", identity_id or ""))
                now = trio.current_time()
                if meter is not None and now >= next_rates:
                    out.append(meter.frame())
                    next_rates = now + RATES_SECONDS
                if out:
                    yield b"".join(out)
                elif now >= next_beat:
                    yield b": heartbeat\n\n"
                else:
                    continue
                next_beat = now + heartbeat

    @bp.get("/events/stream")
    async def event_stream() -> Response:
        identity_id = request.args.get("identity") or None
        wanted = EventFilter(identity_id=identity_id)
        admitted = current()
        # The body is sent after this handler returns, outside the request's context: its row templates, which use
        # nothing of that context, are looked up now.
        templates = current_app.jinja_env
        body = follow(wanted, _resume(), identity_id, request.args.get("rates") == "1", admitted.live.id,
                      admitted.live.identity_id, templates.get_template("console/event_row.html"),
                      templates.get_template("console/event_gap.html"))
        response = Response(body, mimetype="text/event-stream",
                            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        response.timeout = None  # a stream lasts as long as its page is open
        return response
