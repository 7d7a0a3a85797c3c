"""The global posture switch: with posture evaluation off, sessions are decided on service policies alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_settings, make_user, start_controller
from web.app import create_app


async def _network(tmp_path: Path, nursery: trio.Nursery, *, evaluate_posture: bool) -> tuple[Api, Api, str]:
    controller = await start_controller(make_settings(tmp_path, evaluate_posture=evaluate_posture), nursery)
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    await admin.create("/edge-routers", {"name": "er"})
    await admin.create("/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                  "edgeRouterRoles": ["#all"]})
    await admin.create("/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf", "serviceRoles": ["#all"],
                                                         "edgeRouterRoles": ["#all"]})
    service = await admin.create("/services", {"name": "svc", "encryptionRequired": True, "roleAttributes": ["s"]})
    await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                           "macAddresses": ["aa:bb:cc:dd:ee:ff"]})
    await admin.create("/service-policies", {"name": "sp", "type": "Dial", "semantic": "AnyOf",
                                             "identityRoles": ["#u"], "serviceRoles": ["#s"],
                                             "postureCheckRoles": ["#mac"]})
    _, user = await make_user(admin, "laptop", roleAttributes=["u"])
    return admin, user.as_client(), service


@pytest.mark.parametrize(("evaluate_posture", "status"), [(True, 409), (False, 201)])
async def test_unreported_posture_refuses_only_when_evaluation_is_on(tmp_path: Path, nursery: trio.Nursery,
                                                                    evaluate_posture: bool, status: int) -> None:
    _, client, service = await _network(tmp_path, nursery, evaluate_posture=evaluate_posture)
    reply = await client.post("/sessions", {"serviceId": service})
    assert reply.status == status, reply.body
    if status == 409:
        assert reply.body["error"]["code"] == "INVALID_POSTURE"


async def test_evaluation_off_never_revokes_on_posture(tmp_path: Path, nursery: trio.Nursery) -> None:
    _, client, service = await _network(tmp_path, nursery, evaluate_posture=False)
    created = await client.post("/sessions", {"serviceId": service})
    assert created.status == 201
    wrong = {"id": "x", "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]}
    assert (await client.post("/posture-response", wrong)).status == 201
    sessions = await client.get("/sessions")
    assert [s["id"] for s in sessions.data] == [created.data["id"]]
