"""Our own OpenAPI documents, one per API, generated from the served routes and the resource specs.

The documents are Swagger 2.0, the format of the wire contract we implement: clients and code generators that read
the OpenZiti edge API documents (go-swagger only reads 2.0) read ours the same way, and our conformance tests resolve
both with one set of rules. Swagger 2.0 has no unions and no null type, so the JSON schemas we validate with are
rendered in its dialect by :func:`web.swagger_schema.swagger_schema`: a nullable value carries ``x-nullable: true`` and
a polymorphic body is a base definition with a ``discriminator`` plus one ``allOf`` definition per variant, named by
``x-class``.

Nothing here is hand-written per operation. Generic operations (``RouteInfo.kind`` set) derive their parameters,
bodies and answers from the :class:`~controller.model.spec.Resource`: request bodies are exactly
:func:`controller.model.validation.request_schema`, so what we document is what we enforce. Custom operations describe
themselves through the optional fields of :class:`~web.route_table.RouteInfo`. Every operation documents the error
answers it can give: 400 with parameters or a body, 401 with a session, 404 with a path id, 413 with a body, and
what ``RouteInfo.errors`` and ``Resource.errors`` add; a 429 carries ``Retry-After``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from controller.model.field import Mode
from controller.model.registry import Registry
from controller.model.spec import Resource
from controller.model.validation import request_schema
from controller.runtime.composition import VERSION
from web.route_table import RouteInfo
from web.swagger_schema import swagger_schema

__all__ = ["API_VERSION", "BASE_PATHS", "SPEC_IDS", "build_document"]

API_VERSION = "0.26.23"  # the edge API version whose wire contract we speak
BASE_PATHS = {"management": "/edge/management/v1", "client": "/edge/client/v1"}
SPEC_IDS = {"edge-management": "management", "edge-client": "client"}  # spec id -> API (the ids OpenZiti uses)

_TITLES = {
    "management": ("Tollgate Edge Management API",
                   "Administration of identities, services, policies, posture checks, routers and the other "
                   "resources of a Tollgate zero-trust network."),
    "client": ("Tollgate Edge Client API",
               "What an endpoint uses: log in, learn its services and their posture queries, report posture, and "
               "open sessions to dial or bind services."),
}
_REF = "#/definitions/"
_MODE_NAMES = {Mode.CREATE: "Create", Mode.UPDATE: "Update", Mode.PATCH: "Patch"}
_ACTION_MODES = {"create": Mode.CREATE, "update": Mode.UPDATE, "patch": Mode.PATCH}
_ERRORS = {
    400: "The request is malformed or does not validate; the error's cause names the field",
    401: "No valid session was supplied, its identity may not perform this operation, or the credentials were "
         "refused",
    404: "What the request names does not exist",
    409: "The request conflicts with the current state of the resource or of the rows it relates to (the error "
         "code says how)",
    413: "The request body is larger than the controller accepts",
    429: "Too many failed attempts, or too much work waiting: try again after the seconds Retry-After gives",
}
# The header every 429 answer carries.
_RETRY_AFTER = {"Retry-After": {"type": "integer", "description": "Seconds to wait before trying again"}}
def build_document(api: str, routes: Iterable[RouteInfo], registry: Registry) -> dict[str, Any]:
    """The Swagger 2.0 document of ``api`` ("management" or "client"): every route of ``routes`` served on it."""
    builder = _Builder(registry)
    paths: dict[str, dict[str, Any]] = {}
    tags: dict[str, None] = {}
    for info in routes:
        if info.api != api:
            continue
        paths.setdefault(info.path, {})[info.method.lower()] = builder.operation(info)
        tags[info.tag] = None
    title, description = _TITLES[api]
    return {
        "swagger": "2.0",
        "info": {"title": title, "description": description, "version": API_VERSION,
                 "license": {"name": "Apache 2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0.html"},
                 "x-tollgate-version": VERSION},
        "basePath": BASE_PATHS[api],
        "schemes": ["https"],
        "consumes": ["application/json"],
        "produces": ["application/json"],
        "securityDefinitions": {"ztSession": {
            "type": "apiKey", "in": "header", "name": "zt-session",
            "description": "The token of an API session, as returned by the authenticate operation"}},
        "tags": [{"name": tag} for tag in sorted(tags)],
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(builder.definitions.items())),
    }


def _words(name: str) -> str:
    """``servicePolicy`` / ``service-policies`` / ``listAPISessions`` -> lower-case words."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name.replace("-", " "))
    return spaced.lower()


