"""The request boundary: every exception a handler raises becomes an error envelope here, and only here.

An :class:`ApiError` renders with its code, status and cause; routing failures map to NOT_FOUND and
METHOD_NOT_ALLOWED; anything else is logged with its traceback and answered 500 ``UNHANDLED`` without internals.
"""

from __future__ import annotations

import logging

from quart import Quart, Response, g, request
from werkzeug.exceptions import HTTPException

from controller.errors import CODES, ApiError
from web.envelope import error_body, json_response

__all__ = ["install_error_handlers", "render_error"]

log = logging.getLogger("tollgate.web")

_HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 408: "REQUEST_TIMEOUT", 413: "REQUEST_TOO_LARGE",
               400: "COULD_NOT_PARSE_BODY"}


def render_error(error: ApiError) -> Response:
    """The error envelope, or an empty body when the client accepts neither JSON nor ``*/*`` (as the reference:
    a client asking for a PEM file gets the status alone, with the content type it asked for)."""
    request_id = getattr(g, "request_id", "")
    accept = request.headers.get("Accept", "")
    if accept and "*/*" not in accept and "application/json" not in accept:
        asked = accept.split(",")[0].split(";")[0].strip()
        return Response(b"", status=error.status, headers=error.headers, content_type=asked or None)
    body = error_body(error.code, error.message, request_id, error.cause)
    return json_response(body, error.status, error.headers)


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def api_error(error: ApiError) -> Response:
        return render_error(error)

    @app.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> Response:
        code = _HTTP_CODES.get(error.code or 500, "UNHANDLED")
        # Keep the headers HTTP requires with the status, such as Allow on a 405.
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        return render_error(ApiError(code, headers=headers))

    @app.errorhandler(Exception)
    async def unexpected(error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return render_error(ApiError("UNHANDLED"))

    assert "UNHANDLED" in CODES
