"""Every reference operation of the covered kinds is routed with the reference method, path and operationId.

The expected operations are derived from the reference documents, filtered by the covered first path segments
(``oracle.COVERED``). Operations nobody has built yet are listed in ``NOT_YET`` with the reason; the tests assert
that they really are not routed, so the list cannot go stale: whoever builds one removes it from here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance import oracle


def _group(reason: str, *ops: str) -> dict[str, str]:
    return dict.fromkeys(ops, reason)


# Reference operations not routed yet, "METHOD /path" -> why. Keyed per API.
NOT_YET: dict[str, dict[str, str]] = {
    "management": {},
    "client": {
        **_group(
            "service writes on the client API: listed by the reference, served by neither OpenZiti nor us; "
            "services are managed on the management API",
            "PUT /services/{id}", "PATCH /services/{id}", "DELETE /services/{id}"),
    },
}

# Our own operations, beyond the reference (documented in our OpenAPI document), "METHOD /path" -> what they are.
OURS: dict[str, dict[str, str]] = {
    "management": {
        "GET /events": "the kept events, filtered and paged",
        "GET /events/stream": "the events as they happen (Server-Sent Events)",
        "GET /identities/{id}/access/{serviceId}": "why an identity can or cannot use a service now",
    },
    "client": {},
}

APIS = ("management", "client")


def _expected(api: str) -> list[str]:
    return sorted(set(oracle.covered(api)) - set(NOT_YET[api]))


def _cases(api: str, keys: Any) -> list[Any]:
    return [pytest.param(api, c.values[0], id=f"{api}:{c.id}") for c in oracle.cases(api, keys, lambda k: k)]


@pytest.mark.parametrize(("api", "key"), [case for api in APIS for case in _cases(api, _expected(api))])
def test_covered_operation_is_routed(api: str, key: str | None) -> None:
    oracle.require(api)
    routed = key in oracle.served().keys(api)
    assert routed, f"{key} is not routed on the {api} API"


@pytest.mark.parametrize(("api", "key"), [case for api in APIS for case in _cases(api, sorted(NOT_YET[api]))])
def test_not_yet_operation_is_really_not_routed(api: str, key: str | None) -> None:
    """Catches a stale NOT_YET entry: once an operation is built, take it off the list."""
    oracle.require(api)
    assert key in oracle.operations(api), f"NOT_YET lists {key}, which the {api} reference does not define"
    routed = key in oracle.served().keys(api)
    assert not routed, f"{key} is routed now: remove it from NOT_YET[{api!r}]"


@pytest.mark.parametrize("api", APIS)
def test_every_reference_operation_is_covered_or_listed(api: str) -> None:
    """A reference operation outside the covered segments must be named in NOT_YET, never silently ignored."""
    oracle.require(api)
    ignored = sorted(set(oracle.operations(api)) - set(oracle.covered(api)) - set(NOT_YET[api]))
    assert ignored == []


@pytest.mark.parametrize("api", APIS)
def test_routed_operations_carry_the_reference_operation_id(api: str) -> None:
    oracle.require(api)
    reference = oracle.operations(api)
    ours = {f"{r.method} {r.path}": r.operation_id for r in oracle.served().routes if r.api == api}
    wrong = {key: (ours[key], op["operationId"]) for key, op in reference.items()
             if key in ours and op.get("operationId") and ours[key] != op["operationId"]}
    assert wrong == {}


@pytest.mark.parametrize("api", APIS)
def test_we_route_nothing_the_reference_lacks(api: str) -> None:
    oracle.require(api)
    assert sorted(oracle.served().keys(api) - set(oracle.operations(api)) - set(OURS[api])) == []


@pytest.mark.parametrize("api", APIS)
def test_our_own_operations_are_ours_and_routed(api: str) -> None:
    """An operation of our own that the reference defines too must follow the reference instead."""
    oracle.require(api)
    assert sorted(set(OURS[api]) & set(oracle.operations(api))) == []
    assert sorted(set(OURS[api]) - oracle.served().keys(api)) == []


@pytest.mark.parametrize("api", APIS)
def test_every_served_route_is_in_our_document(api: str) -> None:
    """Each recorded route is documented, and each URL rule under the API's base path was recorded."""
    served = oracle.served()
    document = oracle.document(api)
    documented = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item}
    assert served.keys(api) == documented
    base = document["basePath"]
    rules = {f"{method} {oracle.openapi_path(rule[len(base):]) or '/'}" for method, rule in served.rules
             if rule.startswith(base)}
    assert rules == documented
