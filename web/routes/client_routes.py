"""The Client API an endpoint uses: its services with posture queries and configs (its own overrides applied),
their edge routers and terminators, posture responses, sessions, updates.

Posture responses and session requests go to the identity's actor, so they are decided in the order they arrive
and a revocation can never race a grant.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.data.present import present
from controller.data.write_path import check_storable
from controller.errors import ApiError, field_cause, nested_cause, not_found
from controller.model.validation import SchemaCheck
from controller.posture.client_services import (
    CLIENT_TERMINATOR_SCHEMA,
    SERVICE_EDGE_ROUTERS_SCHEMA,
    client_service_edge_routers,
    client_service_terminators,
    client_services,
    service_updates_at,
)
from controller.runtime.composition import Controller
from web.envelope import created, empty, ok
from web.guards import Access, current_session
from web.request import list_params, read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_RESPONSE_TYPES = {"OS", "MAC", "DOMAIN", "PROCESS", "ENDPOINT_STATE"}
_REQUIRED = {"OS": ("type", "version"), "MAC": ("macAddresses",), "DOMAIN": ("domain",)}

MAX_BULK_RESPONSES = 256
"""Posture responses in one bulk request: far more than the checks any endpoint has to answer."""
MAX_LIST_ITEMS = 64
"""MAC addresses or signer fingerprints in one response."""
MAX_TEXT = 4096
"""Characters in one string of a response (a process path is the longest legitimate one)."""


def _check_sizes(body: dict[str, Any]) -> None:
    """Refuse a response whose strings or lists are larger than any endpoint reports: it would be stored."""
    for name, value in body.items():
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body should be at most {MAX_TEXT} "
                                                                   "chars long", value[:64]))
        if isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS:
                raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body should have at most "
                                                                       f"{MAX_LIST_ITEMS} items", len(value)))
            for item in value:
                if not isinstance(item, str) or len(item) > MAX_TEXT:
                    raise ApiError("COULD_NOT_VALIDATE", field_cause(
                        name, f"{name} in body must hold strings of at most {MAX_TEXT} chars", str(item)[:64]))


def _check_response(body: Any) -> dict[str, Any]:
    """Validate one posture response; unknown or non-reportable types are unparsable, as in the reference."""
    if not isinstance(body, dict):
        raise ApiError("COULD_NOT_VALIDATE", field_cause("postureResponse", "postureResponse in body is required",
                                                         body))
    type_id = body.get("typeId")
    if type_id is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("typeId", "typeId in body is required", None))
    if not isinstance(type_id, str) or type_id not in _RESPONSE_TYPES:
        raise ApiError("COULD_NOT_PARSE_BODY", nested_cause(f'invalid typeId value: "{type_id}"'))
    if not isinstance(body.get("id"), str):
        raise ApiError("COULD_NOT_VALIDATE", field_cause("id", "id in body is required", body.get("id")))
    for name in _REQUIRED.get(str(type_id), ()):
        if body.get(name) is None:
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
    if type_id == "MAC" and not isinstance(body.get("macAddresses"), list):
        raise ApiError("COULD_NOT_VALIDATE", field_cause("macAddresses", "macAddresses in body must be of type "
                                                                         "array", body.get("macAddresses")))
    _check_sizes(body)
    return body


def _client_session(detail: dict[str, Any]) -> dict[str, Any]:
    """A session as the Client API shows it: the management detail without the ids of the granting policies."""
    detail.pop("servicePolicies", None)
    return detail


_RESPONSE_BODY: dict[str, Any] = {
    "type": "object", "required": ["id", "typeId"],
    "properties": {"id": {"type": "string"}, "typeId": {"type": "string", "enum": sorted(_RESPONSE_TYPES)},
                   "type": {"type": "string"}, "version": {"type": "string"}, "build": {"type": "string"},
                   "macAddresses": {"type": "array", "items": {"type": "string"}}, "domain": {"type": "string"},
                   "path": {"type": "string"}, "isRunning": {"type": "boolean"}, "hash": {"type": "string"},
                   "signerFingerprints": {"type": "array", "items": {"type": "string"}},
                   "woken": {"type": "boolean"}, "unlocked": {"type": "boolean"}},
}
_RESPONSE_CHECK = SchemaCheck.of(_RESPONSE_BODY)
_SESSION_BODY: dict[str, Any] = {
    "type": "object", "required": ["serviceId"],
    "properties": {"serviceId": {"type": "string"}, "type": {"type": "string", "enum": ["Dial", "Bind"]},
                   "tags": {"type": "object"}},
}


def register(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    engine = controller.posture
    domain = controller.domain

    # Everything here acts for the caller's identity: a fully authenticated session of any identity.
    group = RouteGroup(routes, bp, "client", tag="Service", access=Access.SESSION)

    async def services_view(service_id: str | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        session = current_session()
        state = await engine.state(session.identity_id)
        return client_services(domain, state, session.id, service_id, list_params(True),
                               request.args.getlist("configTypes"), controller.clock.now())

    async def list_services() -> Response:
        items, meta = await services_view(None)
        return ok(items, meta)

    async def detail_service(id: str) -> Response:
        items, _ = await services_view(id)
        return ok(items[0])

    async def posture_response(bulk: bool) -> Response:
        session = current_session()
        body = await read_json()
        if bulk and not isinstance(body, list):
            raise ApiError("COULD_NOT_VALIDATE", field_cause("postureResponse", "postureResponse in body must be "
                                                                                "of type array", body))
        if bulk and len(body) > MAX_BULK_RESPONSES:
            raise ApiError("COULD_NOT_VALIDATE", field_cause("postureResponse", "postureResponse in body should "
                                                             f"have at most {MAX_BULK_RESPONSES} items", len(body)))
        responses = [_check_response(r) for r in (body if bulk else [body])]
        check_storable(body)
        for response in responses:
            # Last, so that the checks above word their refusals first: what the document promises of every
            # other field (a string version, boolean woken and unlocked, ...).
            _RESPONSE_CHECK.validate(response)
        states = [r for r in responses if r["typeId"] == "ENDPOINT_STATE"]
        others = tuple(r for r in responses if r["typeId"] != "ENDPOINT_STATE")
        woken = any(bool(r.get("woken")) for r in states)
        unlocked = any(bool(r.get("unlocked")) for r in states)
        # One message for the whole request: one decision and one durable write, however many items it holds.
        services = await engine.report_posture(session.identity_id, session.id, others, woken=woken,
                                               unlocked=unlocked)
        return created({"services": services})

    async def single_response() -> Response:
        return await posture_response(False)

    async def bulk_response() -> Response:
        return await posture_response(True)

    def session_detail(row: dict[str, Any]) -> dict[str, Any]:
        with domain.read() as ctx:
            return _client_session(present(ctx, controller.registry["sessions"], row))

    async def create_session() -> Response:
        session = current_session()
        body = await read_json()
        if not isinstance(body, dict):
            raise ApiError("COULD_NOT_VALIDATE", field_cause("session", "session in body is required", None))
        service_id = body.get("serviceId")
        session_type = body.get("type") or "Dial"
        if not isinstance(service_id, str) or not service_id:
            raise ApiError("COULD_NOT_VALIDATE", field_cause("serviceId", "serviceId in body is required", None))
        if session_type not in ("Dial", "Bind"):
            raise ApiError("COULD_NOT_VALIDATE", field_cause("type", "type in body should be one of [Dial Bind]",
                                                             session_type))
        tags: dict[str, Any] = body["tags"] if isinstance(body.get("tags"), dict) else {}
        check_storable(tags, "tags")
        row = await engine.request_session(session.identity_id, session.id, service_id, session_type, tags)
        return created(session_detail(row))

    def visible_sessions(identity_id: str) -> set[str] | None:
        """The sessions the caller may see on the Client API: its identity's (any of its API sessions); an
        admin's, every session (None)."""
        if controller.is_admin(identity_id):
            return None
        with domain.read() as ctx:
            return set(ctx.txn.ids_by_ref("sessions", "identityId", identity_id))

    def own_session(session_id: str, identity_id: str) -> None:
        visible = visible_sessions(identity_id)
        if (visible is None and not domain.exists("sessions", session_id)) or (
                visible is not None and session_id not in visible):
            raise not_found("session", session_id)

    async def list_sessions() -> Response:
        session = current_session()
        items, meta = domain.list_page("sessions", list_params(False), visible_sessions(session.identity_id))
        return ok([_client_session(item) for item in items], meta)

    async def detail_session(id: str) -> Response:
        session = current_session()
        own_session(id, session.identity_id)
        return ok(_client_session(domain.detail("sessions", id)))

    async def delete_session(id: str) -> Response:
        session = current_session()
        own_session(id, session.identity_id)
        await domain.delete("sessions", id)
        return empty()

    async def service_updates() -> Response:
        session = current_session()
        state = await engine.state(session.identity_id)
        return ok({"lastChangeAt": service_updates_at(domain, state, session.id, controller.clock.now())})

    async def service_edge_routers(id: str) -> Response:
        return ok(client_service_edge_routers(domain, current_session().identity_id, id))

    async def service_terminators(id: str) -> Response:
        items, meta = client_service_terminators(domain, current_session().identity_id, id, list_params(False))
        return ok(items, meta)

    config_types = {"configTypes": {"type": "array", "items": {"type": "string"}}}
    group.add("GET", "/services", "listServices", list_services, paged=True, query=config_types)
    group.add("GET", "/services/{id}", "detailService", detail_service)
    group.add("POST", "/posture-response", "createPostureResponse", single_response, tag="Posture Checks",
              body=_RESPONSE_BODY, status=201)
    group.add("POST", "/posture-response-bulk", "createPostureResponseBulk", bulk_response, tag="Posture Checks",
              body={"type": "array", "items": _RESPONSE_BODY}, status=201)
    group.add("GET", "/sessions", "listSessions", list_sessions, tag="Session", paged=True)
    # 404: no such service for the caller; 409: its posture does not pass the service's checks.
    group.add("POST", "/sessions", "createSession", create_session, tag="Session", body=_SESSION_BODY, status=201,
              errors=(404, 409))
    group.add("GET", "/sessions/{id}", "detailSession", detail_session, tag="Session")
    group.add("DELETE", "/sessions/{id}", "deleteSession", delete_session, tag="Session")
    group.add("GET", "/current-api-session/service-updates", "listServiceUpdates", service_updates,
              tag="Current API Session")
    group.add("GET", "/services/{id}/edge-routers", "listServiceEdgeRouters", service_edge_routers,
              data=SERVICE_EDGE_ROUTERS_SCHEMA)
    group.add("GET", "/services/{id}/terminators", "listServiceTerminators", service_terminators, paged=True,
              data={"type": "array", "items": CLIENT_TERMINATOR_SCHEMA})
