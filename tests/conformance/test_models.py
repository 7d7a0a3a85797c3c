"""Request models against the reference, and our generated documents against the OpenAPI rules.

For each create / update / patch of a covered kind, the required fields of our request schema
(:func:`controller.model.validation.request_schema`) equal the ``required`` set of the reference body definition, with
``$ref`` and ``allOf`` resolved. A kind with variants (posture checks on ``typeId``) is compared variant by variant
with the reference definition of the same ``x-class``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from openapi_spec_validator import validate

from controller.model.field import Mode, Variant
from controller.model.spec import Resource
from controller.model.validation import request_schema
from tests.conformance import oracle

MODES = {"POST": Mode.CREATE, "PUT": Mode.UPDATE, "PATCH": Mode.PATCH}
APIS = ("management", "client")


def _generic_writes() -> list[str]:
    """``POST /{kind}``, ``PUT|PATCH /{kind}/{id}`` of the covered management segments whose body is a resource's
    create / update / patch definition (``POST /authenticate`` takes credentials instead)."""
    found = []
    for key, op in oracle.covered("management").items():
        body = oracle.body_schema(op) or {}
        if (re.fullmatch(r"POST /[a-z-]+|(PUT|PATCH) /[a-z-]+/\{id\}", key)
                and re.search(r"(Create|Update|Patch)$", body.get("$ref", ""))):
            found.append(key)
    return sorted(found)


def _resource(path: str) -> Resource:
    kind = oracle.segment(path)
    for resource in oracle.served().registry.resources.values():
        if kind == resource.kind or kind in resource.aliases:
            return resource
    pytest.fail(f"no registered kind serves /{kind}")


def _reference_body(key: str) -> dict[str, Any]:
    schema = oracle.body_schema(oracle.operations("management")[key])
    assert schema is not None, f"the reference {key} has no body"
    return schema


@pytest.mark.parametrize("key", oracle.cases("management", _generic_writes(), lambda k: k))
def test_required_fields_match_the_reference(key: str | None) -> None:
    document = oracle.require("management")
    assert key is not None
    method, path = key.split(" ", 1)
    mode = MODES[method]
    resource = _resource(path)
    body = _reference_body(key)
    if resource.variants is None:
        ours = set(request_schema(resource, mode, None)["required"])
        assert ours == oracle.required_fields(document, body)
        return
    # One reference definition per variant, found by its x-class; the sets of variants must agree too.
    subtypes = oracle.subtypes(document, body["$ref"])
    assert set(subtypes) == {v.value for v in resource.variants.variants}
    mismatched = {}
    for variant in resource.variants.variants:
        ours = set(request_schema(resource, mode, variant)["required"])
        theirs = oracle.required_fields(document, document["definitions"][subtypes[variant.value]])
        if ours != theirs:
            mismatched[variant.value] = (sorted(ours), sorted(theirs))
    assert mismatched == {}


@pytest.mark.parametrize("api", APIS)
def test_our_documents_validate(api: str) -> None:
    validate(oracle.document(api))


def _document_bodies() -> list[Any]:
    registry = oracle.served().registry
    cases = []
    for resource in registry.resources.values():
        variants: list[Variant | None] = list(resource.variants.variants) if resource.variants else [None]
        for mode in Mode:
            if mode.value in resource.operations:
                cases += [pytest.param(resource, mode, v, id=f"{resource.kind}-{mode.value}"
                                       + (f"-{v.value}" if v else "")) for v in variants]
    return cases


@pytest.mark.parametrize(("resource", "mode", "variant"), _document_bodies())
def test_documented_body_is_the_enforced_schema(resource: Resource, mode: Mode, variant: Variant | None) -> None:
    """The body our document describes requires exactly what validation requires, with the same properties."""
    document = oracle.document("management")
    op = document["paths"][f"/{resource.kind}" + ("" if mode is Mode.CREATE else "/{id}")][
        {Mode.CREATE: "post", Mode.UPDATE: "put", Mode.PATCH: "patch"}[mode]]
    body = oracle.body_schema(op)
    assert body is not None
    schema = document["definitions"][body["$ref"].rsplit("/", 1)[-1]]
    if variant is not None:
        assert schema["discriminator"] == resource.variants.discriminator  # type: ignore[union-attr]
        schema = document["definitions"][oracle.subtypes(document, body["$ref"])[variant.value]]
    enforced = request_schema(resource, mode, variant)
    assert oracle.required_fields(document, schema) == set(enforced["required"])
    assert _properties(document, schema) == set(enforced["properties"])


def _properties(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    if "$ref" in schema:
        return _properties(document, oracle.definition(document, schema["$ref"]))
    found = set(schema.get("properties", ()))
    for part in schema.get("allOf", ()):
        found |= _properties(document, part)
    return found


# Operations the reference document lists under its global session scheme although the reference controller (and
# we) serve them without a session: a client enrols, and finds its identity provider, before it has one.
ANONYMOUS_IN_FACT = {
    "client": {"POST /enroll", "POST /enroll/ca", "POST /enroll/challenge", "POST /enroll/erott",
               "POST /enroll/extend/router", "GET /enroll/jwks", "POST /enroll/ott", "POST /enroll/ottca",
               "POST /enroll/updb", "GET /external-jwt-signers"},
    "management": set(),
}


@pytest.mark.parametrize("api", APIS)
def test_security_matches_the_reference(api: str) -> None:
    """An operation needs a session in our document exactly when the reference lists a security scheme, except the
    operations that the reference itself serves to anyone."""
    reference = oracle.require(api)
    ours = oracle.document(api)
    differing = {}
    for path, item in ours["paths"].items():
        for method, op in item.items():
            theirs = reference["paths"].get(path, {}).get(method)
            operation = f"{method.upper()} {path}"
            expected = bool(theirs.get("security", True)) if theirs is not None else None
            if operation in ANONYMOUS_IN_FACT[api]:
                expected = False
            if expected is not None and bool(op["security"]) != expected:
                differing[operation] = op["security"]
    assert differing == {}


def test_capabilities_are_the_reference_enum() -> None:
    from web.routes.info_routes import CAPABILITIES

    reference = oracle.require("management")
    assert set(CAPABILITIES) == set(reference["definitions"]["capabilities"]["enum"])