def _pascal(value: str) -> str:
    """``service-policies`` -> ``ServicePolicies``, ``PROCESS_MULTI`` -> ``ProcessMulti``, ``apiSession`` -> same."""
    parts = (p.capitalize() if p.isupper() else p[:1].upper() + p[1:] for p in re.split(r"[-_ ]", value) if p)
    return "".join(parts)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


class _Builder:
    """Operations of one document; the definitions they reference are collected in ``definitions``."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.definitions: dict[str, Any] = _common_definitions()

    # Operations ---------------------------------------------------------------------------------------------------

    def operation(self, info: RouteInfo) -> dict[str, Any]:
        resource = self.registry.resources.get(info.kind) if info.kind and info.action else None
        op = self._generic(info, resource) if resource is not None else self._custom(info)
        params = [{"name": name, "in": "path", "required": True, "type": "string",
                   "description": f"The {_words(name)} of the resource"}
                  for name in re.findall(r"{(\w+)}", info.path)]
        op["parameters"] = params + op.get("parameters", [])
        if not op["parameters"]:
            del op["parameters"]
        needs_session = info.admin or info.session or resource is not None
        op["security"] = [{"ztSession": []}] if needs_session else []
        responses: dict[str, Any] = op["responses"]
        # Every body is size-checked before anything else (web/app.py), so every operation with one can answer 413.
        has_body = any(param["in"] == "body" for param in op.get("parameters", ()))
        errors = [*op.pop("errors", ()), *info.errors, *([401] if needs_session else []),
                  *([404] if "{" in info.path else []), *([413] if has_body else [])]
        for status in sorted(set(errors)):
            responses[str(status)] = {"description": _ERRORS[status], "schema": _ref("apiErrorEnvelope"),
                                      **({"headers": dict(_RETRY_AFTER)} if status == 429 else {})}
        who = "an administrator" if info.admin else ("a session" if needs_session else "no session")
        return {"operationId": info.operation_id, "tags": [info.tag], **op,
                "description": f"{op['summary']}. Needs {who}."}

    def _generic(self, info: RouteInfo, resource: Resource) -> dict[str, Any]:
        one = _words(resource.singular)
        many = _words(resource.kind)
        action = info.action
        if action == "list":
            return {"summary": f"List {many}", "parameters": _list_params(resource.role_filter), "errors": [400],
                    "responses": {"200": self._answer(f"A page of {many}", self._list_envelope(resource))}}
        if action == "detail":
            return {"summary": f"Show one {one}",
                    "responses": {"200": self._answer(f"The {one}", self._detail_envelope(resource))}}
        if action in _ACTION_MODES:
            mode = _ACTION_MODES[action]
            body = {"name": resource.body_name, "in": "body", "required": True,
                    "schema": _ref(self._body(resource, mode))}
            # A secret in the body is hashed in a bounded queue, which refuses work beyond it with 429.
            hashes = any(f.hashed_into for f in resource.all_fields())
            errors = [400, *resource.errors.get(action, ()), *([429] if hashes else [])]
            if mode is Mode.CREATE:
                return {"summary": f"Create a {one}", "parameters": [body], "errors": errors,
                        "responses": {"201": self._answer(f"The created {one}", self._detail_envelope(resource))}}
            summary = (f"Replace every writable field of a {one}" if mode is Mode.UPDATE
                       else f"Change the given fields of a {one}, leaving the others alone")
            return {"summary": summary, "parameters": [body], "errors": errors,
                    "responses": {"200": self._answer("The change is stored", "empty")}}
        if action == "delete":
            return {"summary": f"Delete a {one}", "errors": [409, *resource.errors.get(action, ())],
                    "responses": {"200": self._answer(f"The {one} is gone", "empty")}}
        target = self.registry.resources.get(info.target) if info.target else None
        if action == "association" and target is not None:
            return {"summary": f"List the {_words(target.kind)} related to a {one}",
                    "parameters": _list_params(False), "errors": [400],
                    "responses": {"200": self._answer(f"A page of {_words(target.kind)}",
                                                      self._list_envelope(target))}}
        if action == "role-attributes":
            return {"summary": f"List the role attributes used by {many}",
                    "parameters": [_query("filter", {"type": "string"}, "A filter on the attribute, named id")],
                    "errors": [400],
                    "responses": {"200": self._answer("The attributes, sorted", self._envelope(
                        f"list{_pascal(resource.kind)}RoleAttributesEnvelope",
                        {"type": "array", "items": {"type": "string"}}))}}
        return self._custom(info)

    def _custom(self, info: RouteInfo) -> dict[str, Any]:
        params: list[dict[str, Any]] = []
        if info.paged:
            params.extend(_list_params(False))
        for where, declared in (("query", info.query), ("header", info.headers)):
            for name, schema in declared.items():
                spec = {k: v for k, v in schema.items() if k != "required"}
                params.append({**_query(name, swagger_schema(spec), f"The {_words(name)}", where=where),
                               "required": bool(schema.get("required", False))})
        if info.body is not None:
            params.append({"name": "body", "in": "body", "required": not info.body_optional,
                           "schema": swagger_schema(info.body)})
        data = swagger_schema(info.data) if info.data is not None else {}
        schema = data if info.raw else {"type": "object", "required": ["data", "meta"],
                                        "properties": {"data": data, "meta": _ref("meta")}}
        op: dict[str, Any] = {"summary": info.summary or _words(info.operation_id).capitalize(),
                              "parameters": params, "errors": [400] if params else [],
                              "responses": {str(info.status): {"description": "Success", "schema": schema}}}
        if info.consumes != "application/json":
            op["consumes"] = [kind.strip() for kind in info.consumes.split(",")]
        if info.produces != "application/json":
            # Error answers are JSON envelopes whatever a success carries (web/error_handlers.py).
            media_types = [kind.strip() for kind in info.produces.split(",")]
            op["produces"] = [*media_types, *(["application/json"] if "application/json" not in media_types else [])]
        return op

    # Definitions --------------------------------------------------------------------------------------------------

    def _answer(self, description: str, definition: str) -> dict[str, Any]:
        return {"description": description, "schema": _ref(definition)}

    def _envelope(self, name: str, data: Mapping[str, Any]) -> str:
        self.definitions[name] = {"type": "object", "required": ["data", "meta"],
                                  "properties": {"data": dict(data), "meta": _ref("meta")}}
        return name

    def _list_envelope(self, resource: Resource) -> str:
        return self._envelope(f"list{_pascal(resource.kind)}Envelope",
                              {"type": "array", "items": _ref(self._detail(resource))})

    def _detail_envelope(self, resource: Resource) -> str:
        return self._envelope(f"detail{_pascal(resource.singular)}Envelope", _ref(self._detail(resource)))

    def _detail(self, resource: Resource) -> str:
        """The stored fields of a row as answers carry them, and the fields its presentation adds or replaces
        (other computed fields are allowed beside them)."""
        name = f"{resource.singular}Detail"
        if name not in self.definitions:
            properties: dict[str, Any] = {"_links": _ref("links")}
            for f in resource.all_fields():
                if not f.stored or f.name.startswith("_"):
                    continue
                schema = swagger_schema(f.schema)
                # A field whose default is null is null until something sets it.
                nullable = f.nullable or f.default is None
                if nullable:
                    schema["x-nullable"] = True
                properties[f.name] = schema
                if f.ref_name:
                    properties[f.ref_name] = {**_ref("entityRef"), **({"x-nullable": True} if nullable else {})}
            properties.update({key: swagger_schema(schema) for key, schema in resource.presented.items()})
            self.definitions[name] = {"type": "object", "required": ["id", "createdAt", "updatedAt", "_links"],
                                      "properties": properties}
        return name

    def _body(self, resource: Resource, mode: Mode) -> str:
        """The request body definition of ``mode``; for a kind with variants, the base plus one per variant."""
        name = f"{resource.singular}{_MODE_NAMES[mode]}"
        if name in self.definitions:
            return name
        base = request_schema(resource, mode, None)
        if resource.variants is None:
            self.definitions[name] = _stored_key_rules(resource, swagger_schema(base))
            return name
        discriminator = resource.variants.discriminator
        values = [v.value for v in resource.variants.variants]
        required = set(base["required"])
        for variant in resource.variants.variants:
            full = request_schema(resource, mode, variant)
            required |= {discriminator} & set(full["required"])
            own = {k: v for k, v in full["properties"].items() if k not in base["properties"] and k != discriminator}
            own_required = sorted(set(full["required"]) - set(base["required"]) - {discriminator})
            part: dict[str, Any] = {"type": "object", "properties": own}
            if own_required:
                part["required"] = own_required
            self.definitions[f"{resource.singular}{_pascal(variant.value)}{_MODE_NAMES[mode]}"] = {
                "allOf": [_ref(name), swagger_schema(part)], "x-class": variant.value}
        selector: dict[str, Any] = {"type": "string", "enum": values}
        if mode is Mode.UPDATE:
            # A PUT without the discriminator, or with null, keeps the stored one
            # (controller.data.domain.Domain.replace).
            selector = {"anyOf": [selector, {"type": "null"}]}
        properties = {discriminator: selector, **base["properties"]}
        self.definitions[name] = {**_stored_key_rules(resource, swagger_schema(
            {"type": "object", "properties": properties, "required": sorted(required)})),
                                  "discriminator": discriminator}
        return name


def _stored_key_rules(resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a rendered request body) with what the write path refuses beyond the schema it validates with and
    a Swagger 2.0 schema can state: a required unique value (a name) is a storage key, so never empty, and each
    role selector names an attribute (``#attr``) or a row (``@id``)."""
    for key, prop in body.get("properties", {}).items():
        f = resource.field(key)
        if f is None:
            continue
        if f.unique and Mode.CREATE in f.required and prop.get("type") == "string":
            prop.setdefault("minLength", 1)
        if f.roles and prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            prop["items"] = {**prop["items"], "pattern": "^[#@]."}
    return body


