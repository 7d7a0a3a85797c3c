"""The caller's own authenticators, on both APIs: list and detail, password change, certificate extension.

Only the caller's authenticators are visible (another identity's is 404). Each item links only to itself under
``/current-identity/authenticators``. Changing an authenticator needs a fully authenticated session; extending a
certificate also needs the connection to present that certificate.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.authentication.own_authenticators import (
    EXTEND_SCHEMA,
    EXTEND_VERIFY_SCHEMA,
    OWN_PATCH_SCHEMA,
    OWN_UPDATE_SCHEMA,
    change_password,
    extend_certificate,
    own_authenticator_ids,
    verify_extension,
)
from controller.errors import not_found
from controller.model.field import Mode
from controller.runtime.composition import Controller
from web.client_certs import client_certificate
from web.envelope import empty, ok
from web.guards import Access, current_session
from web.request import list_params, read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_BASE = "current-identity/authenticators"
_EXTENDED = {"type": "object", "properties": {"clientCert": {"type": "string"}, "ca": {"type": "string"}}}


def _own_links(item: dict[str, Any]) -> dict[str, Any]:
    item["_links"] = {"self": {"href": f"./{_BASE}/{item['id']}"}}
    return item


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    """Add the caller's authenticator operations of ``api`` to ``bp``."""
    async def list_own() -> Response:
        session = current_session()
        ids = own_authenticator_ids(controller, session.identity_id)
        items, meta = controller.domain.list_page("authenticators", list_params(False), ids)
        return ok([_own_links(item) for item in items], meta)

    async def detail_own(id: str) -> Response:
        session = current_session()
        if id not in own_authenticator_ids(controller, session.identity_id):
            raise not_found("authenticator", id)
        return ok(_own_links(controller.domain.detail("authenticators", id)))

    async def update_own(id: str) -> Response:
        session = current_session()
        mode = Mode.UPDATE if request.method == "PUT" else Mode.PATCH
        await change_password(controller, session.identity_id, id, await read_json("authenticator"), mode)
        return empty()

    async def extend(id: str) -> Response:
        session = current_session()
        return ok(await extend_certificate(controller, session.identity_id, id, client_certificate(request.scope),
                                           await read_json("extend")))

    async def extend_verify(id: str) -> Response:
        session = current_session()
        await verify_extension(controller, session.identity_id, id, await read_json("extend"), session.id)
        return empty()

    group = RouteGroup(routes, bp, api, tag="Current API Session", access=Access.SESSION)
    base = f"/{_BASE}"
    group.add("GET", base, "listCurrentIdentityAuthenticators", list_own, paged=True,
              summary="The caller's authenticators")
    group.add("GET", f"{base}/{{id}}", "detailCurrentIdentityAuthenticator", detail_own,
              summary="One of the caller's authenticators")
    # 409: not an authenticator of the method the operation changes; 429: the passwords wait to be hashed.
    group.add("PUT", f"{base}/{{id}}", "updateCurrentIdentityAuthenticator", update_own, body=OWN_UPDATE_SCHEMA,
              summary="Change the caller's username and password, given the current password", errors=(409, 429))
    group.add("PATCH", f"{base}/{{id}}", "patchCurrentIdentityAuthenticator", update_own, body=OWN_PATCH_SCHEMA,
              summary="Change the caller's username or password, given the current password", errors=(409, 429))
    group.add("POST", f"{base}/{{id}}/extend", "extendCurrentIdentityAuthenticator", extend, tag="Extend Enrollment",
              body=EXTEND_SCHEMA, data=_EXTENDED,
              summary="A new certificate for the caller's certificate authenticator, pending verification",
              errors=(409,))
    group.add("POST", f"{base}/{{id}}/extend-verify", "extendVerifyCurrentIdentityAuthenticator", extend_verify,
              tag="Extend Enrollment", body=EXTEND_VERIFY_SCHEMA, summary="Put the extended certificate in force",
              errors=(409,))
