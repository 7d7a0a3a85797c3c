"""Informational routes that need no session: the root document and version information."""

from __future__ import annotations

import platform
from typing import Any

from quart import Blueprint, Response

from controller.root import VERSION, Controller
from web.crud import RouteInfo, Routes
from web.envelope import ok

__all__ = ["register", "register_root", "version_data"]


def version_data(controller: Controller) -> dict[str, Any]:
    apis = {
        "edge": {"v1": {"path": "/edge/client/v1", "apiBaseUrls": []}},
        "edge-client": {"v1": {"path": "/edge/client/v1", "apiBaseUrls": []}},
        "edge-management": {"v1": {"path": "/edge/management/v1", "apiBaseUrls": []}},
    }
    return {
        "version": f"v{VERSION}", "revision": "tollgate", "buildDate": "", "runtimeVersion": platform.python_version(),
        "os": platform.system().lower(), "arch": platform.machine(), "apiVersions": apis,
        "capabilities": [],
    }


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    async def version() -> Response:
        return ok(version_data(controller))

    routes.add(bp, RouteInfo(api, "GET", "/version", "listVersion", "Informational", admin=False), version)
    routes.add(bp, RouteInfo(api, "GET", "/", "listRoot", "Informational", admin=False), version)


def register_root(bp: Blueprint, controller: Controller) -> None:
    async def version() -> Response:
        return ok(version_data(controller))

    bp.add_url_rule("/version", endpoint="rootVersion", view_func=version, methods=["GET"])
