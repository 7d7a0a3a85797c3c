"""Legacy root paths: what old SDKs call without a prefix (or under ``/edge/v1``) reaches the Client API."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from controller.runtime.composition import VERSION
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, CLIENT, MGMT, Api
from web.legacy_paths import LegacyPaths, rewrite_legacy_path


def _handled_paths(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The path each request was routed as, from the access log."""
    return [vars(r)["path"] for r in caplog.records if r.name == "tollgate.access"]


@pytest.mark.parametrize("path", ["/version", "/", "/edge/v1/version"])
async def test_version_paths_reach_the_client_version(anon: Api, caplog: pytest.LogCaptureFixture,
                                                      path: str) -> None:
    with caplog.at_level(logging.INFO, logger="tollgate.access"):
        reply = await anon.get(path, base="")
    assert reply.status == 200
    assert reply.data["version"] == f"v{VERSION}"
    assert reply.data["apiVersions"]["edge"]["v1"]["path"] == CLIENT
    assert _handled_paths(caplog) == [f"{CLIENT}/version"]


async def test_root_cacerts_is_the_client_apis(anon: Api, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tollgate.access"):
        root = await anon.get("/.well-known/est/cacerts", base="")
    client = await anon.get("/.well-known/est/cacerts", base=CLIENT)
    assert root.status == 200
    assert root.headers["Content-Type"] == "application/pkcs7-mime"
    assert root.raw == client.raw
    assert _handled_paths(caplog) == [f"{CLIENT}/.well-known/est/cacerts"]


async def test_root_authenticate_logs_in_through_the_client_api(anon: Api,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tollgate.access"):
        reply = await anon.post("/authenticate", {"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD},
                                query={"method": "password"}, base="")
    assert reply.status == 200, reply.body
    assert _handled_paths(caplog) == [f"{CLIENT}/authenticate"]
    session = await anon.with_token(reply.data["token"]).get("/current-identity", base="/edge/v1")
    assert session.status == 200
    assert session.data["isAdmin"] is True


async def test_management_and_client_paths_are_untouched(admin: Api, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tollgate.access"):
        summary = await admin.get("/summary", base=MGMT)
        protocols = await admin.get("/protocols", base=CLIENT)
        unknown = await admin.get("/fabric/v1/routers", base="")
    assert (summary.status, protocols.status, unknown.status) == (200, 200, 404)
    assert _handled_paths(caplog) == [f"{MGMT}/summary", f"{CLIENT}/protocols", "/fabric/v1/routers"]


async def test_a_management_only_path_at_the_root_is_the_client_apis_and_absent(admin: Api) -> None:
    # /summary exists only in the management API; at the root it means the client API's, which has none.
    reply = await admin.get("/summary", base="")
    assert reply.status == 404


@pytest.mark.parametrize(("path", "routed"), [
    ("/", f"{CLIENT}/version"),
    ("/version", f"{CLIENT}/version"),
    ("/edge/v1", CLIENT),
    ("/edge/v1/services/x", f"{CLIENT}/services/x"),
    ("/enroll", f"{CLIENT}/enroll"),
    ("/.well-known/est/cacerts", f"{CLIENT}/.well-known/est/cacerts"),
    ("/edge/management/v1/identities", "/edge/management/v1/identities"),
    ("/edge/client/v1/services", "/edge/client/v1/services"),
    ("/edge", "/edge"),
    ("/edge/v2/x", "/edge/v2/x"),
    ("/fabric", "/fabric"),
    ("/fabricated", f"{CLIENT}/fabricated"),
    ("http://host/x", "http://host/x"),
])
def test_rewrite_rules(path: str, routed: str) -> None:
    assert rewrite_legacy_path(path, CLIENT) == routed


@pytest.mark.parametrize(("path", "raw_path", "routed_raw"), [
    ("/a b", b"/a%20b", f"{CLIENT}/a%20b".encode()),
    ("/edge/v1/a b", b"/edge/v1/a%20b", f"{CLIENT}/a%20b".encode()),
    ("/version", b"/version", f"{CLIENT}/version".encode()),
    # The client encoded part of the prefix itself: the raw path is re-encoded from the rewritten path.
    ("/edge/v1/a b", b"/edge%2Fv1/a%20b", f"{CLIENT}/a%20b".encode()),
    ("/edge/client/v1/a b", b"/edge/client/v1/a%20b", b"/edge/client/v1/a%20b"),
])
async def test_raw_path_follows_the_path(path: str, raw_path: bytes, routed_raw: bytes) -> None:
    seen: list[dict[str, Any]] = []

    async def record(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)

    scope = {"type": "http", "path": path, "raw_path": raw_path}
    await LegacyPaths(record, CLIENT)(scope, None, None)
    assert seen[0]["path"] == rewrite_legacy_path(path, CLIENT)
    assert seen[0]["raw_path"] == routed_raw
    assert scope == {"type": "http", "path": path, "raw_path": raw_path}  # the caller's scope is not changed


async def test_lifespan_scopes_pass_through() -> None:
    seen: list[dict[str, Any]] = []

    async def record(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)

    scope = {"type": "lifespan"}
    await LegacyPaths(record, CLIENT)(scope, None, None)
    assert seen == [scope]
