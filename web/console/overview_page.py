"""The console's overview: how many rows each kind holds (each a link to its list), and the identities whose MFA
deadlines come next, from the posture engine (:meth:`controller.posture.engine.PostureEngine.upcoming_deadlines`)."""

from __future__ import annotations

from collections.abc import Sequence

from quart import Blueprint, Response

from controller.clock import format_time
from controller.runtime.composition import Controller
from web.console.kind_pages import kind_label
from web.console.rendering import page

__all__ = ["UPCOMING_DEADLINES", "register"]

UPCOMING_DEADLINES = 10
"""How many of the next MFA deadlines the overview lists."""


def register(bp: Blueprint, controller: Controller, kinds: Sequence[str]) -> None:
    """Add the overview (``/console/``) to the console's blueprint."""
    domain = controller.domain

    @bp.get("/")
    async def overview() -> Response:
        now = controller.clock.now()
        deadlines = controller.engine.upcoming_deadlines(UPCOMING_DEADLINES)
        with domain.read() as ctx:
            counts = [(kind, kind_label(kind), ctx.txn.count(kind)) for kind in kinds]
            identities = ctx.txn.get_many("identities", [identity_id for _, identity_id in deadlines],
                                          frozenset({"id", "name"}))
        names = {str(row["id"]): str(row.get("name") or row["id"]) for row in identities}
        upcoming = [(identity_id, names.get(identity_id, identity_id), format_time(at), max(0, round(at - now)))
                    for at, identity_id in deadlines]
        return await page("overview.html", title="Overview", counts=counts, upcoming=upcoming)
