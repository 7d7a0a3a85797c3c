"""The Client API's ``/current-api-session/certificates``: the caller's API session's certificates.

Every operation needs a fully authenticated session and sees only that session's certificates: the list is theirs
alone (the reference lists every session's), and another session's certificate is as unknown as a missing id (404).
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response

from controller.authentication.session_certificates import (
    create_session_certificate,
    delete_session_certificate,
    owned_certificate,
    session_certificate_ids,
)
from controller.data.present import present
from controller.errors import ApiError, field_cause
from controller.model.validation import SchemaCheck
from controller.resources.api_session_certificates import CREATE_SCHEMA, KIND, PATH
from controller.runtime.composition import Controller
from web.envelope import created, empty, ok
from web.guards import Access, current_session
from web.request import list_params, read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_BODY_NAME = "sessionCertificate"
_create_check = SchemaCheck.of(CREATE_SCHEMA)

_STRING = {"type": "string"}
_DATE_TIME = {"type": "string", "format": "date-time"}
_LINKS = {"type": "object"}
_DETAIL: dict[str, Any] = {
    "type": "object",
    "required": ["id", "createdAt", "updatedAt", "_links", "certificate", "fingerprint", "subject", "validFrom",
                 "validTo"],
    "properties": {"id": _STRING, "createdAt": _DATE_TIME, "updatedAt": _DATE_TIME, "tags": {"type": "object"},
                   "_links": _LINKS, "certificate": _STRING, "fingerprint": _STRING, "subject": _STRING,
                   "validFrom": _DATE_TIME, "validTo": _DATE_TIME},
}
_CREATED: dict[str, Any] = {
    "type": "object", "required": ["id", "_links", "certificate", "cas"],
    "properties": {"id": _STRING, "_links": _LINKS, "certificate": _STRING, "cas": _STRING},
}


async def _csr_from_body() -> str:
    """The ``csr`` of the required ``{csr}`` body; 400 COULD_NOT_VALIDATE when the body or its csr is missing or the
    csr is not a string."""
    body = await read_json(_BODY_NAME)
    if body is None:
        raise ApiError("COULD_NOT_VALIDATE", field_cause(_BODY_NAME, f"{_BODY_NAME} in body is required", None))
    _create_check.validate(body)
    return str(body["csr"])


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    """Add the four certificate operations to the Client API's blueprint (nothing on the management API)."""
    if api != "client":
        return
    domain = controller.domain
    resource = controller.registry[KIND]

    group = RouteGroup(routes, bp, api, tag="Current API Session", access=Access.SESSION)

    async def list_certificates() -> Response:
        session = current_session()
        with domain.read() as ctx:
            ids = session_certificate_ids(ctx, session.id)
        items, meta = domain.list_page(KIND, list_params(False), ids)
        return ok(items, meta)

    async def create_certificate() -> Response:
        session = current_session()
        return created(await create_session_certificate(controller, session.id, await _csr_from_body()))

    async def detail_certificate(id: str) -> Response:
        session = current_session()
        with domain.read() as ctx:
            return ok(present(ctx, resource, owned_certificate(ctx, session.id, id)))

    async def delete_certificate(id: str) -> Response:
        session = current_session()
        await delete_session_certificate(controller, session.id, id)
        return empty()

    group.add("GET", f"/{PATH}", "listCurrentApiSessionCertificates", list_certificates,
              summary="List the current API session's certificates", paged=True,
              data={"type": "array", "items": _DETAIL})
    group.add("POST", f"/{PATH}", "createCurrentApiSessionCertificate", create_certificate,
              summary="Issue a short-lived certificate for a CSR, bound to the current API session", body=CREATE_SCHEMA,
              status=201, data=_CREATED)
    group.add("GET", f"/{PATH}/{{id}}", "detailCurrentApiSessionCertificate", detail_certificate,
              summary="Show one of the current API session's "
        "certificates", data=_DETAIL)
    group.add("DELETE", f"/{PATH}/{{id}}", "deleteCurrentApiSessionCertificate", delete_certificate,
              summary="Remove one of the current API "
        "session's certificates")
