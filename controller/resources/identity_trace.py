"""Data-flow tracing of an identity (``PUT /identities/{id}/trace``): recorded and reported, with no effect here.

In OpenZiti an enabled trace makes the routers log the path selection and circuit set-up of the identity's
connections on the chosen channels until it expires. Tollgate has no data plane, so the trace is only recorded:
kept on the identity (the internal field ``_trace``: trace id, channels, expiry), logged, and answered as the
reference answers it. Disabling removes it. An expired trace is inert; nothing needs to remove it.

The spec is validated more strictly than the reference does: ``duration`` must be a positive Go duration
(``90s``, ``10m``, ``1h30m``) of at most what Go can represent, and every channel must be one the reference knows.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import TYPE_CHECKING, Any

from controller.clock import format_time
from controller.data.write_path import put_row
from controller.errors import ApiError, FieldError, field_cause, not_found
from controller.model.field import Field, Mode
from controller.model.spec import WriteContext
from controller.model.validation import SchemaCheck

if TYPE_CHECKING:
    from controller.data.domain import Domain

__all__ = ["CHANNELS", "TRACE_DETAIL_SCHEMA", "TRACE_FIELD", "TRACE_SPEC_SCHEMA", "parse_duration",
           "update_identity_trace"]

log = logging.getLogger("tollgate.trace")

CHANNELS = ("selectPath", "establishPath")
"""The trace channels; ``all`` (or none given) stands for every one of them."""

TRACE_SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"enabled": {"type": "boolean"}, "duration": {"type": "string", "maxLength": 64},
                   "traceId": {"type": "string", "maxLength": 128},
                   "channels": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 64}}},
}
"""The body of ``PUT /identities/{id}/trace``."""

TRACE_DETAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"enabled": {"type": "boolean"}, "traceId": {"type": "string"},
                   "until": {"type": "string", "format": "date-time"}},
}
"""The answer's ``data``: the trace in force (``traceId`` and ``until`` only while enabled)."""

TRACE_FIELD = Field("_trace", {"type": "object", "properties": {
    "traceId": {"type": "string"}, "channels": {"type": "array", "items": {"type": "string"}},
    "until": {"type": "string", "format": "date-time"}}}, writable=frozenset())
"""The identity field that keeps an enabled trace (internal: never shown, never written by a client)."""

_SPEC_CHECK = SchemaCheck.of(TRACE_SPEC_SCHEMA)
_MAX_NANOSECONDS = 2**63 - 1  # Go's time.Duration
_UNIT_NANOSECONDS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9,
                     "m": 60 * 10**9, "h": 3600 * 10**9}
# Each digit can belong to one part of a number only (no two quantifiers competing for the same digits), so a long
# run of digits fails in linear time.
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_DURATION = re.compile(rf"(?:{_TERM.pattern})+")


def parse_duration(text: str) -> float:
    """Seconds of a positive Go duration (``300ms``, ``1.5h``, ``1h30m``: decimal numbers, each with a unit among
    ``ns``, ``us``, ``µs``, ``ms``, ``s``, ``m``, ``h``).

    Raises:
        ValueError: ``text`` is not such a duration, is zero, or exceeds Go's largest duration (about 292 years).
    """
    if not _DURATION.fullmatch(text):
        raise ValueError(f"{text!r} is not a duration such as 90s, 10m or 1h30m")
    nanoseconds = sum(float(number) * _UNIT_NANOSECONDS[unit] for number, unit in _TERM.findall(text))
    if nanoseconds < 1:
        raise ValueError("the duration must be positive")
    if nanoseconds > _MAX_NANOSECONDS:
        raise ValueError("the duration must be at most 2562047h")
    return nanoseconds / 1e9


def _channels(requested: list[str]) -> list[str]:
    unknown = [c for c in requested if c != "all" and c not in CHANNELS]
    if unknown:
        raise FieldError("channels", f"channels must be among all, {', '.join(CHANNELS)}", unknown)
    if not requested or "all" in requested:
        return list(CHANNELS)
    return list(dict.fromkeys(requested))


async def update_identity_trace(domain: Domain, identity_id: str, body: Any) -> dict[str, Any]:
    """Enable (for ``duration`` from now, under ``traceId`` or a new one, on ``channels``) or disable the trace of
    an identity; returns the trace detail the reference answers: ``{enabled, traceId, until}`` or
    ``{enabled: false}``.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE for a missing or malformed body, a bad ``duration`` (required when
            enabling) or an unknown channel; 404 NOT_FOUND for an unknown identity.
    """
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("traceSpec", "traceSpec in body is required", None))
    _SPEC_CHECK.validate(body)
    enabled = bool(body.get("enabled"))
    trace: dict[str, Any] | None = None
    seconds = 0.0
    if enabled:
        duration = str(body.get("duration") or "")
        if not duration:
            raise FieldError("duration", "duration is required to enable a trace", None)
        try:
            seconds = parse_duration(duration)
        except ValueError as exc:
            raise FieldError("duration", f"duration is invalid: {exc}", duration) from None
        channels = _channels(body.get("channels") or [])
        trace = {"traceId": body.get("traceId") or str(uuid.uuid4()), "channels": channels}
    resource = domain.registry["identities"]

    def write(ctx: WriteContext) -> dict[str, Any] | None:
        old = ctx.txn.get(resource.kind, identity_id)
        if old is None:
            raise not_found(resource.singular, identity_id)
        row = {k: v for k, v in old.items() if k != TRACE_FIELD.name}
        recorded = None if trace is None else {**trace, "until": format_time(ctx.now + seconds)}
        if recorded is not None:
            row[TRACE_FIELD.name] = recorded
        if row != old:
            put_row(ctx, resource, row, old, Mode.PATCH)
        return recorded

    recorded = await domain.write(write)
    if recorded is None:
        log.info("trace disabled", extra={"identityId": identity_id})
        return {"enabled": False}
    log.info("trace enabled", extra={"identityId": identity_id, **recorded})
    return {"enabled": True, "traceId": recorded["traceId"], "until": recorded["until"]}
