"""Rendering a console page: the template, the context every page shares, and the URL helpers the pages build.

Every page extends ``console/base.html`` (skip link, navigation, the session's CSRF token for forms and htmx). A
request htmx makes for one region of a page (``HX-Target``) gets that region's template alone when the page has
one, so a list's filter, sort and paging swap the table without rendering the whole page again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from quart import Response, g, render_template, request

from controller.errors import ApiError
from web.console.guard import CSRF_FIELD

__all__ = ["api_message", "htmx_target", "page", "query_url", "see_other"]


def htmx_target() -> str | None:
    """The id of the region an htmx request asks for, or None for a whole page."""
    if request.headers.get("HX-Request") != "true":
        return None
    return request.headers.get("HX-Target")


async def page(template: str, status: int = 200, headers: Mapping[str, str] | None = None, **context: Any) -> Response:
    """``console/TEMPLATE`` rendered with the shared context (the session's CSRF token and its one-shot messages,
    when a session was admitted)."""
    admitted = g.get("console")
    shared: dict[str, Any] = {"csrf_field": CSRF_FIELD, "csrf": admitted.session.csrf if admitted else "",
                              "messages": admitted.session.take_messages() if admitted else [],
                              "logged_in": admitted is not None}
    html = await render_template(f"console/{template}", **shared, **context)
    return Response(html, status=status, headers=dict(headers or {}), content_type="text/html; charset=utf-8")


def query_url(path: str, params: Mapping[str, Any]) -> str:
    """``path`` with the non-empty ``params`` as its query string."""
    kept = {key: value for key, value in params.items() if value not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def see_other(location: str) -> Response:
    """A redirect to ``location`` (303, so the next request is a GET); htmx is told to load it as a whole page."""
    if request.headers.get("HX-Request") == "true":
        return Response("", status=200, headers={"HX-Redirect": location})
    return Response("", status=303, headers={"Location": location})


def api_message(error: ApiError) -> str:
    """The API's message of a refusal, with its cause's reason or message when it has one."""
    cause = error.cause or {}
    detail = cause.get("reason") or cause.get("message") or ""
    return f"{error.message}: {detail}" if detail else error.message
