"""Policy links remembered across read snapshots (``ReadContext.shared_cached``): shared while the policies stand,
recomputed as soon as a policy, service or check changes, and never stale for an identity whose roles changed."""

from __future__ import annotations

from typing import Any

from controller.access.grants import linking_policies
from controller.access.policy_links import reachable, selecting_policy_ids
from controller.runtime.composition import Controller
from tests.support import Api


def _links(controller: Controller, identity_id: str, service_id: str) -> tuple[frozenset[str], list[str]]:
    with controller.domain.read() as ctx:
        identity = ctx.txn.get("identities", identity_id)
        service = ctx.txn.get("services", service_id)
        assert identity is not None and service is not None
        selecting = selecting_policy_ids(ctx, "service-policies", "identities", identity)
        linking = [str(p["id"]) for p in linking_policies(ctx, identity, service)]
    return selecting, linking


async def _identity(admin: Api, name: str, roles: list[str]) -> str:
    return await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False,
                                              "roleAttributes": roles})


async def test_links_are_shared_across_snapshots_and_follow_every_change(controller: Controller,
                                                                          admin: Api) -> None:
    service = await admin.create("/services", {"name": "svc", "encryptionRequired": True, "roleAttributes": ["s"]})
    first = await _identity(admin, "first", ["u"])
    second = await _identity(admin, "second", ["u"])
    by_role = await admin.create("/service-policies", {
        "name": "by-role", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"], "serviceRoles": ["#s"]})
    by_name = await admin.create("/service-policies", {
        "name": "by-name", "type": "Bind", "semantic": "AllOf", "identityRoles": [f"@{second}"],
        "serviceRoles": ["#s"]})

    selecting, linking = _links(controller, first, service)
    assert selecting == {by_role} and linking == [by_role]
    assert _links(controller, second, service) == ({by_role, by_name}, sorted([by_role, by_name]))
    # The same answer object in a later snapshot: it was not derived again.
    again, _ = _links(controller, first, service)
    assert again is selecting

    patched = await admin.patch(f"/service-policies/{by_role}", {"identityRoles": ["#v"]})
    assert patched.status == 200
    assert _links(controller, first, service) == (frozenset(), [])
    assert _links(controller, second, service) == ({by_name}, [by_name])

    # Identities are not an access kind: a change of roles must still be seen, through the key.
    patched = await admin.patch(f"/identities/{first}", {"roleAttributes": ["v"]})
    assert patched.status == 200
    assert _links(controller, first, service) == ({by_role}, [by_role])

    assert (await admin.delete(f"/service-policies/{by_name}")).status == 200
    assert _links(controller, second, service) == (frozenset(), [])


async def test_reachable_routers_follow_router_policy_changes(controller: Controller, admin: Api) -> None:
    identity = await _identity(admin, "client", ["u"])
    router = await admin.create("/edge-routers", {"name": "er", "roleAttributes": ["r"]})
    policy = await admin.create("/edge-router-policies", {
        "name": "erp", "semantic": "AnyOf", "identityRoles": ["#u"], "edgeRouterRoles": ["#r"]})

    def routers() -> set[str]:
        with controller.domain.read() as ctx:
            row: Any = ctx.txn.get("identities", identity)
            return set(reachable(ctx, "edge-router-policies", "identities", row, "edge-routers"))

    assert routers() == {router}
    other = await admin.create("/edge-routers", {"name": "er2", "roleAttributes": ["r"]})
    assert routers() == {router, other}
    assert (await admin.patch(f"/edge-router-policies/{policy}", {"edgeRouterRoles": [f"@{other}"]})).status == 200
    assert routers() == {other}
