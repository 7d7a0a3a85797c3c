"""CA operations beyond the generic CRUD routes (management API, admin only): ``GET /cas/{id}/jwt``, the JWT with
which clients enrol through a CA, and ``POST /cas/{id}/verify``, the proof that the CA's owner holds its key.

The proof is sent as PEM text (``text/plain``), not JSON. Its checks run in the reference's order: a missing body,
an unknown CA, an already verified one, then the proof itself (:func:`controller.resources.cas.check_proof`).
"""

from __future__ import annotations

from quart import Blueprint, Response, request

from controller.errors import ApiError, field_cause, not_found
from controller.resources.cas import CAS, PROOF_FIELD, check_proof, mark_verified
from controller.runtime.composition import Controller
from web.envelope import empty
from web.guards import Access
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_JWT_TYPE = "application/jwt"
# The reference consumes text/plain only; PEM's own media type, and a body sent without any, are accepted too.
_PROOF_TYPES = ("text/plain", "application/x-pem-file")


async def _proof() -> str:
    """The body of a verify request as text.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE when the body is empty or sent as another media type than PEM text.
    """
    raw = await request.get_data(cache=False, as_text=False, parse_form_data=False)
    if not raw or not raw.strip():
        raise ApiError("COULD_NOT_VALIDATE", field_cause(PROOF_FIELD, f"{PROOF_FIELD} in body is required", None))
    content_type = request.headers.get("Content-Type", "")
    if content_type and content_type.split(";")[0].strip().lower() not in _PROOF_TYPES:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("Content-Type", "unsupported content type, use text/plain",
                                                         content_type))
    return raw.decode("utf-8", errors="replace")


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    """Add the CA JWT and verification operations to the management blueprint (nothing on the client API)."""
    if api != "management":
        return
    domain = controller.domain

    async def ca_jwt(id: str) -> Response:
        if not domain.exists(CAS.kind, id):
            raise not_found(CAS.singular, id)
        return Response(controller.jwts.ca(id), content_type=_JWT_TYPE)

    async def verify_ca(id: str) -> Response:
        proof = await _proof()
        with domain.read() as ctx:
            ca = ctx.txn.get(CAS.kind, id)
            now = ctx.now
        if ca is None:
            raise not_found(CAS.singular, id)
        check_proof(ca, proof, now)
        await domain.write(lambda ctx: mark_verified(ctx, id))
        return empty()

    group = RouteGroup(routes, bp, api, tag=CAS.tag, access=Access.ADMIN)
    group.add("GET", "/cas/{id}/jwt", "getCaJwt", ca_jwt, summary="The JWT with which clients enrol through a CA",
              produces=_JWT_TYPE, raw=True, data={"type": "string"})
    group.add("POST", "/cas/{id}/verify", "verifyCa", verify_ca,
              summary="Verify a CA with a certificate it signed whose common name is its verificationToken, sent as "
                      "PEM text",
              body={"type": "string"}, consumes=", ".join(_PROOF_TYPES), errors=(409,))
