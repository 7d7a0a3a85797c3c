"""Enrolment routes: the management API's enrollments and re-enrolments, and the Client API's ``/enroll`` family.

``POST /enroll`` takes its body as the content type says: JSON (an object), or the raw bytes of a PEM or DER CSR
(``text/plain``, ``application/x-pem-file``, ``application/pkcs10``); any other type is 400 INVALID_CONTENT_TYPE.
An ``ott`` enrolment asked for with ``method=ott`` answers the bare PEM certificate (``application/x-pem-file``)
unless the client accepts only JSON; every other answer is the JSON envelope. The sub-paths (``/enroll/ott`` and
the others) always answer JSON and also take the token from a JSON body's ``token``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from quart import Blueprint, Response, request

from controller.authentication.enrollment import enroll
from controller.authentication.enrollment_admin import create_enrollment, reenroll_authenticator, refresh
from controller.authentication.enrollment_claims import Enrolled, EnrollmentRequest
from controller.authentication.router_enrollment import extend_router, reenroll_router
from controller.data.present import present
from controller.errors import ApiError, field_cause, nested_cause
from controller.resources.enrollments import CREATE_SCHEMA, REFRESH_SCHEMA
from controller.runtime.composition import Controller
from web.client_certs import client_certificate
from web.envelope import created, empty, json_response, ok
from web.guards import Access
from web.request import read_json
from web.route_table import RouteGroup, Routes

__all__ = ["register"]

_PEM = "application/x-pem-file"
_RAW_TYPES = frozenset({"text/plain", _PEM, "application/pkcs10", "application/pkcs7-mime"})
_decoder = msgspec.json.Decoder()
_CERTS: dict[str, Any] = {"type": "object", "properties": {
    "cert": {"type": "string"}, "serverCert": {"type": "string"}, "ca": {"type": "string"}}}
_ENROLLMENT = {"type": "object", "properties": {"id": {"type": "string"}, "method": {"type": "string"},
                                                "token": {"type": "string"}, "jwt": {"type": "string"}}}
_ROUTER_CSRS = {"type": "object", "required": ["certCsr", "serverCertCsr"],
                "properties": {"certCsr": {"type": "string"}, "serverCertCsr": {"type": "string"}}}
_CHALLENGE = {"type": "object", "required": ["nonce", "keyId"],
              "properties": {"nonce": {"type": "string", "format": "uuid"}, "keyId": {"type": "string"}}}
_SIGNATURE = {"type": "object", "required": ["signature", "algorithm", "kid", "caPool"], "properties": {
    "signature": {"type": "string"}, "algorithm": {"type": "string"}, "kid": {"type": "string"},
    "caPool": {"type": "string"}}}
_TOKEN = {"token": {"type": "string", "format": "uuid"}}


async def _enrollment_request(*, token_in_body: bool) -> EnrollmentRequest:
    """The enrolment request of the current HTTP request (see the module docstring for the body rules)."""
    raw = await request.get_data(cache=False, as_text=False, parse_form_data=False)
    content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    body: Mapping[str, Any] | None = None
    data: bytes | None = None
    if raw.strip():
        if content_type in ("application/json", ""):
            try:
                decoded = _decoder.decode(raw)
            except (msgspec.DecodeError, RecursionError) as exc:
                raise ApiError("COULD_NOT_PARSE_BODY", nested_cause(f"parsing body failed, because {exc}")) from None
            if not isinstance(decoded, dict):
                raise ApiError("COULD_NOT_VALIDATE", field_cause("body", "body must be a JSON object", None))
            body = decoded
        elif content_type in _RAW_TYPES:
            data = raw
        else:
            raise ApiError("INVALID_CONTENT_TYPE", field_cause("Content-Type", "unsupported content type",
                                                               content_type))
    token = request.args.get("token")
    if not token and token_in_body and body is not None and isinstance(body.get("token"), str):
        token = body["token"]
    return EnrollmentRequest(token or None, data, body, client_certificate(request.scope))


def _answer(enrolled: Enrolled, *, pem: bool) -> Response:
    if pem and enrolled.cert is not None:
        return Response(enrolled.cert, content_type=_PEM)
    return ok(enrolled.data())


def _wants_pem(method: str | None) -> bool:
    """As the reference: the bare certificate for ``method=ott`` unless an Accept value is exactly JSON."""
    accepted = [part.split(";")[0].strip().lower() for part in request.headers.get("Accept", "").split(",")]
    return method == "ott" and "application/json" not in accepted


def register(bp: Blueprint, routes: Routes, controller: Controller, api: str) -> None:
    """Add the enrolment operations of ``api`` to ``bp``."""
    if api == "management":
        _register_management(bp, routes, controller)
    else:
        _register_client(bp, routes, controller)


def _register_management(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    # Enrollments and re-enrolments make credentials for others: administrators only.
    group = RouteGroup(routes, bp, "management", tag="Enrollment", access=Access.ADMIN)

    def shown(row: Mapping[str, Any]) -> dict[str, Any]:
        with controller.domain.read() as ctx:
            return present(ctx, controller.registry["enrollments"], row)

    async def create() -> Response:
        return created(shown(await create_enrollment(controller, await read_json("enrollment"))))

    async def refresh_one(id: str) -> Response:
        return ok(shown(await refresh(controller, id, await read_json("refresh"))))

    async def reenroll_one(id: str) -> Response:
        return created(shown(await reenroll_authenticator(controller, id, await read_json("reEnroll"))))

    async def reenroll_edge_router(id: str) -> Response:
        await reenroll_router(controller, "edge-routers", id)
        return empty()

    # 409: the identity already has an enrollment of that method.
    group.add("POST", "/enrollments", "createEnrollment", create, body=CREATE_SCHEMA, status=201, data=_ENROLLMENT,
              summary="Create an enrollment for an identity", errors=(409,))
    group.add("POST", "/enrollments/{id}/refresh", "refreshEnrollment", refresh_one, body=REFRESH_SCHEMA,
              data=_ENROLLMENT, summary="Give an enrollment a new token and expiry")
    group.add("POST", "/authenticators/{id}/re-enroll", "reEnrollAuthenticator", reenroll_one, tag="Authenticator",
              body=REFRESH_SCHEMA, status=201, data=_ENROLLMENT, errors=(409,),
              summary="Replace an authenticator by the enrollment that makes it again")
    group.add("POST", "/edge-routers/{id}/re-enroll", "reEnrollEdgeRouter", reenroll_edge_router, tag="Edge Router",
              summary="Forget an edge router's certificate and give it a new enrollment")


def _register_client(bp: Blueprint, routes: Routes, controller: Controller) -> None:
    # Enrolment is how a client gets its first credentials, so it needs no session: each operation checks the
    # credential it is given (a one-time token, a CA's certificate, a router's current certificate).
    group = RouteGroup(routes, bp, "client", tag="Enroll", access=Access.ANYONE)

    async def legacy() -> Response:
        method = request.args.get("method")
        enrolled = await enroll(controller, method, await _enrollment_request(token_in_body=False))
        return _answer(enrolled, pem=_wants_pem(method))

    def sub_path(method: str | None) -> Any:
        async def handler() -> Response:
            return _answer(await enroll(controller, method, await _enrollment_request(token_in_body=True)),
                           pem=False)
        return handler

    async def extend() -> Response:
        enrolled = await extend_router(controller, client_certificate(request.scope), await read_json())
        return ok(enrolled.data())

    async def challenge() -> Response:
        body = await read_json("nonce")
        if not isinstance(body, dict) or not isinstance(body.get("nonce"), str):
            raise ApiError("COULD_NOT_VALIDATE", field_cause("nonce", "nonce in body is required", None))
        signer = controller.jwts.signer
        key_id = body.get("keyId")
        if not isinstance(key_id, str) or key_id not in signer.kids:
            raise ApiError("COULD_NOT_VALIDATE", field_cause("keyId", "keyId names no key of this controller",
                                                             key_id))
        return json_response(signer.sign_nonce(body["nonce"]))

    async def jwks() -> Response:
        return json_response(controller.jwts.signer.jwks())

    token = {"token": {**_TOKEN["token"]}}
    # 409: the certificate is another authenticator's, or the identity has one of that method already; 429: a
    # password waits to be hashed; 401: the router presents no certificate of its own.
    group.add("POST", "/enroll", "enroll", legacy, data=_CERTS, produces=f"{_PEM}, application/json",
              query={**token, "method": {"type": "string", "enum": ["ott", "ottca", "updb", "ca", "erott", "trott"]}},
              summary="Enrol with a one-time token (or, with method=ca, a third-party CA's certificate)",
              errors=(409, 429))
    group.add("POST", "/enroll/ott", "enrollOtt", sub_path(None), query=token, data=_CERTS, errors=(409,),
              summary="Enrol with a one-time token and a CSR; answers the certificate")
    group.add("POST", "/enroll/ottca", "enrollOttCa", sub_path(None), query=token, errors=(409,),
              summary="Enrol the TLS client certificate of a third-party CA with a one-time token")
    group.add("POST", "/enroll/ca", "enrollCa", sub_path("ca"), errors=(400, 409),
              summary="Enrol through a CA that enrols its certificates automatically")
    group.add("POST", "/enroll/updb", "enrollUpdb", sub_path(None),
              query={"token": {**_TOKEN["token"], "required": True}},
              body={"type": "object", "properties": {"password": {"type": "string"}, "username": {"type": "string"}}},
              summary="Set the password of a username-password enrollment", errors=(409, 429))
    group.add("POST", "/enroll/erott", "enrollErOtt", sub_path(None), query=token, body=_ROUTER_CSRS, data=_CERTS,
              summary="Enrol an edge router: its client and server certificates for two CSRs")
    group.add("POST", "/enroll/extend/router", "extendRouterEnrollment", extend, body=_ROUTER_CSRS, data=_CERTS,
              tag="Extend Enrollment", summary="New certificates for a router that presents its current one",
              errors=(401,))
    group.add("POST", "/enroll/challenge", "enrollmentChallenge", challenge, body=_CHALLENGE, data=_SIGNATURE, raw=True,
              summary="Sign a nonce with the controller's key, to prove the controller's identity")
    group.add("GET", "/enroll/jwks", "getEnrollmentJwks", jwks, raw=True,
              data={"type": "object", "properties": {"keys": {"type": "array", "items": {"type": "object"}}}},
              summary="The keys that verify enrolment JWTs")
