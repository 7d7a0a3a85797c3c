"""The JSON envelopes of both APIs: ``{"data":…,"meta":…}`` and ``{"error":…,"meta":…}``."""

from __future__ import annotations

from typing import Any

import msgspec
from quart import Response

__all__ = ["API_META", "created", "empty", "error_body", "json_response", "ok"]

API_META = {"apiVersion": "0.0.1", "apiEnrollmentVersion": "0.0.1"}
_encoder = msgspec.json.Encoder()


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_encoder.encode(body), status=status, headers=headers, content_type="application/json")


def ok(data: Any, meta: dict[str, Any] | None = None, status: int = 200,
       headers: dict[str, str] | None = None) -> Response:
    return json_response({"data": data, "meta": meta if meta is not None else {}}, status, headers)


def empty() -> Response:
    """The answer of an update, patch or delete: ``{"data":{},"meta":{}}``."""
    return ok({})


def created(data: Any) -> Response:
    return ok(data, status=201)


def error_body(code: str, message: str, request_id: str, cause: dict[str, Any] | None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "requestId": request_id}
    if cause is not None:
        error["cause"] = cause
    return {"error": error, "meta": dict(API_META)}
