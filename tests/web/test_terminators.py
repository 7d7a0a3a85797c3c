"""Terminators over HTTP: references to a router and a service, the hidden identity secret, cascading deletes."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.support import Api

SECRET = base64.b64encode(b"shared secret bytes").decode()


async def setup(admin: Api) -> dict[str, str]:
    return {
        "service": await admin.create("/services", {"name": "svc", "encryptionRequired": True}),
        "router": await admin.create("/routers", {"name": "tr"}),
    }


def body(ids: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"service": ids["service"], "router": ids["router"], "binding": "transport",
            "address": "tcp:10.0.0.1:8080", **extra}


async def test_create_and_detail(admin: Api) -> None:
    ids = await setup(admin)
    reply = await admin.post("/terminators", body(ids, cost=12, precedence="required", identity="host-a",
                                                  identitySecret=SECRET, tags={"k": "v"}))
    assert reply.status == 201, reply.body
    terminator = (await admin.get(f"/terminators/{reply.data['id']}")).data
    assert terminator == reply.data
    assert (terminator["serviceId"], terminator["routerId"]) == (ids["service"], ids["router"])
    assert terminator["service"] == {"id": ids["service"], "name": "svc", "entity": "services",
                                     "_links": {"self": {"href": f"./services/{ids['service']}"}}}
    assert terminator["router"] == {"id": ids["router"], "name": "tr", "entity": "routers",
                                    "_links": {"self": {"href": f"./routers/{ids['router']}"}}}
    assert (terminator["binding"], terminator["address"], terminator["identity"]) == (
        "transport", "tcp:10.0.0.1:8080", "host-a")
    assert (terminator["cost"], terminator["dynamicCost"], terminator["precedence"]) == (12, 12, "required")
    assert terminator["tags"] == {"k": "v"}
    # The secret never comes back, in any form.
    assert not any("ecret" in key for key in terminator)
    listed = await admin.get("/terminators")
    assert SECRET not in listed.raw.decode()
    assert listed.data == [terminator]


async def test_defaults(admin: Api) -> None:
    ids = await setup(admin)
    reply = await admin.post("/terminators", body(ids))
    assert reply.status == 201, reply.body
    assert (reply.data["cost"], reply.data["precedence"], reply.data["identity"]) == (0, "default", "")


@pytest.mark.parametrize("field", ["service", "router", "binding", "address"])
async def test_required_fields(admin: Api, field: str) -> None:
    ids = await setup(admin)
    incomplete = body(ids)
    del incomplete[field]
    reply = await admin.post("/terminators", incomplete)
    assert (reply.status, reply.error["code"]) == (400, "COULD_NOT_VALIDATE")
    assert reply.error["cause"] == {"field": field, "reason": f"{field} in body is required", "value": "<nil>"}
    terminator = await admin.create("/terminators", body(ids))
    reply = await admin.put(f"/terminators/{terminator}", incomplete)
    assert (reply.status, reply.error["cause"]["field"]) == (400, field)


async def test_invalid_values(admin: Api) -> None:
    ids = await setup(admin)
    cases = [
        (body(ids, router="nope"), "router", "router not found"),
        (body(ids, service="nope"), "service", "service not found"),
        (body(ids, precedence="top"), "precedence", "precedence in body should be one of "
                                                    "['default', 'required', 'failed']"),
        (body(ids, cost=65536), "cost", "cost in body should be less than or equal to 65535"),
        (body(ids, identitySecret="not base64!"), "identitySecret", "identitySecret in body must be of type byte"),
    ]
    for request, field, reason in cases:
        reply = await admin.post("/terminators", request)
        assert (reply.status, reply.error["code"]) == (400, "COULD_NOT_VALIDATE"), request
        assert (reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (field, reason)
    assert (await admin.get("/terminators")).data == []


async def test_put_and_patch(admin: Api) -> None:
    ids = await setup(admin)
    other_router = await admin.create("/routers", {"name": "tr2"})
    terminator = await admin.create("/terminators", body(ids, identity="host-a", cost=3))

    reply = await admin.patch(f"/terminators/{terminator}", {"precedence": "failed", "identity": "ignored"})
    assert (reply.status, reply.body) == (200, {"data": {}, "meta": {}})
    detail = (await admin.get(f"/terminators/{terminator}")).data
    assert (detail["precedence"], detail["cost"], detail["identity"]) == ("failed", 3, "host-a")

    reply = await admin.put(f"/terminators/{terminator}", body({**ids, "router": other_router}, address="udp:x:1"))
    assert reply.status == 200, reply.body
    detail = (await admin.get(f"/terminators/{terminator}")).data
    assert (detail["routerId"], detail["router"]["name"], detail["address"]) == (other_router, "tr2", "udp:x:1")
    # PUT resets what it does not carry, but the hosting identity is set on create only.
    assert (detail["cost"], detail["precedence"], detail["identity"]) == (0, "default", "host-a")

    reply = await admin.patch(f"/terminators/{terminator}", {"router": "nope"})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "router")
    assert (await admin.get(f"/terminators/{terminator}")).data["routerId"] == other_router


async def test_filter_by_service_and_router(admin: Api) -> None:
    ids = await setup(admin)
    other_service = await admin.create("/services", {"name": "svc2", "encryptionRequired": True})
    first = await admin.create("/terminators", body(ids))
    await admin.create("/terminators", body({**ids, "service": other_service}))
    reply = await admin.get("/terminators", query={"filter": f'service = "{ids["service"]}"'})
    assert [t["id"] for t in reply.data] == [first]
    reply = await admin.get("/terminators", query={"filter": f'router = "{ids["router"]}" and binding = "transport"'})
    assert reply.body["meta"]["pagination"]["totalCount"] == 2
    assert {"service", "router", "binding", "address", "identity", "cost", "precedence"} <= set(
        reply.body["meta"]["filterableFields"])


async def test_deleting_a_router_or_service_deletes_its_terminators(admin: Api) -> None:
    ids = await setup(admin)
    other_router = await admin.create("/routers", {"name": "tr2"})
    other_service = await admin.create("/services", {"name": "svc2", "encryptionRequired": True})
    on_router = await admin.create("/terminators", body(ids))
    kept = await admin.create("/terminators", body({"service": other_service, "router": other_router}))
    on_service = await admin.create("/terminators", body({**ids, "router": other_router}))

    assert (await admin.delete(f"/routers/{ids['router']}")).status == 200
    assert (await admin.get(f"/terminators/{on_router}")).status == 404
    assert sorted(t["id"] for t in (await admin.get("/terminators")).data) == sorted([kept, on_service])

    assert (await admin.delete(f"/services/{ids['service']}")).status == 200
    assert (await admin.get(f"/terminators/{on_service}")).status == 404
    assert [t["id"] for t in (await admin.get("/terminators")).data] == [kept]
