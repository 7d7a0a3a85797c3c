"""The model file and ``plan`` without a controller: parsing, canonical forms, the diff, references, dumping."""

from __future__ import annotations

from typing import Any

import pytest

from controller.admin.apply import Change, FieldChange, Plan, plan, wire_body
from controller.admin.export import BUILTIN, Current, current_from_rows, dump_model
from controller.admin.model_file import KIND_ORDER, Model, ModelError, entity_fields, parse_model

FILE = """
config-types:
  - name: proxy.v1
    schema: {type: object}
configs:
  - name: web-intercept
    configType: intercept.v1
    data: {protocols: [tcp], addresses: [web.internal], portRanges: [{low: 443, high: 443}]}
posture-checks:
  - name: mac
    typeId: MAC
    macAddresses: ["AA:BB:CC:DD:EE:FF"]
  - name: mfa
    typeId: MFA
    timeoutSeconds: 0
services:
  - name: web
    roleAttributes: [web, public, web]
    configs: [web-intercept]
identities:
  - name: alice
    type: User
    roleAttributes: [staff]
    enroll: ott
service-policies:
  - name: dial-web
    type: Dial
    identityRoles: ["@alice", "#staff", "@Default Admin"]
    serviceRoles: ["@web"]
    postureCheckRoles: ["@mfa"]
edge-router-policies:
  - name: routers
    identityRoles: ["#all"]
    edgeRouterRoles: ["@er1"]
"""


def _empty_current(**extra_rows: list[dict[str, Any]]) -> Current:
    """A new controller's state: the default admin, the default auth policy, the seeded config types."""
    rows: dict[str, list[dict[str, Any]]] = {
        "identities": [{"id": "ADMIN", "name": "Default Admin", "typeId": "Default", "isAdmin": True,
                        "isDefaultAdmin": True}],
        "auth-policies": [{"id": "default", "name": "Default"}, {"id": "AP2", "name": "strict"}],
        "config-types": [{"id": f"CT{i}", "name": name, "schema": BUILTIN["config-types"][name]["schema"],
                          "tags": {}} for i, name in enumerate(BUILTIN["config-types"])],
        "edge-routers": [{"id": "ER1", "name": "er1"}],
    }
    for kind, more in extra_rows.items():
        rows[kind] = rows.get(kind, []) + more
    return current_from_rows(rows)


def _applied(model: Model, base: Current) -> Current:
    """``base`` after a perfect apply of ``model``: what the plan would find next time."""
    entities = {kind: {**base.entities.get(kind, {}), **model.get(kind, {})} for kind in KIND_ORDER}
    ids = {kind: dict(names) for kind, names in base.ids.items()}
    for kind, named in model.items():
        for name in named:
            ids.setdefault(kind, {}).setdefault(name, f"{kind}:{name}")
    return Current(entities, ids, base.reserved, base.builtin)


def test_a_file_reads_into_canonical_entities() -> None:
    model = parse_model(FILE)
    assert list(model) == list(KIND_ORDER)
    assert model["services"]["web"] == {"name": "web", "encryptionRequired": True, "maxIdleTimeMillis": 0,
                                        "terminatorStrategy": "smartrouting", "roleAttributes": ["public", "web"],
                                        "configs": ["web-intercept"], "tags": {}}
    assert model["posture-checks"]["mac"]["macAddresses"] == ["aa-bb-cc-dd-ee-ff"]
    assert model["posture-checks"]["mfa"] == {"name": "mfa", "typeId": "MFA", "roleAttributes": [],
                                              "reportOnly": False, "timeoutSeconds": -1, "promptOnWake": False,
                                              "promptOnUnlock": False,
                                              "ignoreLegacyEndpoints": False, "tags": {}}
    assert model["service-policies"]["dial-web"]["identityRoles"] == ["#staff", "@Default Admin", "@alice"]
    assert model["identities"]["alice"]["enroll"] == "ott"
    assert parse_model("") == {kind: {} for kind in KIND_ORDER}


