"""A tiny synchronous HTTP client for setting up a benchmark (log in, report posture); not used under load."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from bench.servers import ADMIN_PASSWORD

__all__ = ["admin_token", "call"]

MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"


def call(base_url: str, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    """Send one request; returns (status, decoded JSON body or None)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base_url + path, data=data, method=method)
    if data is not None:
        request.add_header("content-type", "application/json")
    if token is not None:
        request.add_header("zt-session", token)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None


def admin_token(base_url: str) -> str:
    """Log the default admin in with its password (a real login: scrypt, API session)."""
    status, body = call(base_url, "POST", f"{MGMT}/authenticate?method=password", None,
                        {"username": "admin", "password": ADMIN_PASSWORD})
    if status != 200:
        raise RuntimeError(f"admin login failed: {status} {body}")
    return str(body["data"]["token"])
