"""``console_blueprint(controller)``: the web console's routes under ``/console/``, on the management listener.

Every page runs behind :class:`web.console.guard.Gate` (session, MFA, administrator, origin and CSRF checks) and is
answered with the headers a page holding an admin's data needs: a strict Content Security Policy (the console's own
scripts and styles only, no inline code), no framing, no caching, no sniffing. A refusal or an error becomes a page
(the API's message for a domain error), never a JSON envelope.
"""

from __future__ import annotations

import logging

from quart import Blueprint, Response, request
from werkzeug.exceptions import HTTPException

from controller.authentication import API_SESSIONS
from controller.errors import ApiError
from controller.model.request_fields import words
from controller.runtime.composition import Controller
from web.console import auth_pages, edit_pages, identity_pages, kind_pages, model_pages, overview_page
from web.console.guard import Gate, Refused
from web.console.kind_pages import kind_label
from web.console.rendering import api_message, page, see_other
from web.console.sessions import ConsoleSessions

__all__ = ["console_blueprint"]

log = logging.getLogger("tollgate.console")

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_REFUSALS = {"not-admin": ("not_admin.html", "Not an administrator"),
             "cross-site": ("refused.html", "Refused: the request came from another site"),
             "csrf": ("refused.html", "Refused: the form was out of date")}


def console_blueprint(controller: Controller) -> Blueprint:
    """The console of ``controller``: its pages, static files and templates (package data of ``web.console``)."""
    bp = Blueprint("console", __name__, url_prefix="/console", template_folder="templates",
                   static_folder="static", static_url_path="/static")
    sessions = ConsoleSessions(controller.sessions)
    controller.domain.subscribe(sessions.changes_committed, (API_SESSIONS,))
    kinds = [kind for kind, resource in controller.registry.resources.items() if "list" in resource.operations]
    gate = Gate(sessions, controller.is_admin, open_pages=auth_pages.OPEN_ENDPOINTS,
                partial_pages=auth_pages.PARTIAL_ENDPOINTS, login_page=auth_pages.LOGIN_PAGE,
                mfa_page=auth_pages.MFA_PAGE)

    @bp.before_request
    async def admit() -> None:
        await gate.admit()

    @bp.after_request
    async def headers(response: Response) -> Response:
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        if request.endpoint != "console.static":
            response.headers["Cache-Control"] = "no-store"
        response.headers["Vary"] = "HX-Request, HX-Target"
        return response

    @bp.context_processor
    async def shared() -> dict[str, object]:
        return {"nav_kinds": [(kind, kind_label(kind)) for kind in kinds], "path": request.path, "noun": noun}

    def noun(kind: str) -> str:
        """A row of ``kind`` as people say it (``service policy``)."""
        return words(controller.registry[kind].singular)

    @bp.errorhandler(Refused)
    async def refused(error: Refused) -> Response:
        if error.location is not None:
            target = error.location
            if error.reason == "login" and request.method == "GET" and request.path != "/console/":
                target += "?next=" + request.full_path.rstrip("?")
            return see_other(target)
        template, title = _REFUSALS[error.reason]
        return await page(template, error.status, title=title, reason=error.reason)

    @bp.errorhandler(ApiError)
    async def api_error(error: ApiError) -> Response:
        return await page("error.html", error.status, title=error.message, message=api_message(error),
                          code=error.code)

    @bp.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> Response:
        status = error.code or 500
        return await page("error.html", status, title=error.name, message=error.description or "", code=str(status))

    @bp.errorhandler(Exception)
    async def unexpected(error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return await page("error.html", 500, title="Something went wrong", code="UNHANDLED",
                          message="The controller could not show this page; what it logged says why.")

    auth_pages.register(bp, controller, sessions)
    overview_page.register(bp, controller, kinds)
    identity_page = identity_pages.register(bp, controller)
    model_pages.register(bp, controller)
    edit_pages.register(bp, controller, kinds)
    kind_pages.register(bp, controller, kinds, {"identities": identity_page})

    @bp.route("/<path:rest>", methods=["GET", "POST"])
    async def unknown(rest: str) -> Response:
        raise ApiError("NOT_FOUND")

    return bp
