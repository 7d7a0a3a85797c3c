"""Answers that clients generated from the reference spec decode strictly: every required property present, every
value of its declared JSON type (edge router version properties, posture check type versions, reported OS types).
"""

from __future__ import annotations

from typing import Any

from controller.resources.posture_checks import TYPE_NAMES
from controller.runtime.composition import Controller
from tests.conformance import oracle
from tests.support import Api
from tests.web.test_client_posture import user
from tests.web.test_view_conformance import shape_problems

NO_VERSION = {"os": "", "version": "", "arch": "", "buildDate": "", "revision": ""}


def problems(definition: str, body: Any) -> list[str]:
    """A missing required property or a value of the wrong type. Properties a definition does not name are left
    out: clients skip them (and edgeRouterDetail requires its version properties without naming them)."""
    document = oracle.require("management")
    return [p for p in shape_problems(document, {"$ref": f"#/definitions/{definition}"}, body, definition)
            if "unknown property" not in p]


async def test_edge_router_version_properties(admin: Api) -> None:
    router_id = await admin.create("/edge-routers", {"name": "er1"})
    detail = (await admin.get(f"/edge-routers/{router_id}")).data
    listed = (await admin.get("/edge-routers")).data[0]
    for router in (detail, listed):
        # Top level as the spec requires, and in versionInfo as the reference controller answers: empty strings
        # until a router reports its version.
        assert {name: router[name] for name in NO_VERSION} == NO_VERSION
        assert router["versionInfo"] == NO_VERSION
    assert problems("edgeRouterDetail", detail) == []
    assert problems("edgeRouterDetail", listed) == []


async def test_posture_check_type_versions_are_strings(admin: Api, controller: Controller) -> None:
    listed = (await admin.get("/posture-check-types")).data
    assert {t["id"]: t["version"] for t in listed} == dict.fromkeys(TYPE_NAMES, "1")
    assert (await admin.get("/posture-check-types/OS")).data["version"] == "1"
    assert [p for t in listed for p in problems("postureCheckTypeDetail", t)] == []

    # A data directory seeded before the version was a string keeps the number: it is shown as a string all the
    # same.
    def store_number(ctx: Any) -> None:
        ctx.txn.put("posture-check-types", {**ctx.txn.get("posture-check-types", "MAC"), "version": 1})

    await controller.domain.write(store_number)
    assert (await admin.get("/posture-check-types/MAC")).data["version"] == "1"
    # Posture checks themselves carry an integer version.
    check = await admin.create("/posture-checks", {"name": "m", "typeId": "MFA"})
    assert (await admin.get(f"/posture-checks/{check}")).data["version"] == 1


async def test_posture_data_shows_the_os_type_as_reported(admin: Api) -> None:
    identity_id, client = await user(admin)
    reply = await client.post("/posture-response", {"id": "os", "typeId": "OS", "type": "macOS", "version": "14.1",
                                                    "build": "23B74"})
    assert reply.status == 201, reply.body
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    assert (data["os"]["type"], data["os"]["version"], data["os"]["build"]) == ("macOS", "14.1", "23B74")
    assert problems("postureData", data) == []
