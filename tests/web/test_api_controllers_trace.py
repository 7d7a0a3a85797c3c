"""``GET /controllers`` on both APIs (this controller alone, stable across restarts) and ``PUT /identities/{id}/trace``
(accepted, validated, recorded on the identity and reported as the reference reports it).

The trace's expiry is asserted exactly on Trio's virtual clock.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from controller.clock import format_time
from controller.runtime.composition import Controller
from tests.conformance import oracle
from tests.support import CLIENT, MGMT, Api, make_user, running
from tests.web.test_view_conformance import shape_problems
from web.app import create_app

# ---------------------------------------------------------------------------------------------------------------
# GET /controllers


async def test_this_controller_is_the_one_listed_on_both_apis(admin: Api, controller: Controller) -> None:
    _, user = await make_user(admin, "user1")
    address = controller.jwts.address
    management = await admin.get("/controllers")
    client = await user.as_client().get("/controllers")
    assert (management.status, client.status) == (200, 200)
    assert management.body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 1}
    [mine], [theirs] = management.data, client.data
    assert mine["id"] == theirs["id"] and mine["name"] == theirs["name"] == address.split("://", 1)[1]
    assert mine["certPem"] == controller.pki.server_cert_pem.decode() == theirs["certPem"]
    assert mine["fingerprint"] == controller.pki.server_cert_sha1 == theirs["fingerprint"]
    assert mine["isOnline"] is True and mine["lastJoinedAt"] == mine["updatedAt"]
    assert mine["_links"] == {"self": {"href": f"./controllers/{mine['id']}"}}
    assert mine["apiAddresses"] == {"edge-client": [{"url": f"{address}{CLIENT}", "version": "v1"}],
                                    "edge-management": [{"url": f"{address}{MGMT}", "version": "v1"}]}
    # The Client API shows only the client API's address, and no control-plane address.
    assert theirs["apiAddresses"] == {"edge-client": [{"url": f"{address}{CLIENT}", "version": "v1"}]}
    assert (mine["ctrlAddress"], "ctrlAddress" in theirs) == (None, False)
    for api, reply in (("management", management), ("client", client)):
        envelope = {"$ref": "#/definitions/listControllersEnvelope"}
        assert shape_problems(oracle.require(api), envelope, reply.body, api) == []


async def test_controllers_take_the_list_parameters(admin: Api) -> None:
    [mine] = (await admin.get("/controllers")).data
    found = await admin.get("/controllers", query={"filter": f'id = "{mine["id"]}" and isOnline = true'})
    assert [c["id"] for c in found.data] == [mine["id"]]
    none = await admin.get("/controllers", query={"filter": 'name = "elsewhere"'})
    assert (none.data, none.body["meta"]["pagination"]["totalCount"]) == ([], 0)
    assert (await admin.get("/controllers", query={"offset": "1"})).data == []
    assert (await admin.get("/controllers", query={"filter": "name = "})).error["code"] == "INVALID_FILTER"
    assert (await admin.get("/controllers", query={"sort": "nope"})).error["code"] == "INVALID_SORT_IDENTIFIER"


async def test_the_controller_keeps_its_id_across_restarts(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    seen = []
    for _ in range(2):
        async with running(tmp_path) as controller:
            admin = await Api(create_app(controller), controller=controller).login("admin", "admin-password")
            seen.append((await admin.get("/controllers")).data[0])
        await trio.sleep(60)
    first, second = seen
    assert (second["id"], second["createdAt"]) == (first["id"], first["createdAt"])
    assert second["lastJoinedAt"] > first["lastJoinedAt"]


# ---------------------------------------------------------------------------------------------------------------
# PUT /identities/{id}/trace


def recorded_trace(controller: Controller, identity_id: str) -> object:
    with controller.store.read() as txn:
        row = txn.get("identities", identity_id) or {}
    return row.get("_trace")


async def test_trace_is_recorded_and_reported(admin: Api, controller: Controller,
                                              autojump_clock: trio.abc.Clock) -> None:
    identity_id, _ = await make_user(admin, "traced")
    now = controller.clock.now()
    reply = await admin.put(f"/identities/{identity_id}/trace", {"enabled": True, "duration": "1h30m",
                                                                 "traceId": "trace-1", "channels": ["selectPath"]})
    assert reply.status == 200, reply.body
    until = format_time(now + 5400)
    assert reply.data == {"enabled": True, "traceId": "trace-1", "until": until}
    assert shape_problems(oracle.require("management"), {"$ref": "#/definitions/traceDetailEnvelope"}, reply.body,
                          "") == []
    assert recorded_trace(controller, identity_id) == {"traceId": "trace-1", "channels": ["selectPath"],
                                                       "until": until}
    detail = (await admin.get(f"/identities/{identity_id}")).data
    assert "_trace" not in detail

    # No trace id: a new one; no channels (or "all"): every channel.
    reply = await admin.put(f"/identities/{identity_id}/trace", {"enabled": True, "duration": "90s"})
    assert str(uuid.UUID(reply.data["traceId"])) == reply.data["traceId"]
    assert reply.data["until"] == format_time(now + 90)
    assert recorded_trace(controller, identity_id) == {"traceId": reply.data["traceId"],
                                                       "channels": ["selectPath", "establishPath"],
                                                       "until": format_time(now + 90)}

    reply = await admin.put(f"/identities/{identity_id}/trace", {"enabled": False, "duration": "junk"})
    assert (reply.status, reply.data) == (200, {"enabled": False})
    assert recorded_trace(controller, identity_id) is None
    assert (await admin.put(f"/identities/{identity_id}/trace", {})).data == {"enabled": False}


@pytest.mark.parametrize(("body", "field", "reason"), [
    (None, "traceSpec", "traceSpec in body is required"),
    ({"enabled": "yes"}, "enabled", "enabled in body must be of type boolean"),
    ({"enabled": True}, "duration", "duration is required to enable a trace"),
    ({"enabled": True, "duration": "10"}, "duration",
     "duration is invalid: '10' is not a duration such as 90s, 10m or 1h30m"),
    ({"enabled": True, "duration": "0s"}, "duration", "duration is invalid: the duration must be positive"),
    ({"enabled": True, "duration": "3000000h"}, "duration",
     "duration is invalid: the duration must be at most 2562047h"),
    ({"enabled": True, "duration": "1m", "channels": ["selectPath", "everything"]}, "channels",
     "channels must be among all, selectPath, establishPath"),
])
async def test_bad_trace_specs_are_refused(admin: Api, controller: Controller, body: object, field: str,
                                           reason: str) -> None:
    identity_id, _ = await make_user(admin, "traced")
    reply = await admin.put(f"/identities/{identity_id}/trace", body)
    assert (reply.status, reply.error["code"]) == (400, "COULD_NOT_VALIDATE")
    assert (reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (field, reason)
    assert recorded_trace(controller, identity_id) is None


async def test_trace_of_an_unknown_identity(admin: Api) -> None:
    reply = await admin.put("/identities/nobody/trace", {"enabled": True, "duration": "1m"})
    assert (reply.status, reply.error["code"]) == (404, "NOT_FOUND")
