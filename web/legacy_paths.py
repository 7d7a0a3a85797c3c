"""``LegacyPaths``: the path rewriting the OpenZiti controller does for SDKs that predate the prefixed APIs.

Older SDKs (the C SDK, early Go SDKs) call the Client API at the root: ``GET /version`` and ``GET /`` for the
version, ``/enroll``, ``/authenticate``, ``/.well-known/est/cacerts`` and the rest without a prefix, or under the
old ``/edge/v1`` prefix. Like the real controller, every request is rewritten before routing:

* ``/`` and ``/version`` become the Client API's ``/version``;
* ``/edge/v1`` and anything under it move under the Client API's base;
* any other path outside ``/edge``, ``/fabric`` and ``/console`` gets the Client API's base in front;
* paths under ``/edge`` (both current APIs), ``/fabric`` and ``/console`` (the web console, no SDK's) are left
  alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

__all__ = ["LegacyPaths", "rewrite_legacy_path"]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

_LEGACY_CLIENT_BASE = "/edge/v1"
_VERSION_PATHS = frozenset({"/", "/version"})
_KEPT_ROOTS = ("/edge", "/fabric", "/console")


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def _prefix_swap(path: str, client_base: str) -> tuple[str, str] | None:
    """``(old, new)``: the rewrite replaces the leading ``old`` of ``path`` by ``new``; ``None``: no rewrite."""
    if path in _VERSION_PATHS:
        return path, client_base + "/version"
    if _under(path, _LEGACY_CLIENT_BASE):
        return _LEGACY_CLIENT_BASE, client_base
    if not path.startswith("/") or any(_under(path, root) for root in _KEPT_ROOTS):
        return None
    return "", client_base


def rewrite_legacy_path(path: str, client_base: str) -> str:
    """``path`` as the application routes it, given the Client API's base path (``/edge/client/v1``)."""
    swap = _prefix_swap(path, client_base)
    return path if swap is None else swap[1] + path[len(swap[0]):]


class LegacyPaths:
    """ASGI middleware applying :func:`rewrite_legacy_path` to HTTP and WebSocket requests.

    ``path`` is rewritten and ``raw_path`` (when present) is kept consistent with it: the same prefix is replaced in
    the raw bytes, or, if the client percent-encoded that prefix, the raw path is re-encoded from the new path.

    Args:
        app: the ASGI application to call.
        client_base: the Client API's base path.
    """

    def __init__(self, app: ASGIApp, client_base: str) -> None:
        self._app = app
        self._client_base = client_base

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            path: str = scope["path"]
            swap = _prefix_swap(path, self._client_base)
            if swap is not None:
                old, new = swap
                new_path = new + path[len(old):]
                scope = {**scope, "path": new_path}
                raw: bytes | None = scope.get("raw_path")
                if raw is not None:
                    old_raw = old.encode("ascii")
                    scope["raw_path"] = (new.encode("ascii") + raw[len(old_raw):] if raw.startswith(old_raw)
                                         else quote(new_path).encode("ascii"))
        await self._app(scope, receive, send)
