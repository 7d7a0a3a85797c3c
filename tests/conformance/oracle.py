"""The reference specs (``../shared/reference/``) as a test oracle, and what our application serves.

When the reference files are absent every test that needs them is skipped with the path it looked at, so the suite
runs anywhere. Parametrized tests get one placeholder case (``None``) in that situation, which skips.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from controller.model.registry import Registry
from controller.runtime.composition import Controller
from tests.support import make_settings
from web.app import create_app
from web.openapi import build_document
from web.route_table import RouteInfo

REFERENCE_DIR = (Path(__file__).resolve().parents[2] / ".." / "shared" / "reference").resolve()
FILES = {"management": "management.yml", "client": "client.yml"}
METHODS = ("get", "post", "put", "patch", "delete")

# The first path segments of the management API this controller covers (its kinds, their association and
# role-attribute lists, authentication, the caller's own session and identity, and the informational operations).
# Every reference operation under these is expected to be routed; see test_routes.NOT_YET for the exceptions.
MANAGEMENT_COVERED = frozenset({
    "", "version", "enumerated-capabilities", "summary", "specs", ".well-known",
    "authenticate", "current-api-session", "current-identity",
    "identities", "identity-types", "services", "service-policies", "posture-checks", "posture-check-types",
    "edge-routers", "routers", "transit-routers", "edge-router-policies", "service-edge-router-policies",
    "terminators", "config-types", "configs", "auth-policies", "external-jwt-signers", "authenticators",
    "api-sessions", "sessions", "cas", "enrollments", "database", "controllers",
    "identity-role-attributes", "service-role-attributes", "edge-router-role-attributes",
    "posture-check-role-attributes",
})
CLIENT_COVERED = frozenset({
    "", "version", "enumerated-capabilities", "specs", ".well-known", "protocols",
    "authenticate", "current-api-session", "current-identity", "services", "sessions",
    "posture-response", "posture-response-bulk", "external-jwt-signers", "enroll", "controllers",
})
COVERED = {"management": MANAGEMENT_COVERED, "client": CLIENT_COVERED}


@functools.cache
def load(api: str) -> dict[str, Any] | None:
    path = REFERENCE_DIR / FILES[api]
    if not path.exists():
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open() as fh:
        document: dict[str, Any] = yaml.load(fh, Loader=loader)  # a safe loader (C if built)
    return document


def require(api: str) -> dict[str, Any]:
    """The reference document of ``api``; skips the test when it is not there."""
    document = load(api)
    if document is None:
        pytest.skip(f"reference spec not present at {REFERENCE_DIR / FILES[api]}")
    return document


def segment(path: str) -> str:
    """The first segment of an API path (``""`` for the root)."""
    return path.strip("/").split("/")[0]


def operations(api: str) -> dict[str, dict[str, Any]]:
    """``"METHOD /path"`` -> reference operation, for every operation of ``api`` (empty when absent)."""
    document = load(api)
    if document is None:
        return {}
    return {f"{method.upper()} {path}": op for path, item in document["paths"].items()
            for method, op in item.items() if method in METHODS}


def covered(api: str) -> dict[str, dict[str, Any]]:
    """The reference operations under the covered first segments."""
    return {key: op for key, op in operations(api).items() if segment(key.split(" ", 1)[1]) in COVERED[api]}


def cases(api: str, items: Iterable[Any], ident: Callable[[Any], str]) -> list[Any]:
    """pytest params for ``items``; one skipping placeholder when the reference is absent."""
    if load(api) is None:
        return [pytest.param(None, id="no-reference")]
    return [pytest.param(item, id=ident(item)) for item in items]


def definition(document: Mapping[str, Any], ref: str) -> dict[str, Any]:
    result: dict[str, Any] = document["definitions"][ref.rsplit("/", 1)[-1]]
    return result


def required_fields(document: Mapping[str, Any], schema: Mapping[str, Any]) -> set[str]:
    """The required property names of a schema, following ``$ref`` and ``allOf``."""
    if "$ref" in schema:
        return required_fields(document, definition(document, schema["$ref"]))
    found = set(schema.get("required", ()))
    for part in schema.get("allOf", ()):
        found |= required_fields(document, part)
    return found


def body_schema(op: Mapping[str, Any]) -> dict[str, Any] | None:
    for param in op.get("parameters", ()):
        if param.get("in") == "body":
            schema: dict[str, Any] = param["schema"]
            return schema
    return None


def subtypes(document: Mapping[str, Any], base_ref: str) -> dict[str, str]:
    """Discriminator value (``x-class``) -> name of each definition that extends ``base_ref`` with ``allOf``."""
    found: dict[str, str] = {}
    for name, schema in document["definitions"].items():
        if any(part.get("$ref") == base_ref for part in schema.get("allOf", ())) and "x-class" in schema:
            found[schema["x-class"]] = name
    return found


def openapi_path(rule: str) -> str:
    """A Quart rule (``/identities/<id>``) as an OpenAPI path (``/identities/{id}``)."""
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule)


@dataclass(frozen=True)
class Served:
    """What one application serves: its recorded routes, its URL rules and the registry behind them."""

    routes: list[RouteInfo]
    rules: list[tuple[str, str]]  # (METHOD, rule) of every URL rule, HEAD/OPTIONS left out
    registry: Registry

    def keys(self, api: str) -> set[str]:
        return {f"{r.method} {r.path}" for r in self.routes if r.api == api}


@functools.cache
def document(api: str) -> dict[str, Any]:
    """Our generated document of ``api`` for the application :func:`served` describes."""
    app = served()
    return build_document(api, app.routes, app.registry)


@functools.cache
def served() -> Served:
    """Build the application once on a scratch data directory (no services run) and record what it serves."""
    async def build() -> Served:
        with tempfile.TemporaryDirectory() as scratch:
            controller = Controller.open(make_settings(Path(scratch)))
            try:
                app = create_app(controller)
                rules = [(method, rule.rule) for rule in app.url_map.iter_rules()
                         for method in sorted(rule.methods or ()) if method not in ("HEAD", "OPTIONS")]
                return Served(list(app.extensions["tollgate_routes"]), rules, controller.registry)
            finally:
                controller.close()

    return trio.run(build)
