"""Dial/Bind sessions: created only by the posture engine (Client API), listed and deleted by admins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from controller.access.policy_links import rows, selecting_policy_ids
from controller.data.present import entity_ref
from controller.model.field import CREATE_ONLY, string_field, string_list
from controller.model.spec import Hooks, ReadContext, Resource

__all__ = ["SAME_REQUEST", "SESSIONS", "session_edge_routers"]

# A session request is answered with the existing session of the same API session, service and type, if any.
SAME_REQUEST = ("apiSessionId", "serviceId", "type")

_encoder = msgspec.json.Encoder()
_NO_ROUTERS = msgspec.Raw(b"[]")


def session_edge_routers(ctx: ReadContext, row: Mapping[str, Any]) -> msgspec.Raw:
    """The edge routers a session may use, those shared by its identity and service through router policies, as
    one pre-encoded JSON array (the envelope's encoder embeds a ``msgspec.Raw`` as it is).

    Kept across snapshots while the access kinds stand, per (the identity's router policies, service): every
    session of a service at the large model lists hundreds of routers, and encoding them was a sizeable part of
    each session decision's answer."""
    from controller.access.grants import common_edge_routers

    identity = ctx.txn.get("identities", row["identityId"])
    service = ctx.txn.get("services", row["serviceId"])
    if identity is None or service is None:
        return _NO_ROUTERS
    policies = selecting_policy_ids(ctx, "edge-router-policies", "identities", identity)

    def compute() -> msgspec.Raw:
        # No router connects to this controller yet, so each shows the run-time state of a router that never
        # connected (as the edge router detail does): offline, no hostname, protocols or URLs, sync unknown.
        return msgspec.Raw(_encoder.encode([
            {"id": router["id"], "name": router.get("name", ""), "hostname": "", "urls": {},
             "supportedProtocols": {}, "syncStatus": "SYNC_UNKNOWN", "isOnline": False,
             "cost": router.get("cost"), "noTraversal": router.get("noTraversal"),
             "disabled": bool(router.get("disabled")), "appData": router.get("appData") or {}}
            for router in rows(ctx, "edge-routers", common_edge_routers(ctx, identity, service))]))

    routers: msgspec.Raw = ctx.shared_cached(("session-edge-routers", policies, service["id"]), compute)
    return routers


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["edgeRouters"] = session_edge_routers(ctx, row)
    out["servicePolicies"] = [entity_ref(ctx, "service-policies", p) for p in row.get("servicePolicies") or []]


SESSIONS = Resource(
    kind="sessions", singular="session", op_name="Session", op_plural="Sessions", tag="Session",
    body_name="session",
    fields=(
        string_field("apiSessionId", writable=CREATE_ONLY, ref="api-sessions", ref_name="apiSession",
                     on_delete="cascade"),
        string_field("identityId", writable=CREATE_ONLY, ref="identities", on_delete="cascade"),
        string_field("serviceId", writable=CREATE_ONLY, ref="services", ref_name="service", on_delete="cascade"),
        string_field("type", writable=CREATE_ONLY),
        string_field("token", writable=CREATE_ONLY, filterable=False),
        string_list("servicePolicies", writable=CREATE_ONLY, default=list, ids_of="service-policies"),
    ),
    operations=frozenset({"list", "detail", "delete"}),
    hooks=Hooks(present=_present),
    indexes=(SAME_REQUEST,),
)
