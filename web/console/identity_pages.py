"""What an identity's page shows beyond every kind's detail, and what an admin does there.

* Its enrolments: each one's JWT to download and as a QR code (an SVG made with segno, no JavaScript), its expiry,
  and a button that gives it a new token and expiry (an expired one included: ``POST /enrollments/{id}/refresh``);
  a new one-time-token enrolment when it has none (``POST /enrollments``).
* Its MFA enrolment, and a reset (``DELETE /identities/{id}/mfa``).
* Its posture data, each record with when and by which API session it was reported, read from the identity's actor
  (:meth:`controller.posture.engine.PostureEngine.state`, as ``GET /identities/{id}/posture-data``); htmx reloads
  that section when the page's live stream (``web/console/live_pages.py``) says the identity's posture state was
  written or one of its events arrived, so a report shows up without reloading the page.
* Its latest events (``GET /events?identity=``), and the live ones added as they happen (the page's stream).
* A service picker leading to the access explanation (``web/console/access_pages.py``).
* Its API sessions (their rows, and whether each is live) and its last failed service requests.
"""

from __future__ import annotations

from typing import Any

import segno
from quart import Blueprint, Response

from controller.authentication import API_SESSIONS
from controller.authentication.enrollment_admin import create_enrollment, refresh
from controller.clock import format_time
from controller.errors import ApiError, not_found
from controller.insight import EventFilter
from controller.posture.records import PostureData
from controller.resources.enrollments import ENROLLMENT_SECONDS
from controller.runtime.composition import Controller
from web.console.event_rows import recent_rows
from web.console.guard import current
from web.console.kind_pages import DetailPage, detail_context
from web.console.reading import StoreChoices
from web.console.rendering import api_message, htmx_target, page, query_url, see_other

__all__ = ["IDENTITY_EVENTS", "register"]

IDENTITY_EVENTS = 20
"""How many of the identity's latest events its page lists when it opens."""


def _time(value: float | None) -> str:
    return format_time(value) if value is not None else "—"


def posture_records(posture: PostureData) -> list[dict[str, str]]:
    """The identity's posture data, one entry per record: what was reported, when, and by which API session."""
    out: list[dict[str, str]] = []
    if posture.os is not None:
        build = f" (build {posture.os.build})" if posture.os.build else ""
        out.append({"type": "OS", "value": f"{posture.os.type} {posture.os.version}{build}",
                    "at": _time(posture.os.last_updated_at), "session": posture.os.reported_by})
    if posture.mac is not None:
        out.append({"type": "MAC", "value": ", ".join(posture.mac.addresses) or "—",
                    "at": _time(posture.mac.last_updated_at), "session": posture.mac.reported_by})
    if posture.domain is not None:
        out.append({"type": "DOMAIN", "value": posture.domain.domain or "—",
                    "at": _time(posture.domain.last_updated_at), "session": posture.domain.reported_by})
    for check_id, process in posture.processes.items():
        state = "running" if process.is_running else "not running"
        out.append({"type": "PROCESS", "value": f"{process.path or '?'} {state} (check {check_id})",
                    "at": _time(process.last_updated_at), "session": process.reported_by})
    return out


def _qr_svg(text: str, title: str) -> str:
    """The QR code of ``text`` as inline SVG, titled for assistive technology."""
    return str(segno.make(text, error="m", micro=False).svg_inline(scale=3, title=title, svgclass="qr",
                                                                   omitsize=False))


