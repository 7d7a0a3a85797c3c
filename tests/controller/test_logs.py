"""``controller/runtime/logs.py``: the JSON line each record becomes."""

from __future__ import annotations

import json
import logging

from controller.runtime.logs import JsonFormatter


def _record(created: float, **extra: object) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "tollgate.access", "msg": "request %s", "args": ("done",),
                                    "levelname": "INFO", "levelno": logging.INFO, **extra})
    record.created = created
    record.msecs = int((created - int(created)) * 1000)
    return record


def test_a_line_holds_the_time_level_logger_event_and_extra_fields_in_order() -> None:
    line = JsonFormatter().format(_record(1_700_000_000.25, method="GET", status=200, duration_ms=1.5))
    assert list(json.loads(line).items()) == [
        ("time", "2023-11-14T22:13:20.250Z"), ("level", "info"), ("logger", "tollgate.access"),
        ("event", "request done"), ("method", "GET"), ("status", 200), ("duration_ms", 1.5)]


def test_the_time_follows_each_record_across_seconds_and_milliseconds() -> None:
    formatter = JsonFormatter()
    times = [json.loads(formatter.format(_record(t)))["time"]
             for t in (1_700_000_000.9996, 1_700_000_001.0, 1_700_000_000.125, 1_700_086_400.5)]
    # The seconds are cached per formatter: a record from an earlier second (a late one) must not reuse them.
    assert times == ["2023-11-14T22:13:20.999Z", "2023-11-14T22:13:21.000Z", "2023-11-14T22:13:20.125Z",
                     "2023-11-15T22:13:20.500Z"]


def test_private_fields_are_left_out_and_values_json_cannot_hold_are_written_as_text() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque-value"

    line = json.loads(JsonFormatter().format(_record(0.0, _hidden=1, thing=Opaque(), text="naïve")))
    assert line["thing"] == "opaque-value"
    assert line["text"] == "naïve"
    assert "_hidden" not in line


def test_an_exception_is_rendered_with_its_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = _record(0.0)
        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert line["exception"].startswith("Traceback") and "ValueError: boom" in line["exception"]


def test_text_utf8_cannot_hold_is_escaped_instead_of_losing_the_line() -> None:
    line = JsonFormatter().format(_record(0.0, path="/\udcff", **{"": "empty key"}))
    assert json.loads(line)["path"] == "/\udcff"
    assert json.loads(line)[""] == "empty key"
