"""The config types OpenZiti endpoints read are seeded on a new data directory, never duplicated or overwritten
afterwards, and their schemas judge configs of their type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from controller.errors import ApiError
from controller.model.field import Mode
from controller.resources.seeded_config_types import SEEDED_CONFIG_TYPES
from controller.runtime.composition import Controller
from tests.support import running

NAMES = {"intercept.v1": "g7cIWbcGg", "host.v1": "NH5p4FpGR", "host.v2": "host.v2",
         "ziti-tunneler-client.v1": "f2dd2df0-9c04-4b84-a91e-71437ac229f1",
         "ziti-tunneler-server.v1": "cea49285-6c07-42cf-9f52-09a9b115c783"}


def config_types(controller: Controller) -> dict[str, dict[str, Any]]:
    with controller.store.read() as txn:
        return {str(row["name"]): row for row in txn.scan("config-types")}


async def test_seeded_once_and_left_alone(tmp_path: Path) -> None:
    async with running(tmp_path) as controller:
        first = config_types(controller)
        assert {name: row["id"] for name, row in first.items()} == NAMES
        for seeded in SEEDED_CONFIG_TYPES:
            assert first[seeded["name"]]["schema"] == seeded["schema"]
            jsonschema.Draft7Validator.check_schema(seeded["schema"])
        # An operator replaces the seeded intercept.v1 with one of their own (another id, the same name).
        await controller.domain.delete("config-types", NAMES["intercept.v1"])
        own = await controller.domain.create("config-types", {"name": "intercept.v1", "schema": {"type": "object"}})

    async with running(tmp_path) as controller:
        again = config_types(controller)
    assert len(again) == len(NAMES)
    assert again["intercept.v1"]["id"] == own["id"] and again["intercept.v1"]["schema"] == {"type": "object"}
    assert {name: again[name] for name in NAMES if name != "intercept.v1"} == {
        name: first[name] for name in NAMES if name != "intercept.v1"}


async def test_a_seeded_type_the_operator_deleted_stays_deleted(tmp_path: Path) -> None:
    async with running(tmp_path) as controller:
        await controller.domain.delete("config-types", NAMES["host.v1"])
    async with running(tmp_path) as controller:
        again = config_types(controller)
    assert "host.v1" not in again and len(again) == len(NAMES) - 1


INTERCEPT_OK = {"protocols": ["tcp", "udp"], "addresses": ["*.example.ziti", "10.0.0.0/24", "app.ziti"],
                "portRanges": [{"low": 80, "high": 443}], "dialOptions": {"identity": "$dst_ip",
                                                                          "connectTimeoutSeconds": 10}}
HOST_OK = {"forwardProtocol": True, "allowedProtocols": ["tcp"], "address": "localhost", "port": 8080,
           "listenOptions": {"bindUsingEdgeIdentity": True, "precedence": "required"},
           "portChecks": [{"address": "localhost:8080", "interval": "5s", "timeout": "500ms",
                           "actions": [{"trigger": "fail", "action": "mark unhealthy"}]}]}


@pytest.mark.parametrize(("type_name", "data"), [
    ("intercept.v1", INTERCEPT_OK),
    ("host.v1", HOST_OK),
    ("host.v2", {"terminators": [HOST_OK, {"protocol": "udp", "address": "10.1.1.1", "port": 53}]}),
    ("ziti-tunneler-client.v1", {"hostname": "app.ziti", "port": 443}),
    ("ziti-tunneler-server.v1", {"protocol": None, "hostname": "localhost", "port": 8443}),
])
async def test_valid_configs_are_accepted(tmp_path: Path, type_name: str, data: dict[str, Any]) -> None:
    async with running(tmp_path) as controller:
        config = await controller.domain.create("configs", {"name": "c", "configTypeId": NAMES[type_name],
                                                            "data": data})
        assert config["data"] == data


@pytest.mark.parametrize(("type_name", "data", "field", "reason"), [
    ("intercept.v1", {**INTERCEPT_OK, "portRanges": [{"low": 80, "high": 70000}]}, "data.portRanges[0].high",
     "data.portRanges[0].high in body should be less than or equal to 65535"),
    ("intercept.v1", {key: v for key, v in INTERCEPT_OK.items() if key != "addresses"}, "data.addresses",
     "data.addresses in body is required"),
    ("intercept.v1", {**INTERCEPT_OK, "protocols": ["icmp"]}, "data.protocols[0]",
     "data.protocols[0] in body should be one of ['tcp', 'udp']"),
    ("intercept.v1", {**INTERCEPT_OK, "addresses": []}, "data.addresses",
     "data.addresses in body should have at least 1 items"),
    ("host.v1", {"protocol": "tcp", "port": 80}, "data.address", "data.address in body is required"),
    ("host.v1", {key: v for key, v in HOST_OK.items() if key != "allowedProtocols"}, "data.allowedProtocols",
     "data.allowedProtocols in body is required"),
    ("host.v2", {"terminators": [{"protocol": "tcp", "address": "x", "port": -1}]}, "data.terminators[0].port",
     "data.terminators[0].port in body should be greater than or equal to 0"),
    ("ziti-tunneler-client.v1", {"hostname": "app.ziti"}, "data.port", "data.port in body is required"),
])
async def test_invalid_configs_are_refused_naming_the_field(tmp_path: Path, type_name: str, data: dict[str, Any],
                                                            field: str, reason: str) -> None:
    async with running(tmp_path) as controller:
        with pytest.raises(ApiError) as refused:
            await controller.domain.create("configs", {"name": "c", "configTypeId": NAMES[type_name], "data": data})
        assert refused.value.code == "COULD_NOT_VALIDATE"
        assert refused.value.cause is not None
        assert (refused.value.cause["field"], refused.value.cause["reason"]) == (field, reason)
        # A config that exists is held to its type's schema on update too.
        config = await controller.domain.create("configs", {"name": "ok", "configTypeId": NAMES["intercept.v1"],
                                                            "data": INTERCEPT_OK})
        with pytest.raises(ApiError):
            await controller.domain.replace("configs", config["id"], {"data": {"protocols": []}}, Mode.PATCH)