def test_a_new_controller_gets_everything_created_in_dependency_order() -> None:
    the_plan = plan(parse_model(FILE), _empty_current())
    assert the_plan.lines() == [
        "+ create config-types proxy.v1",
        "+ create configs web-intercept",
        "+ create posture-checks mac",
        "+ create posture-checks mfa",
        "+ create services web",
        "+ create identities alice",
        "+ create service-policies dial-web",
        "+ create edge-router-policies routers",
    ]
    assert the_plan.summary() == "8 to create, 0 to update, 0 to delete"


def test_planning_again_after_the_apply_is_empty() -> None:
    model = parse_model(FILE)
    after = _applied(model, _empty_current())
    assert plan(model, after).empty
    assert plan(model, after, prune=True).empty


def test_an_update_lists_only_the_fields_that_differ() -> None:
    model = parse_model(FILE)
    after = _applied(model, _empty_current())
    changed = parse_model(FILE.replace("roleAttributes: [web, public, web]",
                                       "roleAttributes: [web]\n    maxIdleTimeMillis: 5000"))
    the_plan = plan(changed, after)
    assert the_plan.changes == (Change("update", "services", "web", changed["services"]["web"], (
        FieldChange("maxIdleTimeMillis", 0, 5000), FieldChange("roleAttributes", ["public", "web"], ["web"]))),)
    assert the_plan.lines() == ['~ update services web: maxIdleTimeMillis: 0 -> 5000',
                                '~ update services web: roleAttributes: ["public", "web"] -> ["web"]']


def test_a_field_left_out_goes_back_to_its_default() -> None:
    model = parse_model(FILE)
    after = _applied(model, _empty_current())
    trimmed = parse_model(FILE.replace('    postureCheckRoles: ["@mfa"]\n', ""))
    assert plan(trimmed, after).lines() == [
        '~ update service-policies dial-web: postureCheckRoles: ["@mfa"] -> []']


def test_prune_deletes_what_the_file_no_longer_names_in_reverse_order() -> None:
    model = parse_model(FILE)
    after = _applied(model, _empty_current())
    smaller = parse_model("config-types: [{name: proxy.v1, schema: {type: object}}]")
    assert plan(smaller, after).empty  # without --prune nothing is deleted
    assert plan(smaller, after, prune=True).lines() == [
        "- delete edge-router-policies routers",
        "- delete service-policies dial-web",
        "- delete identities alice",
        "- delete services web",
        "- delete posture-checks mac",
        "- delete posture-checks mfa",
        "- delete configs web-intercept",
    ]  # never the default admin nor the seeded config types


def test_references_must_name_what_will_exist() -> None:
    current = _empty_current()
    missing = FILE.replace('serviceRoles: ["@web"]', 'serviceRoles: ["@mail"]')
    with pytest.raises(ModelError, match=r"^service-policies 'dial-web': serviceRoles: no service named 'mail'$"):
        plan(parse_model(missing), current)
    with pytest.raises(ModelError, match=r"^configs 'c': configType: no config type named 'nope'$"):
        plan(parse_model("configs: [{name: c, configType: nope, data: {}}]"), current)
    with pytest.raises(ModelError, match=r"edgeRouterRoles: no edge router named 'er9'"):
        plan(parse_model(FILE.replace("@er1", "@er9")), current)
    with pytest.raises(ModelError, match=r"serviceHostingCosts: no service named 'web'"):
        plan(parse_model("identities: [{name: h, serviceHostingCosts: {web: 3}}]"), current)


def test_a_reference_to_what_prune_deletes_is_refused() -> None:
    model = parse_model(FILE)
    after = _applied(model, _empty_current())
    without_mfa = parse_model(FILE.replace("  - name: mfa\n    typeId: MFA\n    timeoutSeconds: 0\n", ""))
    assert plan(without_mfa, after).empty  # the check stays when nothing is pruned
    with pytest.raises(ModelError, match=r"postureCheckRoles: no posture check named 'mfa' \(--prune deletes it"):
        plan(without_mfa, after, prune=True)


def test_reserved_entities_are_referred_to_but_never_defined() -> None:
    with pytest.raises(ModelError, match=r"^identities 'Default Admin': belongs to the controller"):
        plan(parse_model("identities: [{name: Default Admin, isAdmin: true}]"), _empty_current())