def register(bp: Blueprint, controller: Controller) -> DetailPage:
    """Add the identity page's sections and actions to the console's blueprint; returns the identity's detail page
    (which every kind's detail route shows for identities)."""
    domain = controller.domain

    def enrollments(identity_id: str) -> list[dict[str, Any]]:
        now = controller.clock.now()
        with domain.read() as ctx:
            rows = ctx.txn.get_many("enrollments", ctx.txn.ids_by_ref("enrollments", "identityId", identity_id))
        out = []
        for row in rows:
            shown = domain.detail("enrollments", str(row["id"]))
            jwt = str(shown.get("jwt") or "")
            expired = bool(shown.get("expiresAt")) and str(shown["expiresAt"]) <= format_time(now)
            out.append({"id": row["id"], "method": row.get("method"), "expiresAt": shown.get("expiresAt"),
                        "expired": expired, "jwt": jwt,
                        "qr": _qr_svg(jwt, f"QR code of the {row.get('method')} enrolment JWT") if jwt else ""})
        return out

    def api_sessions(identity_id: str) -> list[dict[str, Any]]:
        with domain.read() as ctx:
            rows = ctx.txn.get_many(API_SESSIONS, ctx.txn.ids_by_ref(API_SESSIONS, "identityId", identity_id))
        return [{"id": row["id"], "createdAt": row.get("createdAt"), "ip": row.get("ipAddress") or "—",
                 "lastActivityAt": row.get("lastActivityAt"), "mfa": bool(row.get("isMfaComplete")),
                 "live": controller.sessions.get(str(row["id"])) is not None} for row in rows]

    async def posture_context(identity_id: str) -> dict[str, Any]:
        if not domain.exists("identities", identity_id):
            raise not_found("identity", identity_id)
        state = await controller.posture.state(identity_id)
        return {"identity_id": identity_id, "records": posture_records(state.posture),
                "failures": [dict(f) for f in state.failures]}

    async def identity_page(id: str) -> Response:
        context = detail_context(controller, "identities", id)
        mfa = controller.mfa.record(id)
        events, latest = recent_rows(controller.store, EventFilter(identity_id=id), IDENTITY_EVENTS)
        stream = query_url("/console/events/stream", {"identity": id, "lastEventId": latest})
        return await page("identity.html", **context, enrollments=enrollments(id), api_sessions=api_sessions(id),
                          mfa=None if mfa is None else {"verified": bool(mfa.get("isVerified"))},
                          events=events, stream=stream, services=StoreChoices(domain).rows("services"), wanted="",
                          error="", **await posture_context(id))

    @bp.get("/identities/<id>/posture")
    async def posture_section(id: str) -> Response:
        template = "posture.html" if htmx_target() == "posture" else "posture_page.html"
        return await page(template, title="Posture data", **await posture_context(id))

    @bp.get("/identities/<id>/enrollments/<enrollment_id>/jwt")
    async def enrollment_jwt(id: str, enrollment_id: str) -> Response:
        shown = domain.detail("enrollments", enrollment_id)
        if shown.get("identityId") != id or not shown.get("jwt"):
            raise not_found("enrollment", enrollment_id)
        name = str(domain.detail("identities", id).get("name") or id)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "identity"
        return Response(str(shown["jwt"]), content_type="application/jwt",
                        headers={"Content-Disposition": f'attachment; filename="{safe}.jwt"'})

    def expiry() -> str:
        return format_time(controller.clock.now() + ENROLLMENT_SECONDS)

    async def done(id: str, message: str) -> Response:
        current().session.messages.append(message)
        return see_other(f"/console/identities/{id}")

    @bp.post("/identities/<id>/enrollments/<enrollment_id>/reissue")
    async def reissue(id: str, enrollment_id: str) -> Response:
        if domain.detail("enrollments", enrollment_id).get("identityId") != id:
            raise not_found("enrollment", enrollment_id)
        await refresh(controller, enrollment_id, {"expiresAt": expiry()})
        return await done(id, "The enrolment has a new token and expiry; the old JWT no longer works.")

    @bp.post("/identities/<id>/enrollments")
    async def new_enrollment(id: str) -> Response:
        try:
            await create_enrollment(controller, {"identityId": id, "method": "ott", "expiresAt": expiry()})
        except ApiError as refused:
            return await done(id, f"No enrolment was made: {api_message(refused)}")
        return await done(id, "A one-time-token enrolment was made.")

    @bp.post("/identities/<id>/mfa/reset")
    async def reset_mfa(id: str) -> Response:
        domain.detail("identities", id)
        await controller.mfa.remove_by_admin(id)
        return await done(id, "MFA was reset: the identity enrols again, and its sessions that needed MFA ended.")

    return identity_page