def _query(name: str, schema: Mapping[str, Any], description: str, *, where: str = "query") -> dict[str, Any]:
    """A non-body parameter: in the query string unless ``where`` says ``header``."""
    return {"name": name, "in": where, "description": description, **schema}


def _list_params(role_filter: bool) -> list[dict[str, Any]]:
    # An empty value is the parameter's absence (as the reference treats it); each may be given once.
    empty_is_absent = {"allowEmptyValue": True}
    params = [
        _query("limit", {"type": "integer", **empty_is_absent},
               "Page size: 10 when absent, at most 500, -1 for every row"),
        _query("offset", {"type": "integer", **empty_is_absent}, "Rows to skip before the page starts"),
        _query("filter", {"type": "string", **empty_is_absent},
               "A ZitiQL filter, optionally with sort by, skip and limit clauses"),
        _query("sort", {"type": "string", **empty_is_absent}, "Sort fields, each optionally followed by asc or desc"),
    ]
    if role_filter:
        params.append(_query("roleFilter", {"type": "array", "items": {"type": "string", "pattern": "^[#@]"},
                                            "collectionFormat": "multi"},
                             "Role selectors (#attribute, @id, #all) the rows must match"))
        params.append(_query("roleSemantic", {"type": "string", "enum": ["AllOf", "AnyOf"], **empty_is_absent},
                             "Whether a row must match all role selectors or any of them"))
    return params