def test_fields_fixed_at_create_are_not_changed() -> None:
    model = parse_model(FILE)
    after = _applied(model, _empty_current())
    with pytest.raises(ModelError, match=r"^services 'web': encryptionRequired cannot change once created "
                                         r"\(true -> false\); delete it first$"):
        plan(parse_model(FILE.replace("    configs: [web-intercept]\n",
                                      "    configs: [web-intercept]\n    encryptionRequired: false\n")), after)
    # enroll only matters at create: an enrolled identity is not planned again.
    assert plan(parse_model(FILE.replace("    enroll: ott\n", "")), after).empty


def test_naming_the_default_auth_policy_is_leaving_it_out() -> None:
    current = _empty_current(identities=[{"id": "I1", "name": "bob", "typeId": "User", "authPolicyId": "default"},
                                         {"id": "I2", "name": "carol", "typeId": "User", "authPolicyId": "AP2"}])
    model = parse_model("identities: [{name: bob, type: User, authPolicy: Default},"
                        " {name: carol, type: User, authPolicy: strict}]")
    assert plan(model, current).empty
    assert current.entities["identities"]["carol"]["authPolicy"] == "strict"


def test_api_rows_read_as_entities_with_names_for_ids() -> None:
    current = _empty_current(
        services=[{"id": "S1", "name": "web", "encryptionRequired": True, "maxIdleTimeMillis": 0,
                   "terminatorStrategy": "smartrouting", "roleAttributes": None, "configs": ["C1"], "tags": None,
                   "createdAt": "2026-01-01T00:00:00.000Z", "_links": {}}],
        configs=[{"id": "C1", "name": "cfg", "configTypeId": "CT0", "configType": {"id": "CT0"}, "data": {"a": 1},
                  "tags": {}}],
        identities=[{"id": "I1", "name": "host", "typeId": "Device", "type": {"id": "Device"}, "isAdmin": False,
                     "authPolicyId": "default", "externalId": "", "serviceHostingCosts": {"S1": 4},
                     "enrollment": {"ott": {"jwt": "secret", "token": "secret"}}, "appData": None}],
        **{"service-policies": [{"id": "P1", "name": "p", "type": "Bind", "semantic": "AnyOf",
                                 "identityRoles": ["@I1", "#hosts"], "serviceRoles": ["@S1"],
                                 "postureCheckRoles": []}]})
    entities = current.entities
    assert entities["services"]["web"]["configs"] == ["cfg"]
    assert entities["services"]["web"]["roleAttributes"] == [] and entities["services"]["web"]["tags"] == {}
    assert entities["configs"]["cfg"]["configType"] == "intercept.v1"
    host = entities["identities"]["host"]
    assert (host["type"], host["authPolicy"], host["externalId"], host["enroll"]) == ("Device", None, None, "ott")
    assert host["serviceHostingCosts"] == {"web": 4} and host["appData"] == {}
    assert entities["service-policies"]["p"]["identityRoles"] == ["#hosts", "@host"]
    assert "Default Admin" not in entities["identities"]
    assert current.reserved["identities"] == frozenset({"Default Admin"})
    text = dump_model(current.exported())
    assert "secret" not in text and "createdAt" not in text and "intercept.v1:" not in text
    assert "jwt" not in text and "enroll: ott" in text


def test_built_in_config_types_are_exported_once_changed() -> None:
    current = _empty_current()
    assert current.exported() == {kind: {} for kind in KIND_ORDER}
    assert dump_model(current.exported()) == ""
    current.entities["config-types"]["host.v1"] = {"name": "host.v1", "schema": {}, "tags": {}}
    assert list(current.exported()["config-types"]) == ["host.v1"]


def test_dumping_is_stable_and_reads_back_as_the_same_model() -> None:
    model = parse_model(FILE)
    text = dump_model(model)
    assert parse_model(text) == model
    assert dump_model(parse_model(text)) == text
    assert text.index("config-types:") < text.index("configs:") < text.index("service-policies:")
    assert "  identityRoles: ['#staff', '@Default Admin', '@alice']\n" in text
    assert "maxIdleTimeMillis" not in text and "tags" not in text  # defaults are left out
    assert "  macAddresses: [aa-bb-cc-dd-ee-ff]\n" in text


