"""The controllers of the network (``GET /controllers`` on both APIs): this controller alone, or every node of a
cluster.

A single controller's list has one member, described from what the running controller has:
a stable id and first-start time kept in the store (created by bootstrap), the address endpoints reach it at, its
server certificate and that certificate's SHA-1 fingerprint, and the time it last started (``lastJoinedAt``). It is
online by definition: it is the one answering. There is no router control channel, so ``ctrlAddress`` is null on
the Management API; the Client API leaves it out and lists only the client API address, as the reference does.
The list takes the usual filter, sort and paging parameters.

A node of a cluster lists every node that ever joined the network, from their membership records
(``controller/cluster/membership.py``): the same fields, each node's own address, certificate and start times, and
``isOnline`` true while its lease lives.
"""

from __future__ import annotations

import hashlib
from typing import Any

from controller.clock import format_time
from controller.cluster import ClusterNode
from controller.data.listing import ListParams, list_values
from controller.data.present import link
from controller.ids import new_id
from controller.model.spec import WriteContext
from controller.runtime.composition import Controller
from storage.zitiql import FieldType, Symbol

__all__ = ["CONTROLLER_DETAIL_SCHEMA", "list_controllers", "record_controller_start"]

_META_KEY = "controller"
_API_PATHS = {"edge-client": "/edge/client/v1", "edge-management": "/edge/management/v1"}
_SYMBOLS: dict[str, Symbol] = {
    "id": Symbol(FieldType.STRING), "name": Symbol(FieldType.STRING), "fingerprint": Symbol(FieldType.STRING),
    "isOnline": Symbol(FieldType.BOOL), "createdAt": Symbol(FieldType.DATETIME),
    "updatedAt": Symbol(FieldType.DATETIME), "lastJoinedAt": Symbol(FieldType.DATETIME),
}
_DATE_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
_API_ADDRESSES: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "array", "items": {
    "type": "object", "properties": {"url": {"type": "string"}, "version": {"type": "string"}}}}}

CONTROLLER_DETAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "createdAt", "updatedAt", "_links", "name", "certPem", "fingerprint", "isOnline",
                 "lastJoinedAt"],
    "properties": {"id": {"type": "string"}, "createdAt": _DATE_TIME, "updatedAt": _DATE_TIME,
                   "tags": {"type": "object"}, "_links": {"type": "object"}, "name": {"type": "string"},
                   "apiAddresses": _API_ADDRESSES, "certPem": {"type": "string"}, "fingerprint": {"type": "string"},
                   "isOnline": {"type": "boolean"}, "lastJoinedAt": _DATE_TIME,
                   "ctrlAddress": {"type": ["string", "null"]}},
}
"""One controller as ``GET /controllers`` lists it."""


def record_controller_start(ctx: WriteContext) -> None:
    """Keep this controller's id and first-start time, and stamp this start: called by bootstrap at every start.

    The id is made on the first start of a data directory and never changes after."""
    now = format_time(ctx.now)
    record = ctx.txn.meta(_META_KEY) or {"id": new_id(ctx.now), "createdAt": now}
    ctx.txn.set_meta(_META_KEY, {**record, "lastJoinedAt": now})


def _detail(controller: Controller, api: str) -> dict[str, Any]:
    with controller.domain.read() as ctx:
        record = ctx.txn.meta(_META_KEY)
    if record is None:
        raise LookupError("the controller record is missing: bootstrap has not run on this data directory")
    address = controller.jwts.address
    apis = _api_addresses(address, api)
    detail: dict[str, Any] = {
        "id": record["id"], "createdAt": record["createdAt"], "updatedAt": record["lastJoinedAt"], "tags": {},
        "_links": {"self": link(f"controllers/{record['id']}")},
        "name": address.split("://", 1)[-1], "apiAddresses": apis,
        "certPem": controller.pki.server_cert_pem.decode("ascii"), "fingerprint": controller.pki.server_cert_sha1,
        "isOnline": True, "lastJoinedAt": record["lastJoinedAt"],
    }
    if api == "management":
        detail["ctrlAddress"] = None
    return detail


def _api_addresses(address: str, api: str) -> dict[str, Any]:
    return {key: [{"url": f"{address}{path}", "version": "v1"}] for key, path in _API_PATHS.items()
            if api == "management" or key == "edge-client"}


def _node_details(cluster: ClusterNode, api: str) -> list[dict[str, Any]]:
    details = []
    for view in cluster.membership.nodes():
        record = view.record
        node_id = hashlib.sha256(record.name.encode()).hexdigest()[:16]
        detail: dict[str, Any] = {
            "id": node_id, "createdAt": format_time(record.joined_at), "updatedAt": format_time(record.started_at),
            "tags": {}, "_links": {"self": link(f"controllers/{node_id}")}, "name": record.name,
            "apiAddresses": _api_addresses(record.address, api), "certPem": record.cert_pem,
            "fingerprint": record.fingerprint, "isOnline": view.online, "lastJoinedAt": format_time(record.started_at),
        }
        if api == "management":
            detail["ctrlAddress"] = None
        details.append(detail)
    return details


def list_controllers(controller: Controller, api: str, params: ListParams) -> tuple[list[dict[str, Any]],
                                                                                    dict[str, Any]]:
    """The page of controllers (this one, or every node of its cluster) for ``api`` ("management" or "client") and
    the list ``meta``.

    Raises:
        ApiError: 400 for a bad filter, sort or paging parameter, as on every list.
    """
    cluster = controller.cluster
    rows = _node_details(cluster, api) if cluster is not None else [_detail(controller, api)]
    page = list_values(rows, params, _SYMBOLS)
    return [dict(row) for row in page.rows], page.meta
