"""End to end over a real socket: MFA enrolment with a TOTP from pyotp, posture reports, sessions, a revocation."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_e2e import ADMIN, Server, running
from tests.support import totp

CLIENT = "/edge/client/v1"


async def _login(client: httpx.AsyncClient, username: str, password: str) -> str:
    reply = await client.post("/authenticate", params={"method": "password"},
                              json={"username": username, "password": password})
    assert reply.status_code == 200, reply.text
    return str(reply.headers["zt-session"])


async def _create(client: httpx.AsyncClient, path: str, body: dict[str, Any], token: str) -> str:
    reply = await client.post(path, json=body, headers={"zt-session": token})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["data"]["id"])


async def test_mfa_posture_and_revocation_over_tls(tmp_path: Path) -> None:
    async with running(tmp_path) as server:
        await _scenario(server)


async def _scenario(server: Server) -> None:
    async with server.client() as mgmt:
        admin = await _login(mgmt, ADMIN["username"], ADMIN["password"])
        await _create(mgmt, "/edge-routers", {"name": "er1"}, admin)
        await _create(mgmt, "/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                      "edgeRouterRoles": ["#all"]}, admin)
        await _create(mgmt, "/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf",
                                                              "serviceRoles": ["#all"],
                                                              "edgeRouterRoles": ["#all"]}, admin)
        mac_service = await _create(mgmt, "/services", {"name": "mac-svc", "encryptionRequired": True,
                                                        "roleAttributes": ["mac"]}, admin)
        mfa_service = await _create(mgmt, "/services", {"name": "mfa-svc", "encryptionRequired": True,
                                                        "roleAttributes": ["mfa"]}, admin)
        await _create(mgmt, "/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                "macAddresses": ["aa:bb:cc:dd:ee:ff"]}, admin)
        await _create(mgmt, "/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                                "timeoutSeconds": 3600}, admin)
        for name in ("mac", "mfa"):
            await _create(mgmt, "/service-policies", {"name": f"p-{name}", "type": "Dial", "semantic": "AllOf",
                                                      "identityRoles": ["#u"], "serviceRoles": [f"#{name}"],
                                                      "postureCheckRoles": [f"#{name}"]}, admin)
        user = await _create(mgmt, "/identities", {"name": "laptop", "type": "Device", "isAdmin": False,
                                                   "roleAttributes": ["u"]}, admin)
        await _create(mgmt, "/authenticators", {"identityId": user, "method": "updb", "username": "laptop",
                                                "password": "laptop-password"}, admin)

    context = ssl.create_default_context(cafile=str(server.controller.settings.data_dir / "pki" / "ca.pem"))
    async with httpx.AsyncClient(base_url=server.url + CLIENT, verify=context, timeout=30) as client:
        token = await _login(client, "laptop", "laptop-password")
        headers = {"zt-session": token}
        assert (await client.post("/sessions", json={"serviceId": mfa_service}, headers=headers)).status_code == 409

        assert (await client.post("/current-identity/mfa", headers=headers)).status_code == 201
        url = (await client.get("/current-identity/mfa", headers=headers)).json()["data"]["provisioningUrl"]
        secret = url.split("secret=")[1].split("&")[0]
        # Each TOTP step is accepted once, and this runs on the real clock (no sleeping to the next step): the
        # enrolment brings the current step's code and the MFA login below the next step's (one step ahead is
        # within the window).
        code = totp(server.controller, secret)
        verified = await client.post("/current-identity/mfa/verify", json={"code": code}, headers=headers)
        assert verified.status_code == 200, verified.text
        mfa_session = await client.post("/sessions", json={"serviceId": mfa_service}, headers=headers)
        assert mfa_session.status_code == 201, mfa_session.text

        good = {"id": "x", "typeId": "MAC", "macAddresses": ["AA-BB-CC-DD-EE-FF"]}
        assert (await client.post("/posture-response", json=good, headers=headers)).status_code == 201
        mac_session = await client.post("/sessions", json={"serviceId": mac_service}, headers=headers)
        assert mac_session.status_code == 201, mac_session.text
        session_id = mac_session.json()["data"]["id"]

        bad = {"id": "x", "typeId": "MAC", "macAddresses": ["11-22-33-44-55-66"]}
        assert (await client.post("/posture-response", json=bad, headers=headers)).status_code == 201
        mine = await client.get("/sessions", headers=headers)
        ids = {s["id"] for s in mine.json()["data"]}
        assert session_id not in ids
        assert mfa_session.json()["data"]["id"] in ids

        # A new login must prove MFA before it may create sessions.
        second = await _login(client, "laptop", "laptop-password")
        partial = await client.post("/sessions", json={"serviceId": mfa_service}, headers={"zt-session": second})
        assert partial.status_code == 401
        code = totp(server.controller, secret, 1)
        done = await client.post("/authenticate/mfa", json={"code": code}, headers={"zt-session": second})
        assert done.status_code == 200
        again = await client.post("/sessions", json={"serviceId": mfa_service}, headers={"zt-session": second})
        assert again.status_code == 201