def test_wire_bodies_carry_ids_and_the_enrollment_request() -> None:
    model = parse_model(FILE)
    ids = {"identities": {"alice": "I1", "Default Admin": "ADMIN"}, "services": {"web": "S1"},
           "posture-checks": {"mfa": "PC1"}, "configs": {"web-intercept": "C1"}}

    def resolve(kind: str, name: str) -> str:
        return ids[kind][name]

    policy = model["service-policies"]["dial-web"]
    body = wire_body("service-policies", policy, entity_fields("service-policies", policy), resolve, creating=True)
    assert body == {"name": "dial-web", "type": "Dial", "semantic": "AllOf",
                    "identityRoles": ["#staff", "@ADMIN", "@I1"], "serviceRoles": ["@S1"],
                    "postureCheckRoles": ["@PC1"], "tags": {}}
    alice = model["identities"]["alice"]
    created = wire_body("identities", alice, entity_fields("identities", alice), resolve, creating=True)
    assert created["enrollment"] == {"ott": True} and "externalId" not in created and "authPolicyId" not in created
    updated = wire_body("identities", alice, entity_fields("identities", alice), resolve, creating=False)
    assert "enrollment" not in updated and updated["externalId"] is None


@pytest.mark.parametrize(("text", "message"), [
    ("services: [{name: web", r"^the file is not valid YAML at line 1, column \d+: "),
    ("- a\n- b", r"^the file must be a mapping of kinds"),
    ("services: []\nservices: [{name: web}]", r"^the file is not valid YAML at line 2, column 1: the key 'services' "
                                              r"is repeated$"),
    ("routers: []", r"^unknown kind 'routers' \(known: config-types, configs, "),
    ("services: {name: web}", r"^services: must be a list of entries$"),
    ("services: [{roleAttributes: [a]}]", r"^services\[0\]: an entry has no name$"),
    ("services: [{name: web, colour: red}]", r"^services 'web': unknown field 'colour' \(known: configs, "),
    ("services: [{name: web}, {name: web}]", r"^services 'web': named twice$"),
    ("services: [{name: web, maxIdleTimeMillis: soon}]", r"^services 'web': maxIdleTimeMillis: must be a whole "),
    ("services: [{name: web, encryptionRequired: 1}]", r"^services 'web': encryptionRequired: must be true or "),
    ("service-policies: [{name: p}]", r"^service-policies 'p': type is required$"),
    ("service-policies: [{name: p, type: Connect}]", r"^service-policies 'p': type: must be one of Dial, Bind$"),
    ("service-policies: [{name: p, type: Dial, identityRoles: [alice]}]",
     r"^service-policies 'p': identityRoles: 'alice' is neither #attribute nor @name$"),
    ("service-policies: [{name: p, type: Dial, identityRoles: ['#all', '#x']}]", r"#all must be the only entry$"),
    ("posture-checks: [{name: c, typeId: MAC}]", r"^posture-checks 'c': macAddresses: is required$"),
    ("posture-checks: [{name: c, typeId: MAC, macAddresses: [nope]}]", r"^posture-checks 'c': macAddresses\[0\]: "),
    ("posture-checks: [{name: c, typeId: MFA, domains: [x]}]", r"^posture-checks 'c': unknown field 'domains'"),
    ("posture-checks: [{name: c, typeId: NOPE}]", r"^posture-checks 'c': typeId: must be one of OS, MAC, "),
    ("configs: [{name: c, configType: t, data: {when: 2024-01-01}}]",
     r"^configs 'c': data\.when: date is not a JSON value \(quote it\)$"),
    ("identities: [{name: i, enroll: updb}]", r"^identities 'i': enroll: must be ott"),
])
def test_bad_files_are_refused_with_one_line(text: str, message: str) -> None:
    with pytest.raises(ModelError, match=message) as caught:
        parse_model(text)
    assert "\n" not in str(caught.value)


def test_an_empty_plan_has_no_lines() -> None:
    empty = Plan(())
    assert empty.empty and empty.lines() == [] and empty.summary() == "0 to create, 0 to update, 0 to delete"
