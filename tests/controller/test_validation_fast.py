"""The compiled (fastjsonschema) checks in front of jsonschema: never a different verdict, never a different error.

``validate_schema`` trusts the compiled check when it accepts, so it must accept exactly what jsonschema accepts.
For every resource kind, write mode and variant, and for the fixed login and MFA schemas, bodies derived from the
schema itself (a valid one, then every field removed, added or replaced by probe values: booleans where integers go,
``1.0``, bounds and one past them, wrong types, nulls, nested values) must get the same accept/reject from both
libraries, and the same error (code and cause) with the compiled check as without it.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import jsonschema
import msgspec
import pytest

from controller.authentication import DISABLE_SCHEMA, MFA_CODE_SCHEMA
from controller.errors import ApiError
from controller.model import validation
from controller.model.field import Mode, Variant
from controller.model.spec import Resource
from controller.model.validation import FastCheck, fast_check, request_schema, validate_body, validate_schema
from controller.resources.catalog import RESOURCES

PROBES: list[Any] = [None, True, False, 0, 1, 1.0, 1.5, -1, 65535, 65536, 2**63, "", "x", "User", "OS", "default",
                     [], ["x"], [1], [None], [True], {}, {"a": "b"}, {"a": 1}, {"a": True}, {"a": None}, {"a": []}]


def _real(schema: Any) -> dict[str, Any]:
    """The non-null branch of a nullable field's ``anyOf`` (an empty schema for what is not an object)."""
    if not isinstance(schema, dict):
        return {}
    return _real(schema["anyOf"][0]) if "anyOf" in schema else schema


def sample(schema: Any, required_only: bool = False) -> Any:
    """A value the schema accepts (every property, or only the required ones)."""
    schema = _real(schema)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        names = schema.get("required", []) if required_only else list(props)
        value = {name: sample(props[name]) for name in names}
        if isinstance(schema.get("additionalProperties"), dict) and not required_only:
            value["k"] = sample(schema["additionalProperties"])
        return value
    if kind == "array":
        return [sample(schema.get("items", {}))] * max(1, schema.get("minItems", 0))
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return None if kind == "null" else {}


def probes(schema: Any) -> list[Any]:
    """Generic probes plus the schema's own enum values, bounds and one past them, and lengths at their limits."""
    schema = _real(schema)
    extra: list[Any] = list(schema.get("enum", []))
    for bound in ("minimum", "maximum"):
        if bound in schema:
            extra += [schema[bound], schema[bound] - 1, schema[bound] + 1, float(schema[bound])]
    for limit in ("minLength", "maxLength"):
        if limit in schema:
            extra += ["y" * schema[limit], "y" * max(0, schema[limit] - 1), "y" * (schema[limit] + 1)]
    if "minItems" in schema:
        extra += [[sample(schema.get("items", {}))] * n for n in range(schema["minItems"] + 1)]
    return PROBES + extra


def variants(schema: Any, value: Any) -> Iterator[Any]:
    """``value`` with one spot changed: replaced by each probe, a property removed or added, an item appended."""
    yield from probes(schema)
    real = _real(schema)
    if isinstance(value, dict):
        props = real.get("properties", {})
        for name, prop in props.items():
            if name in value:
                yield {k: v for k, v in value.items() if k != name}
                for changed in variants(prop, value[name]):
                    yield {**value, name: changed}
            else:
                yield {**value, name: sample(prop)}
        extra = real.get("additionalProperties")
        if isinstance(extra, dict):
            for changed in variants(extra, sample(extra)):
                yield {**value, "other": changed}
        yield {**value, "notAField": 1}
    if isinstance(value, list) and isinstance(real.get("items"), dict):
        for changed in variants(real["items"], sample(real["items"])):
            yield [*value, changed]


def bodies(schema: dict[str, Any]) -> list[Any]:
    full, minimal = sample(schema), sample(schema, required_only=True)
    return [full, minimal, *variants(schema, full), *variants(schema, minimal)]


def accepts(fast: FastCheck, instance: Any) -> bool:
    try:
        fast(instance)
    except Exception:
        return False
    return True


def verdict(validator: jsonschema.protocols.Validator, instance: Any, fast: FastCheck | None) -> Any:
    try:
        validate_schema(validator, instance, fast=fast)
    except ApiError as exc:
        return exc.code, exc.cause
    return None


def request_cases() -> Iterator[tuple[Resource, Mode, Variant | None]]:
    for resource in RESOURCES:
        for mode in Mode:
            for variant in [None, *(resource.variants.variants if resource.variants else ())]:
                yield resource, mode, variant


REQUEST_CASES = list(request_cases())
FIXED = {"disable": (jsonschema.Draft7Validator(DISABLE_SCHEMA), DISABLE_SCHEMA),
         "mfa-code": (jsonschema.Draft7Validator(MFA_CODE_SCHEMA), MFA_CODE_SCHEMA)}


