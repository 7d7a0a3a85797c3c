"""The controller state a fuzz run starts from: decoys that spare the harness's credential, and a service the
default admin may use so that the client API has something to list and dial.

Everything is made through the management API with the default admin's session, as an operator would.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import httpx

from tests.fuzz.harness import Harness, admin_client

__all__ = ["DECOY_NAME", "with_decoys", "with_service"]

DECOY_NAME = "fuzz-decoy"


def _data(reply: httpx.Response) -> Any:
    """The ``data`` of a successful answer.

    Raises:
        httpx.HTTPStatusError: the answer is not a success.
    """
    reply.raise_for_status()
    return reply.json()["data"]


def with_decoys(harness: Harness) -> Harness:
    """``harness`` completed with the default admin's ids and a decoy of each row its login depends on: an auth
    policy like the admin's, an identity under it, and that identity's own password authenticator."""
    with admin_client(harness) as api:
        admin = _data(api.get("/current-identity"))
        policy_id = str(admin["authPolicyId"])
        password_ids = [a["id"] for a in _data(api.get("/current-identity/authenticators")) if a["method"] == "updb"]
        policy = _data(api.get(f"/auth-policies/{policy_id}"))
        decoy_policy = _data(api.post("/auth-policies", json={
            "name": DECOY_NAME, "primary": policy["primary"], "secondary": policy["secondary"]}))["id"]
        decoy_identity = _data(api.post("/identities", json={
            "name": DECOY_NAME, "type": "Default", "isAdmin": True, "authPolicyId": decoy_policy}))["id"]
        decoy_password = _data(api.post("/authenticators", json={
            "method": "updb", "identityId": decoy_identity, "username": DECOY_NAME,
            "password": secrets.token_urlsafe(24)}))["id"]
    redirects = {"authenticators": {password_id: decoy_password for password_id in password_ids},
                 "auth-policies": {policy_id: decoy_policy}}
    return replace(harness, admin_id=str(admin["id"]), admin_policy_id=policy_id, redirects=redirects,
                   decoy_identity_id=decoy_identity)


def with_service(harness: Harness) -> None:
    """Make a service that the default admin may dial and bind (the client API's services, their posture queries and
    session requests then have a row to work on)."""
    with admin_client(harness) as api:
        admin_id = _data(api.get("/current-identity"))["id"]
        service_id = _data(api.post("/services", json={"name": "fuzz-service", "encryptionRequired": True}))["id"]
        for kind in ("Dial", "Bind"):
            _data(api.post("/service-policies", json={
                "name": f"fuzz-{kind.lower()}", "type": kind, "semantic": "AnyOf",
                "identityRoles": [f"@{admin_id}"], "serviceRoles": [f"@{service_id}"]}))
