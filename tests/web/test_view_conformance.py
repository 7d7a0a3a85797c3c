"""The bodies of the posture engine's views (Client API services and sessions, management posture data and
failures) held to the reference definitions in client.yml and management.yml.
"""

from __future__ import annotations

from typing import Any

from controller.runtime.composition import Controller
from tests.conformance import oracle
from tests.support import Api
from tests.web.test_client_posture import enrol_mfa
from tests.web.test_posture_views import net

# Properties we add on purpose, by definition: a session's edge routers carry their id (the reference sends only the
# name), so that a client can match them with its edge router list.
_KNOWN_EXTRAS = {"sessionEdgeRouter": {"id"}}

_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "boolean": (bool,), "integer": (int,),
                                            "number": (int, float), "array": (list,), "object": (dict,)}


def _resolve(document: dict[str, Any], schema: dict[str, Any], name: str = "") -> tuple[str, dict[str, Any]]:
    """The schema behind ``$ref`` chains, with the name of the last definition followed."""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = oracle.definition(document, schema["$ref"])
    return name, schema


def _properties(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    _, schema = _resolve(document, schema)
    found = dict(schema.get("properties", {}))
    for part in schema.get("allOf", ()):
        found.update(_properties(document, part))
    return found


def shape_problems(document: dict[str, Any], schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """Where ``value`` deviates from ``schema``: a missing required property, a property the definition does not
    name, or a value of the wrong JSON type. Null is accepted anywhere (the reference writes null for "no value")."""
    name, schema = _resolve(document, schema)
    if value is None:
        return []
    discriminator = schema.get("discriminator")
    if discriminator and isinstance(value, dict):
        sub = oracle.subtypes(document, f"#/definitions/{name}").get(str(value.get(discriminator)))
        if sub is None:
            return [f"{where}: unknown {discriminator} {value.get(discriminator)!r}"]
        name, schema = sub, document["definitions"][sub]
    properties = _properties(document, schema)
    if properties or schema.get("type") == "object" or "additionalProperties" in schema:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        problems = [f"{where}: missing {field}" for field in sorted(oracle.required_fields(document, schema))
                    if field not in value]
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                problems += shape_problems(document, properties[key], item, f"{where}.{key}")
            elif isinstance(extra, dict):
                problems += shape_problems(document, extra, item, f"{where}[{key}]")
            elif key not in _KNOWN_EXTRAS.get(name, ()):
                problems.append(f"{where}: unknown property {key}")
        return problems
    expected = schema.get("type")
    if expected in _JSON_TYPES and (not isinstance(value, _JSON_TYPES[expected]) or (
            expected in ("integer", "number") and isinstance(value, bool))):
        return [f"{where}: expected {expected}, got {value!r}"]
    if expected == "array":
        return [p for i, item in enumerate(value)
                for p in shape_problems(document, schema.get("items", {}), item, f"{where}[{i}]")]
    return []


async def test_bodies_match_the_reference_definitions(admin: Api, controller: Controller) -> None:
    management, client = oracle.require("management"), oracle.require("client")
    n = await net(admin)
    checks: list[dict[str, Any]] = [
        {"typeId": "OS", "operatingSystems": [{"type": "Linux", "versions": [">=6.0.0"]}]},
        {"typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]},
        {"typeId": "DOMAIN", "domains": ["corp"]},
        {"typeId": "PROCESS", "process": {"osType": "Linux", "path": "/bin/a", "hashes": ["a" * 64]}},
        {"typeId": "PROCESS_MULTI", "semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/bin/b"}]},
        {"typeId": "MFA", "timeoutSeconds": 60, "promptOnWake": True},
    ]
    for i, check in enumerate(checks):
        await admin.create("/posture-checks", {"name": f"c{i}", "roleAttributes": ["all-types"], **check})
    await admin.patch(f"/service-policies/{n.dial_u}", {"postureCheckRoles": ["#all-types"]})
    await n.client1.post("/posture-response-bulk", [
        {"id": "o", "typeId": "OS", "type": "Linux", "version": "5.0.0"},
        {"id": "p", "typeId": "PROCESS", "path": "/bin/b", "isRunning": False}])
    assert (await n.client1.post("/sessions", {"serviceId": n.svc})).status == 409
    await enrol_mfa(n.client1, controller)
    woke = await n.client1.post("/posture-response", {"id": "e", "typeId": "ENDPOINT_STATE", "woken": True})
    created = await n.client2.post("/sessions", {"serviceId": n.svc})
    assert created.status == 201
    session = created.data["id"]

    bodies: list[tuple[dict[str, Any], str, Any]] = [
        (client, "serviceDetail", (await n.client1.get(f"/services/{n.svc}")).data),
        (client, "postureResponse", woke.data),
        (client, "sessionDetail", created.data),
        (client, "sessionDetail", (await n.client2.get(f"/sessions/{session}")).data),
        (client, "currentIdentityEdgeRouterDetail", (await n.client1.get("/current-identity/edge-routers")).data[0]),
        (client, "currentApiSessionServiceUpdateList",
         (await n.client1.get("/current-api-session/service-updates")).data),
        (management, "sessionManagementDetail", (await admin.get(f"/sessions/{session}")).data),
        (management, "sessionManagementDetail", (await admin.get("/sessions")).data[0]),
        (management, "sessionRoutePathDetail", (await admin.get(f"/sessions/{session}/route-path")).data),
        (management, "postureData", (await admin.get(f"/identities/{n.user1}/posture-data")).data),
        (management, "postureData", (await admin.get(f"/identities/{n.user2}/posture-data")).data),
        (management, "failedServiceRequestList",
         (await admin.get(f"/identities/{n.user1}/failed-service-requests")).data),
        (management, "policyAdvice", (await admin.get(f"/identities/{n.user1}/policy-advice/{n.svc}")).data),
    ]
    failed = bodies[11][2][0]["policyFailures"][0]["checks"]
    assert {c["postureCheckType"] for c in failed} == {"OS", "MAC", "DOMAIN", "PROCESS", "PROCESS_MULTI", "MFA"}
    problems = [p for document, name, body in bodies
                for p in shape_problems(document, {"$ref": f"#/definitions/{name}"}, body, name)]
    assert problems == []
