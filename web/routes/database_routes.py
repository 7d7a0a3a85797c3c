"""The database operations of the management API (administrators only): ``POST /database/snapshot``, ``POST
/database/check-data-integrity``, ``POST /database/fix-data-integrity`` and ``GET /database/data-integrity-results``.

A snapshot is written before the answer (200, empty). A check or fix only starts: 202 at once, the run goes on in
the controller's database service, and its state and findings are read with the results operation. What each does
is in ``controller/maintenance/operations.py`` and ``controller/maintenance/integrity.py``.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response

from controller.maintenance.operations import MAX_RESULTS
from controller.runtime.composition import Controller
from web.envelope import empty, ok
from web.guards import Access
from web.route_table import RouteGroup, Routes

__all__ = ["INTEGRITY_DETAILS", "register"]

_TIME: dict[str, Any] = {"type": ["string", "null"], "format": "date-time"}
INTEGRITY_DETAILS: dict[str, Any] = {
    "type": "object",
    "required": ["inProgress", "fixingErrors", "tooManyErrors", "startTime", "endTime", "error", "results"],
    "properties": {
        "startTime": _TIME,
        "endTime": _TIME,
        "inProgress": {"type": "boolean"},
        "fixingErrors": {"type": "boolean"},
        "tooManyErrors": {"type": "boolean"},
        "error": {"type": ["string", "null"]},
        "results": {"type": ["array", "null"], "maxItems": MAX_RESULTS, "items": {
            "type": "object", "required": ["description", "fixed"],
            "properties": {"description": {"type": "string"}, "fixed": {"type": "boolean"}}}},
    },
}
"""JSON schema of the results operation's ``data``."""

_EMPTY: dict[str, Any] = {"type": "object"}
_TAG = "Database"


def register(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    """Add the database operations to the management blueprint."""
    database = controller.database

    async def snapshot() -> Response:
        await database.snapshot()
        return empty()

    async def check() -> Response:
        database.start_integrity_run(fix=False)
        return ok({}, status=202)

    async def fix() -> Response:
        database.start_integrity_run(fix=True)
        return ok({}, status=202)

    async def results() -> Response:
        details = database.report.details()
        total = len(details["results"] or ())
        # A single page of everything kept, as the reference answers it.
        return ok(details, {"pagination": {"limit": -1, "offset": 0, "totalCount": total}, "filterableFields": []})

    group = RouteGroup(routes, bp, "management", tag=_TAG, access=Access.ADMIN)

    group.add("POST", "/database/snapshot", "createDatabaseSnapshot", snapshot,
              summary="Write a compacted copy of the store beside it, at most once a minute", data=_EMPTY,
              errors=(429,))
    group.add("POST", "/database/check-data-integrity", "checkDataIntegrity", check,
              summary="Start checking the store's integrity in the background, unless a check or fix is running",
              data=_EMPTY, status=202, errors=(429,))
    group.add("POST", "/database/fix-data-integrity", "fixDataIntegrity", fix,
              summary="Start checking the store's integrity and repairing what can be repaired, unless a check or fix "
                      "is running",
              data=_EMPTY, status=202, errors=(429,))
    group.add("GET", "/database/data-integrity-results", "dataIntegrityResults", results,
              summary="The state and findings of the latest integrity check or fix", data=INTEGRITY_DETAILS)
