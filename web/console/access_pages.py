"""Why an identity can or cannot use a service now: ``/console/identities/<id>/access/<serviceId>``, every fact of
``GET /identities/{id}/access/{serviceId}`` (:func:`controller.insight.access_explained.explain_identity_access`,
the function that route answers with), and the service picker that leads there.

The page shows, for Dial and Bind, the one-line verdict, each service policy linking them and the role entries it
links them through, each posture check's verdict (the failing rule in words, what was reported, when and by which
API session, what would pass it), the next deadline that changes the answer with the time left, and what the
identity must do; then the edge routers in common and whether each is online. ``?apiSessionId=`` evaluates the MFA
state of another of the identity's API sessions.

Live, with ``static/console.js``: the deadline counts down in the browser, and the answer (the ``#access`` region,
re-read as a partial) is refreshed when the deadline passes, when an event of the identity arrives on the page's
stream, or when its posture state is written. Without JavaScript, reloading the page does the same.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.clock import parse_time
from controller.insight import EventFilter
from controller.insight.access_explained import explain_identity_access
from controller.runtime.composition import Controller
from web.console.event_rows import recent_rows
from web.console.reading import StoreChoices
from web.console.rendering import htmx_target, page, query_url, see_other

__all__ = ["ACCESS_EVENTS", "register"]

ACCESS_EVENTS = 10
"""How many of the identity's latest events the access page lists."""


def _name(row: dict[str, Any]) -> str:
    return str(row.get("name") or row["id"])


def register(bp: Blueprint, controller: Controller) -> None:
    """Add the access explanation and the service picker to the console's blueprint."""
    domain = controller.domain

    async def picker(identity_id: str, wanted: str = "", error: str = "", status: int = 200) -> Response:
        identity = domain.detail("identities", identity_id)
        return await page("access_pick.html", status, title=f"Access of {_name(identity)}", identity_id=identity_id,
                          services=StoreChoices(domain).rows("services"), wanted=wanted, error=error)

    @bp.get("/identities/<id>/access")
    async def access_pick(id: str) -> Response:
        wanted = (request.args.get("service") or "").strip()
        if not wanted:
            return await picker(id)
        domain.detail("identities", id)
        found = StoreChoices(domain).resolve("services", wanted)
        if found is None:
            return await picker(id, wanted, f"No service has the name or id {wanted}.", 404)
        return see_other(f"/console/identities/{id}/access/{found}")

    @bp.get("/identities/<id>/access/<serviceId>")
    async def access(id: str, serviceId: str) -> Response:
        api_session_id = request.args.get("apiSessionId") or None
        explained = await explain_identity_access(domain, controller.posture, id, serviceId, api_session_id,
                                                  evaluate_posture=controller.settings.evaluate_posture)
        now = controller.clock.now()
        left = {t["type"]: max(0, round(parse_time(t["nextChange"]["at"]) - now))
                for t in explained["sessionTypes"] if t["nextChange"]}
        path = f"/console/identities/{id}/access/{serviceId}"
        context: dict[str, Any] = {"x": explained, "left": left, "identity_id": id, "service_id": serviceId,
                                   "self_url": query_url(path, {"apiSessionId": api_session_id}), "path_base": path}
        title = f"Can {explained['identity']['name']} use {explained['service']['name']}?"
        if htmx_target() == "access":
            return await page("access_answer.html", title=title, **context)
        events, latest = recent_rows(controller.store, EventFilter(identity_id=id), ACCESS_EVENTS)
        stream = query_url("/console/events/stream", {"identity": id, "lastEventId": latest})
        return await page("access.html", title=title, events=events, stream=stream, **context)
