"""Logging in and out of the console.

``GET /console/login`` shows the form; ``POST`` logs in through the same path as ``POST /authenticate?method=
password`` (:func:`controller.authentication.login`: the auth policy, lockout, throttling, the session row) and
starts a console session for the API session it makes. An identity with MFA is then asked for its code
(``/console/login/mfa``, checked by :meth:`controller.authentication.MfaService.authenticate` as
``POST /authenticate/mfa`` does). ``POST /console/logout`` ends the API session. A login the API refuses shows the
API's error message and changes nothing.
"""

from __future__ import annotations

from quart import Blueprint, Response, request

from controller.authentication import Credentials, login
from controller.errors import ApiError
from controller.runtime.composition import Controller
from web.console.guard import LOGIN_COOKIE, clear_cookie, current, login_token, set_cookie
from web.console.rendering import page, see_other
from web.console.sessions import COOKIE, ConsoleSessions

__all__ = ["LOGIN_PAGE", "MFA_PAGE", "OPEN_ENDPOINTS", "PARTIAL_ENDPOINTS", "register"]

LOGIN_PAGE = "/console/login"
MFA_PAGE = "/console/login/mfa"
OPEN_ENDPOINTS = frozenset({"console.login_page", "console.login_submit", "console.static"})
"""The pages that need no session."""
PARTIAL_ENDPOINTS = frozenset({"console.mfa", "console.mfa_submit", "console.logout"})
"""The pages a session still owing its MFA code reaches, and which an identity that is no admin reaches too."""


def _next_page(target: str | None) -> str:
    """Where a login goes on to: the console page it was asked for (never another site), else the overview."""
    if target and target.startswith("/console/") and not target.startswith("/console//") and "\\" not in target:
        return target
    return "/console/"


def register(bp: Blueprint, controller: Controller, sessions: ConsoleSessions) -> None:
    """Add the login, MFA and logout pages to the console's blueprint."""

    async def login_form(error: str = "", status: int = 200, username: str = "", target: str | None = None
                         ) -> Response:
        token = login_token()
        response = await page("login.html", status, title="Log in", login_token=token, error=error,
                              username=username, next=_next_page(target or request.args.get("next")))
        set_cookie(response, LOGIN_COOKIE, token)
        return response

    @bp.get("/login")
    async def login_page() -> Response:
        if sessions.find(request.cookies.get(COOKIE)) is not None:
            return see_other("/console/")
        return await login_form()

    @bp.post("/login")
    async def login_submit() -> Response:
        form = await request.form
        username = str(form.get("username", ""))
        body = {"username": username, "password": str(form.get("password", ""))}
        try:
            row = await login(controller, "password", Credentials(body, request.remote_addr or ""))
        except ApiError as refused:
            return await login_form(refused.message, refused.status, username, str(form.get("next", "")))
        cookie, session = sessions.start(row)
        live = controller.sessions.get(session.api_session_id)
        if live is not None and live.ext_jwt_owed and not live.mfa_owed:
            await sessions.end(cookie)
            return await login_form("This identity's auth policy asks for a JWT of an external identity provider, "
                                    "which the console cannot bring: use an SDK or the API.", 401, username)
        target = MFA_PAGE if live is not None and live.mfa_owed else _next_page(str(form.get("next", "")))
        response = see_other(target)
        set_cookie(response, COOKIE, cookie)
        clear_cookie(response, LOGIN_COOKIE)
        return response

    @bp.get("/login/mfa")
    async def mfa() -> Response:
        if not current().live.mfa_owed:
            return see_other("/console/")
        return await page("mfa.html", title="Enter your MFA code", error="")

    @bp.post("/login/mfa")
    async def mfa_submit() -> Response:
        admitted = current()
        form = await request.form
        try:
            await controller.mfa.authenticate(admitted.live, str(form.get("code", "")).strip())
        except ApiError as refused:
            return await page("mfa.html", refused.status, title="Enter your MFA code", error=refused.message)
        return see_other("/console/")

    @bp.post("/logout")
    async def logout() -> Response:
        await sessions.end(request.cookies.get(COOKIE))
        response = see_other(LOGIN_PAGE)
        clear_cookie(response, COOKIE)
        return response
