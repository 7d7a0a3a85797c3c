"""Informational routes: version, capabilities, specs, summary counts and the well-known CA store."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.serialization.pkcs7 import load_der_pkcs7_certificates

from controller.runtime.composition import VERSION, Controller
from tests.support import CLIENT, MGMT, Api, make_user

BASES = [pytest.param(MGMT, id="management"), pytest.param(CLIENT, id="client")]


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("path", ["/version", "/"])
async def test_version_needs_no_session(anon: Api, base: str, path: str) -> None:
    reply = await anon.get(path, base=base)
    assert reply.status == 200
    assert reply.data["version"] == f"v{VERSION}"
    assert reply.data["apiVersions"]["edge-management"]["v1"]["path"] == MGMT
    assert reply.data["apiVersions"]["edge-client"]["v1"]["path"] == CLIENT


async def test_root_version(anon: Api) -> None:
    reply = await anon.get("/version", base="")
    assert reply.status == 200
    assert reply.data["version"] == f"v{VERSION}"


@pytest.mark.parametrize("base", BASES)
async def test_enumerated_capabilities_lists_every_known_capability(anon: Api, base: str) -> None:
    reply = await anon.get("/enumerated-capabilities", base=base)
    assert reply.status == 200
    assert reply.data == ["OIDC_AUTH", "HA_CONTROLLER"]
    assert reply.body["meta"] == {}


@pytest.mark.parametrize("base", BASES)
async def test_specs_list_and_detail_need_no_session(anon: Api, base: str) -> None:
    reply = await anon.get("/specs", base=base)
    assert reply.status == 200
    assert [s["id"] for s in reply.data] == ["edge-management", "edge-client"]
    for spec in reply.data:
        assert spec["name"] == spec["id"]
        assert spec["_links"]["spec"]["href"] == f"./specs/{spec['id']}/spec"
        detail = await anon.get(f"/specs/{spec['id']}", base=base)
        assert detail.status == 200
        assert detail.data == spec


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize(("spec_id", "base_path", "path"), [
    ("edge-management", MGMT, "/identities/{id}"),
    ("edge-client", CLIENT, "/posture-response"),
])
async def test_spec_body_is_the_generated_document(anon: Api, base: str, spec_id: str, base_path: str,
                                                   path: str) -> None:
    reply = await anon.get(f"/specs/{spec_id}/spec", base=base)
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.body["swagger"] == "2.0"
    assert reply.body["basePath"] == base_path
    assert path in reply.body["paths"]
    assert "/specs/{id}/spec" in reply.body["paths"]


@pytest.mark.parametrize("path", ["/specs/nope", "/specs/nope/spec"])
async def test_unknown_spec_is_not_found(anon: Api, path: str) -> None:
    reply = await anon.get(path)
    assert reply.status == 404
    assert reply.error["code"] == "NOT_FOUND"


@pytest.mark.parametrize("base", [MGMT, CLIENT, ""], ids=["management", "client", "root"])
async def test_cacerts_is_a_pkcs7_store_holding_the_ca(anon: Api, controller: Controller, base: str) -> None:
    reply = await anon.get("/.well-known/est/cacerts", base=base)
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/pkcs7-mime"
    certificates = load_der_pkcs7_certificates(base64.b64decode(reply.raw, validate=True))
    assert certificates == [controller.pki.ca_cert]


async def test_summary_needs_an_admin_session(anon: Api, admin: Api) -> None:
    reply = await anon.get("/summary")
    assert reply.status == 401
    assert reply.error["code"] == "UNAUTHORIZED"
    _, user = await make_user(admin, "summary-user")
    reply = await user.get("/summary")
    assert reply.status == 401
    assert reply.error["code"] == "UNAUTHORIZED"


async def test_summary_counts_change_with_writes(admin: Api, controller: Controller) -> None:
    before = (await admin.get("/summary")).data
    # Every stored kind has a count, keyed as OpenZiti keys it.
    assert {"identities", "identityTypes", "services", "services.edge", "servicePolicies", "postureChecks",
            "postureCheckTypes", "apiSessions", "authenticators", "authPolicies", "sessions", "routers",
            "routers.edge", "edgeRouterPolicies", "serviceEdgeRouterPolicies", "terminators", "configTypes",
            "configs", "externalJwtSigners", "mfas"} <= set(before)
    assert before["identityTypes"] == 5
    assert before["postureCheckTypes"] == 6
    assert before["identities"] == 1  # the default admin
    assert before["apiSessions"] == 1  # the admin's own
    assert before["services"] == before["services.edge"] == 0

    await admin.create("/services", {"name": "counted", "encryptionRequired": True})
    await make_user(admin, "counted-user")  # an identity, its authenticator and its API session
    await admin.create("/posture-checks", {"name": "counted-check", "typeId": "MFA"})
    # Edge routers count as routers too, as OpenZiti's fabric routers include its edge routers.
    await admin.create("/edge-routers", {"name": "counted-edge-router"})
    await admin.create("/routers", {"name": "counted-router"})
    after = (await admin.get("/summary")).data

    changed = {key: after[key] - before[key] for key in before if after[key] != before[key]}
    # Each new router waits for its enrollment.
    assert changed == {"services": 1, "services.edge": 1, "identities": 1, "authenticators": 1, "apiSessions": 1,
                       "postureChecks": 1, "routers": 2, "routers.edge": 1, "enrollments": 2}
    assert set(after) == set(before)
    assert all(isinstance(count, int) for count in after.values())


async def test_protocols_name_the_address_we_were_reached_at(anon: Api) -> None:
    reply = await anon.get("/protocols", base=CLIENT, headers={"Host": "ctrl.example:1280"})
    assert reply.status == 200
    assert reply.data == {"https": {"address": "ctrl.example:1280"}}
