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

_HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "REQUEST_TOO_LARGE", 400: "COULD_NOT_PARSE_BODY"}


def render_error(error: ApiError) -> Response:
    request_id = getattr(g, "request_id", "")
    body = error_body(error.code, error.message, request_id, error.cause)
    accept = request.headers.get("Accept", "")
    if accept and "*/*" not in accept and "application/json" not in accept:
        return Response(b"", status=error.status, headers=error.headers)
    return json_response(body, error.status, error.headers)


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def api_error(error: ApiError) -> Response:
        return render_error(error)

    @app.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> Response:
        code = _HTTP_CODES.get(error.code or 500, "UNHANDLED")
        return render_error(ApiError(code))

    @app.errorhandler(Exception)
    async def unexpected(error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return render_error(ApiError("UNHANDLED"))

    assert "UNHANDLED" in CODES
