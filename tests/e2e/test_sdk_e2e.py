"""End to end with a real OpenZiti endpoint: the C SDK from PyPI (``openziti==0.6.0``, libziti 0.29.3) enrols from
the JWT of an identity made through the management API, authenticates with its certificate, reports OS, MAC,
DOMAIN and PROCESS posture and asks for a Dial session, all against ``serve_controller`` on a real TLS socket.

The SDK runs in its own process group (tests/e2e/sdk_driver.py), under hard deadlines: it hangs rather than fails
in several cases. Everything is asserted on the controller's side, through the management API.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.e2e.test_e2e import ADMIN, running

pytestmark = pytest.mark.skipif(importlib.util.find_spec("openziti") is None,
                                reason="the OpenZiti SDK (openziti==0.6.0, Linux x86_64 wheel) is not installed")

DRIVER = Path(__file__).with_name("sdk_driver.py")
# The PROCESS check names the interpreter that runs the driver: libziti compares /proc/*/exe to the path as given.
RUNNING_BINARY = os.path.realpath(sys.executable)


async def _create(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await client.post(path, json=body)
    assert reply.status_code == 201, reply.text
    return dict(reply.json()["data"])


async def _model(client: httpx.AsyncClient) -> dict[str, Any]:
    """An identity to enrol, the service it dials (OS and PROCESS checks), another service whose checks (MAC and
    DOMAIN) only make the SDK report that posture, and an edge router both services may use."""
    await _create(client, "/edge-routers", {"name": "er-1"})
    await _create(client, "/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                    "edgeRouterRoles": ["#all"]})
    await _create(client, "/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf",
                                                            "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    dialled = await _create(client, "/services", {"name": "dialled", "encryptionRequired": True})
    reported = await _create(client, "/services", {"name": "reported", "encryptionRequired": True})
    await _create(client, "/posture-checks", {"name": "os", "typeId": "OS", "roleAttributes": ["dial"],
                                              "operatingSystems": [{"type": "LINUX", "versions": []}]})
    await _create(client, "/posture-checks", {"name": "process", "typeId": "PROCESS", "roleAttributes": ["dial"],
                                              "process": {"osType": "Linux", "path": RUNNING_BINARY}})
    await _create(client, "/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["report"],
                                              "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    await _create(client, "/posture-checks", {"name": "domain", "typeId": "DOMAIN", "roleAttributes": ["report"],
                                              "domains": ["example.com"]})
    for name, service in (("dial", dialled), ("report", reported)):
        await _create(client, "/service-policies", {
            "name": f"p-{name}", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#endpoints"],
            "serviceRoles": [f"@{service['id']}"], "postureCheckRoles": [f"#{name}"]})
    identity = await _create(client, "/identities", {"name": "sdk-endpoint", "type": "Device", "isAdmin": False,
                                                     "roleAttributes": ["endpoints"], "enrollment": {"ott": True}})
    return {"identity": identity, "service": dialled}


async def _run_driver(tmp_path: Path, jwt: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run the driver in its own process group; returns (exit status, its stage lines, its stderr)."""
    (tmp_path / "endpoint.jwt").write_text(jwt)
    stderr = tmp_path / "sdk.log"

    async def kill_group(process: trio.Process) -> None:
        os.killpg(process.pid, signal.SIGKILL)

    env = {k: v for k, v in os.environ.items() if k != "ZITI_IDENTITIES"}
    with stderr.open("wb") as log, trio.fail_after(55):
        # Awaited, never blocking: the controller serves the SDK from this very process.
        done = await trio.run_process(
            [sys.executable, str(DRIVER), str(tmp_path / "endpoint.jwt"), str(tmp_path / "endpoint.json"),
             "dialled", "--posture-wait", "3", "--deadline", "45"],
            stdin=subprocess.DEVNULL, capture_stdout=True, stderr=log, check=False, start_new_session=True,
            env={**env, "ZITI_LOG": "3"}, deliver_cancel=kill_group)
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    return done.returncode, lines, stderr.read_text(errors="replace")


async def test_the_c_sdk_enrols_logs_in_reports_posture_and_dials(tmp_path: Path) -> None:
    async with running(tmp_path / "data") as server, server.client() as client:
        login = await client.post("/authenticate", params={"method": "password"}, json=ADMIN)
        client.headers["zt-session"] = login.json()["data"]["token"]
        model = await _model(client)
        identity_id = model["identity"]["id"]
        jwt = model["identity"]["enrollment"]["ott"]["jwt"]

        status, stages, log = await _run_driver(tmp_path, jwt)
        assert status == 0, (stages, log[-4000:])
        by_stage = {line["stage"]: line for line in stages}
        assert [s["stage"] for s in stages] == ["enrolled", "loaded", "dial", "done"], (stages, log[-4000:])

        # The enrolment is consumed, and the certificate the SDK holds is the identity's authenticator.
        identity = (await client.get(f"/identities/{identity_id}")).json()["data"]
        assert identity["enrollment"] == {}
        assert identity["authenticators"]["cert"]["fingerprint"] == by_stage["enrolled"]["cert_sha1"]
        assert (await client.get(f"/identities/{identity_id}/enrollments")).json()["data"] == []

        # It logged in with that certificate: an API session with the SDK's own description of itself.
        sessions = (await client.get("/api-sessions", params={"filter": f'identityId = "{identity_id}"'})).json()
        api_session = sessions["data"][0]
        assert api_session["authenticatorId"] == identity["authenticators"]["cert"]["id"]
        assert api_session["sdkInfo"]["type"] == "ziti-sdk-c"
        assert api_session["envInfo"]["os"] == os.uname().sysname

        # Its posture reports: OS, MAC and DOMAIN a second after login, PROCESS just before the dial.
        posture = (await client.get(f"/identities/{identity_id}/posture-data")).json()["data"]
        assert posture["os"]["version"] == os.uname().release
        assert posture["os"]["build"] == os.uname().version
        assert posture["mac"]["addresses"]
        assert posture["domain"]["domain"] == ""
        digest = hashlib.sha512(await trio.Path(RUNNING_BINARY).read_bytes()).hexdigest()
        assert [(p["isRunning"], p["binaryHash"]) for p in posture["processes"]] == [(True, digest)]

        # The Dial session was granted (the SDK then finds no router to connect to: none is running).
        granted = (await client.get("/sessions", params={"filter": f'identityId = "{identity_id}"'})).json()
        assert [(s["serviceId"], s["type"]) for s in granted["data"]] == [(model["service"]["id"], "Dial")]
        assert (await client.get(f"/identities/{identity_id}/failed-service-requests")).json()["data"] == []
