"""Structured logging: one JSON object per line, with the ``extra`` fields of each record.

Every request writes one line (``web/app.py``), so a line's cost is part of every request's: the formatter encodes
with msgspec, formats the timestamp's seconds once per second, and :func:`configure_logging` turns off the record
fields no line shows (the caller's source location, thread and process), as the logging HOWTO's "Optimization"
section describes.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import msgspec

__all__ = ["JsonFormatter", "configure_logging"]

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_encoder = msgspec.json.Encoder(enc_hook=str)  # a value JSON cannot hold is written as its str()


class JsonFormatter(logging.Formatter):
    """Render a record as ``{"time", "level", "logger", "event", ...extra}``: compact JSON in UTF-8, ``time`` in
    UTC to the millisecond (the record's own ``msecs``, as the standard formatter takes them)."""

    def __init__(self) -> None:
        super().__init__()
        # (second, its text) in one attribute, so that a reader never pairs one second with another's text.
        self._second: tuple[int, str] = (-1, "")

    def _time(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        cached, text = self._second
        if second != cached:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self._time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            return _encoder.encode(entry).decode()
        except UnicodeEncodeError:
            # Text UTF-8 cannot hold (a lone surrogate, say from a third-party message): escaped, never lost.
            return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send every record to stderr as one JSON line, at ``level`` and above."""
    # No line shows where a call was made or by which thread or process; not collecting them saves a stack walk
    # and a few lookups per record.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # hypercorn's own access log would duplicate ours (web/app.py writes one line per request). Its error log is
    # handed the "hypercorn.error" logger itself (controller/runtime/task_tree.py), so it comes out here, as JSON,
    # exactly once.
    logging.getLogger("hypercorn.access").disabled = True
    # httpx logs every request it sends at INFO: in cluster mode that is every etcd call (keepalives several times a
    # second, every write); its warnings and errors still come out.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))