def check_agreement(validator: jsonschema.protocols.Validator, fast: FastCheck, instances: list[Any]) -> None:
    outcomes = set()
    for instance in instances:
        before = msgspec.json.encode(instance)
        fast_ok = accepts(fast, instance)
        assert msgspec.json.encode(instance) == before, "the compiled check changed the body"
        assert fast_ok == validator.is_valid(instance), instance
        outcomes.add(fast_ok)
        if not fast_ok:
            # What the client sees is what jsonschema alone would have said.
            assert verdict(validator, instance, fast) == verdict(validator, instance, None) is not None
    assert outcomes == {True, False}, "the bodies must include accepted and rejected ones"


@pytest.mark.parametrize(("resource", "mode", "variant"), REQUEST_CASES,
                         ids=[f"{r.kind}-{m}-{v.value if v else ''}" for r, m, v in REQUEST_CASES])
def test_request_schemas_agree(resource: Resource, mode: Mode, variant: Variant | None) -> None:
    validator, fast = validation._validator(resource, mode, variant)
    assert fast is not None, "every derived request schema compiles"
    schema = request_schema(resource, mode, variant)
    assert validator.is_valid(sample(schema)) and validator.is_valid(sample(schema, required_only=True))
    check_agreement(validator, fast, bodies(schema))


@pytest.mark.parametrize("name", FIXED)
def test_fixed_schemas_agree(name: str) -> None:
    validator, schema = FIXED[name]
    fast = fast_check(schema)
    assert fast is not None
    check_agreement(validator, fast, [*bodies(schema), None, [], "code", 1, True, {"code": 1, "durationMinutes": 1}])


def test_booleans_are_not_integers_and_whole_floats_are() -> None:
    identities = next(r for r in RESOURCES if r.kind == "identities")
    base: dict[str, Any] = {"name": "a", "type": "User", "isAdmin": False}
    validator, fast = validation._validator(identities, Mode.CREATE, None)
    assert fast is not None
    for value, valid in ((True, False), (False, False), (1.0, True), (1, True), (1.5, False), ("1", False)):
        body: dict[str, Any] = {**base, "defaultHostingCost": value}
        assert (accepts(fast, body), validator.is_valid(body)) == (valid, valid), value
    with pytest.raises(ApiError) as caught:
        validate_body(identities, {**base, "defaultHostingCost": True}, Mode.CREATE)
    assert caught.value.cause == {"field": "defaultHostingCost", "reason":
                                  "defaultHostingCost in body must be of type integer", "value": "true"}
    disable_fast = fast_check(DISABLE_SCHEMA)
    assert disable_fast is not None and not accepts(disable_fast, {"durationMinutes": True})


def test_formats_in_our_schemas_are_not_asserted_by_either() -> None:
    formats = {}
    for resource, mode, variant in REQUEST_CASES:
        validator, fast = validation._validator(resource, mode, variant)
        for name, prop in request_schema(resource, mode, variant)["properties"].items():
            if "format" in _real(prop):
                formats[_real(prop)["format"]] = (validator, fast, name)
    assert set(formats) == {"uri", "url", "byte", "date-time"}, "a new format: check both libraries treat it alike"
    for validator, fast, name in formats.values():
        assert fast is not None
        # No instance is built for the other required fields: the check is that the format alone is no reason.
        errors = list(validator.iter_errors({name: "not a :// uri or base64 %%"}))
        assert all(e.validator != "format" for e in errors)


# --- compiling ----------------------------------------------------------------------------------------------


@pytest.fixture
def no_fetching(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a schema reference was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.mark.usefixtures("no_fetching")
def test_a_schema_that_does_not_compile_has_no_fast_check_and_nothing_is_fetched() -> None:
    assert fast_check({"$ref": "http://127.0.0.1:9/remote.json"}) is None
    assert fast_check({"properties": {"a": {"$ref": "file:///etc/passwd"}}}) is None
    assert fast_check({"properties": {"a": {"$ref": "#/definitions/missing"}}}) is None


def test_a_failing_compiled_check_leaves_the_verdict_to_jsonschema() -> None:
    # An infinite bound is spelled ``inf`` in the generated code, which fails with NameError when it runs.
    schema = {"maximum": float("inf")}
    infinite = fast_check(schema)
    assert infinite is not None and not accepts(infinite, 1)
    validate_schema(jsonschema.Draft7Validator(schema), 1, fast=infinite)


def test_compiling_leaves_the_schema_unchanged() -> None:
    # fastjsonschema rewrites each ``$ref`` of what it compiles, in place.
    schema = {"$id": "http://example.com/s", "properties": {"a": {"$ref": "#/definitions/a"}},
              "definitions": {"a": {"type": "boolean"}}}
    before = msgspec.json.encode(schema)
    fast = fast_check(schema)
    assert fast is not None and msgspec.json.encode(schema) == before
    assert accepts(fast, {"a": True}) and not accepts(fast, {"a": 1})
