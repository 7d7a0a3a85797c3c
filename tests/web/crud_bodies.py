"""Request bodies for the table-driven tests of every registered kind (``tests/web/test_generic_*.py``).

Bodies are built from the kinds' specs: :func:`minimal_body` fills every required field from its JSON schema,
creates the rows that required references point at, and applies the few per-kind values in ``OVERRIDES`` that a
schema cannot express (a hook's rule, a variant to use); :func:`rich_body` also sets every optional field to a
value other than its default.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import pytest

from controller.model.field import MISSING, Field, Mode
from controller.model.spec import Resource
from controller.resources.catalog import RESOURCES
from tests.certificates import Authority
from tests.support import Api

# Values a kind needs beyond what its schema says (hook rules such as "method must be updb").
OVERRIDES: dict[str, dict[str, Any]] = {
    "authenticators": {"method": "updb", "password": "a-password"},
    "posture-checks": {"typeId": "MFA"},
    "services": {"configs": []},  # ids of existing configs, one per config type
    # A signer has exactly one key source; overridden fields are left out of the "every optional field" bodies.
    "external-jwt-signers": {"certPem": None, "jwksEndpoint": "https://idp.example/jwks"},
}

# Values that must differ per body and cannot be written as data (a CA's own certificate).
FACTORIES: dict[str, dict[str, Callable[[], Any]]] = {
    "cas": {"certPem": lambda: Authority.create().pem},
}

# Non-default values of optional fields that need real rows (a field holding a list of ids, not a ``ref``).
RICH_OVERRIDES: dict[str, dict[str, Callable[[Api], Awaitable[Any]]]] = {
    "services": {"configs": lambda admin: create_references(admin, "configs")},
}

_counter = itertools.count(1)


def kinds(operation: str, *, predicate: Any = None) -> list[Any]:
    return [pytest.param(r, id=r.kind) for r in RESOURCES
            if operation in r.operations and (predicate is None or predicate(r))]


def variant_fields(resource: Resource, body: Mapping[str, Any] | None = None) -> tuple[Field, ...]:
    """The body fields of the variant a test body uses (the override's, or the first)."""
    variant = None
    if resource.variants is not None:
        chosen = (body or OVERRIDES.get(resource.kind, {})).get(resource.variants.discriminator)
        variant = resource.variants.get(chosen) if chosen else resource.variants.variants[0]
    return resource.fields_for(variant)


def sample_value(schema: Mapping[str, Any], name: str) -> Any:
    """A valid value for ``schema`` (strings unique per call)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "string" and schema.get("format") in ("uri", "url"):
        return f"https://{name.lower()}-{next(_counter)}.example/"
    if kind == "string":
        text = f"{name}-{next(_counter)}"
        text = text.ljust(int(schema.get("minLength", 0)), "x")
        return text[: int(schema.get("maxLength", len(text)))]
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "array":
        return [sample_value(schema.get("items", {"type": "string"}), name) for _ in range(schema.get("minItems", 0))]
    if kind == "object":
        props = schema.get("properties", {})
        return {key: sample_value(props[key], key) for key in schema.get("required", [])}
    return f"{name}-{next(_counter)}"


def wrong_type(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    wrong: dict[str, Any] = {"string": 12345, "boolean": "yes", "integer": "seven", "number": "seven",
                             "array": "not-a-list", "object": ["not", "an", "object"]}
    return wrong[str(kind)]


def field_default(f: Field) -> Any:
    return f.default() if callable(f.default) else f.default


async def create_reference(admin: Api, kind: str) -> str:
    """The id of a new row of ``kind`` (a prerequisite of another kind's body)."""
    resource = next(r for r in RESOURCES if r.kind == kind)
    return await admin.create(f"/{kind}", await minimal_body(admin, resource))


async def create_references(admin: Api, kind: str) -> list[str]:
    return [await create_reference(admin, kind)]


async def minimal_body(admin: Api, resource: Resource) -> dict[str, Any]:
    """A minimal valid create body that also carries every field PUT requires."""
    body: dict[str, Any] = dict(OVERRIDES.get(resource.kind, {}))
    body.update({name: make() for name, make in FACTORIES.get(resource.kind, {}).items()})
    for f in variant_fields(resource):
        if f.name in body or f.name.startswith("_") or not (f.required & {Mode.CREATE, Mode.UPDATE}):
            continue
        body[f.name] = await create_reference(admin, f.ref) if f.ref else sample_value(f.schema, f.name)
    if resource.variants is not None:
        body.setdefault(resource.variants.discriminator, resource.variants.variants[0].value)
    return body


def optional_fields(resource: Resource, body: Mapping[str, Any]) -> Iterator[Field]:
    """Stored optional fields with a default that both create and PUT write."""
    overridden = OVERRIDES.get(resource.kind, {})
    for f in variant_fields(resource, body):
        if (f.stored and not f.name.startswith("_") and f.default is not MISSING and not f.required
                and f.name not in overridden
                and {Mode.CREATE, Mode.UPDATE} <= f.writable):
            yield f


async def non_default_value(admin: Api, f: Field) -> Any:
    """A valid value for ``f`` that differs from its default."""
    default = field_default(f)
    if f.ref:
        return await create_reference(admin, f.ref)
    if f.roles:
        return ["#picked"]
    schema = f.schema
    if "enum" in schema:
        return next(v for v in schema["enum"] if v != default)
    kind = schema.get("type")
    if kind == "boolean":
        return not default
    if kind == "integer":
        # Positive, since some kinds store every non-positive value as one (an MFA timeout of 0 is -1).
        return min(30 if default != 30 else 31, schema.get("maximum", 31))
    if kind == "array":
        return [sample_value(schema.get("items", {"type": "string"}), f.name)]
    if kind == "object":
        extra = schema.get("additionalProperties")
        value = sample_value(extra, "v") if isinstance(extra, dict) else "v"
        return {**sample_value(schema, f.name), "picked": value}
    return sample_value(schema, f.name)


async def rich_body(admin: Api, resource: Resource) -> dict[str, Any]:
    body = await minimal_body(admin, resource)
    body["tags"] = {"owner": "tests", "flag": True}
    special = RICH_OVERRIDES.get(resource.kind, {})
    for f in optional_fields(resource, body):
        body[f.name] = await special[f.name](admin) if f.name in special else await non_default_value(admin, f)
    return body


async def all_rows(admin: Api, kind: str) -> list[Any]:
    reply = await admin.get(f"/{kind}", query={"limit": "-1"})
    assert reply.status == 200, reply.body
    return list(reply.data)


def assert_field_error(reply: Any, field: str, reason: str | None = None) -> None:
    assert reply.status == 400, reply.body
    assert reply.error["code"] == "COULD_NOT_VALIDATE", reply.body
    assert reply.error["cause"]["field"] == field, reply.body
    if reason is not None:
        assert reply.error["cause"]["reason"] == reason


def unique_fields(resource: Resource) -> list[str]:
    return [f.name for f in variant_fields(resource) if f.unique and Mode.CREATE in f.writable]


def discriminated(resource: Resource, body: Mapping[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A PATCH body plus the discriminator, which a PATCH of a kind with variants must carry."""
    if resource.variants is not None:
        patch[resource.variants.discriminator] = body[resource.variants.discriminator]
    return patch
