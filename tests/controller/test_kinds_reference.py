"""The router, policy, terminator, config and JWT signer specs held to the reference spec, when it is present.

For each kind and each write mode, the fields a request must carry and the fields it may carry equal the reference's
``<kind>Create`` / ``<kind>Update`` / ``<kind>Patch`` definitions, and every generic route of these kinds (the
``transit-routers`` alias included) is a reference operation with the same method, path and operationId.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.model.field import Mode
from controller.resources.catalog import RESOURCES
from controller.runtime.composition import Controller
from web.app import create_app

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "management.yml"
pytestmark = pytest.mark.skipif(not REFERENCE.exists(), reason="reference spec not present")

DEFINITIONS = {
    "edge-routers": "edgeRouter",
    "routers": "router",
    "edge-router-policies": "edgeRouterPolicy",
    "service-edge-router-policies": "serviceEdgeRouterPolicy",
    "terminators": "terminator",
    "config-types": "configType",
    "configs": "config",
    "external-jwt-signers": "externalJwtSigner",
}
SUFFIXES = {Mode.CREATE: "Create", Mode.UPDATE: "Update", Mode.PATCH: "Patch"}


@cache
def reference() -> dict[str, Any]:
    with REFERENCE.open() as stream:
        loaded: dict[str, Any] = yaml.safe_load(stream)
    return loaded


def _resource(kind: str) -> Any:
    return next(r for r in RESOURCES if r.kind == kind)


CASES = [pytest.param(kind, mode, id=f"{kind}-{mode.value}") for kind in DEFINITIONS for mode in Mode]


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_required_fields_equal_the_reference(kind: str, mode: Mode) -> None:
    definition = reference()["definitions"][DEFINITIONS[kind] + SUFFIXES[mode]]
    fields = [f for f in _resource(kind).fields if not f.name.startswith("_")]
    assert {f.name for f in fields if mode in f.required} == set(definition.get("required", []))


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_writable_fields_equal_the_reference(kind: str, mode: Mode) -> None:
    definition = reference()["definitions"][DEFINITIONS[kind] + SUFFIXES[mode]]
    fields = [f for f in _resource(kind).fields if not f.name.startswith("_")]
    assert {f.name for f in fields if mode in f.writable} == set(definition["properties"]) - {"tags"}


async def test_routes_are_reference_operations(controller: Controller) -> None:
    operations = {(method.upper(), path): op["operationId"] for path, ops in reference()["paths"].items()
                  for method, op in ops.items() if isinstance(op, dict) and "operationId" in op}
    served = [info for info in create_app(controller).extensions["tollgate_routes"]
              if info.kind in DEFINITIONS and info.action != "association"]
    assert served
    for info in served:
        assert operations.get((info.method, info.path)) == info.operation_id, (info.method, info.path)
    alias = {info.operation_id for info in served if info.path.startswith("/transit-routers")}
    assert alias == {"listTransitRouters", "createTransitRouter", "detailTransitRouter", "updateTransitRouter",
                     "patchTransitRouter", "deleteTransitRouter"}