def _common_definitions() -> dict[str, Any]:
    """The envelope, error and link shapes every operation shares."""
    string = {"type": "string"}
    integer = {"type": "integer", "format": "int64"}
    return {
        "pagination": {"type": "object", "required": ["limit", "offset", "totalCount"],
                       "properties": {"limit": integer, "offset": integer, "totalCount": integer}},
        "meta": {"type": "object", "properties": {
            "pagination": _ref("pagination"), "filterableFields": {"type": "array", "items": string},
            "apiVersion": string, "apiEnrollmentVersion": string}},
        "link": {"type": "object", "required": ["href"], "properties": {"href": string, "method": string,
                                                                        "comment": string}},
        "links": {"type": "object", "additionalProperties": _ref("link")},
        "entityRef": {"type": "object", "properties": {"id": string, "name": string, "entity": string,
                                                       "_links": _ref("links")}},
        "empty": {"type": "object", "required": ["data", "meta"],
                  "properties": {"data": {"type": "object"}, "meta": _ref("meta")}},
        "apiErrorCause": {"type": "object", "description": "The field at fault, or a nested error",
                          "properties": {"field": string, "reason": string, "value": {}, "code": string,
                                         "message": string}},
        "apiError": {"type": "object", "required": ["code", "message", "requestId"],
                     "properties": {"code": string, "message": string, "requestId": string,
                                    "cause": _ref("apiErrorCause")}},
        "apiErrorEnvelope": {"type": "object", "required": ["error", "meta"],
                             "properties": {"error": _ref("apiError"), "meta": _ref("meta")}},
    }
