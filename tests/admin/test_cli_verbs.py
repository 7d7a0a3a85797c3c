"""``tollgate list`` / ``show`` / ``delete`` against a real controller: tables, JSON and YAML, paging parameters, name
resolution, and the one-line errors with their exit statuses."""

from __future__ import annotations

import json

import yaml

from controller.admin.exits import ExitCode
from tests.admin.conftest import Cli, rows_of


def _create_identities(cli: Cli, prefix: str, count: int) -> list[str]:
    return [cli.ok("create", "identity", f"{prefix}-{index}", "--role-attributes", f"{prefix},n{index}").stdout.strip()
            for index in range(count)]


def test_list_prints_an_aligned_table_with_the_kinds_columns(logged_in: Cli) -> None:
    ids = _create_identities(logged_in, "table", 2)
    result = logged_in.ok("list", "identities", 'name contains "table-"', "--sort", "name")
    lines = result.stdout.splitlines()
    assert [line.split() for line in lines] == [
        ["ID", "NAME", "TYPE", "ADMIN", "ROLES", "AUTH", "POLICY"],
        [ids[0], "table-0", "Default", "false", "table,n0", "Default"],
        [ids[1], "table-1", "Default", "false", "table,n1", "Default"],
    ]
    # Aligned: every column starts at the same offset on every line.
    for header in ("NAME", "TYPE", "ADMIN", "ROLES", "AUTH POLICY"):
        start = lines[0].index(header)
        assert all(line[start - 2:start] == "  " and line[start] != " " for line in lines[1:])
    assert result.stderr == ""


def test_list_passes_limit_offset_and_sort_and_says_when_there_is_more(logged_in: Cli) -> None:
    ids = _create_identities(logged_in, "paged", 5)
    result = logged_in.ok("list", "identity", 'name contains "paged-"', "--sort", "name desc", "--limit", "2",
                          "--offset", "1")
    assert [row[0] for row in rows_of(result.stdout)[1:]] == [ids[3], ids[2]]
    assert result.stderr == "showing 2-3 of 5 identities; more with --offset 3 or --all\n"
    every = logged_in.ok("list", "identities", 'name contains "paged-"', "--all", "--sort", "name desc", "--json")
    assert [row["id"] for row in json.loads(every.stdout)] == ids[::-1]
    nothing = logged_in.ok("list", "identities", 'name = "nobody at all"')
    assert nothing.stdout == "" and nothing.stderr == "no identities\n"
    assert logged_in("list", "identities", "--all", "--limit", "3").exit_code == ExitCode.USAGE


def test_json_and_yaml_print_the_raw_data(logged_in: Cli) -> None:
    [identity_id] = _create_identities(logged_in, "raw", 1)
    listed = json.loads(logged_in.ok("list", "identities", 'name = "raw-0"', "--json").stdout)
    assert [row["id"] for row in listed] == [identity_id]
    assert listed[0]["_links"]["self"]["href"] == f"./identities/{identity_id}"
    shown = json.loads(logged_in.ok("show", "identities", "raw-0", "--json").stdout)
    assert shown["id"] == identity_id and shown["roleAttributes"] == ["raw", "n0"]
    as_yaml = yaml.safe_load(logged_in.ok("show", "identity", identity_id, "--yaml").stdout)
    assert as_yaml == shown | {"updatedAt": as_yaml["updatedAt"], "hasApiSession": as_yaml["hasApiSession"]}
    assert yaml.safe_load(logged_in.ok("list", "identities", 'name = "raw-0"', "--yaml").stdout)[0]["id"] == \
        identity_id


def test_show_prints_key_value_details_by_id_or_name(logged_in: Cli) -> None:
    service_id = logged_in.ok("create", "service", "detailed", "--role-attributes", "web,public").stdout.strip()
    by_name = logged_in.ok("show", "services", "detailed").stdout
    assert by_name == logged_in.ok("show", "service", service_id).stdout
    details = dict(line.partition(": ")[::2] for line in by_name.splitlines())
    assert {key: details[key].strip() for key in ("id", "name", "roleAttributes", "encryptionRequired", "configs")} == {
        "id": service_id, "name": "detailed", "roleAttributes": "web,public", "encryptionRequired": "true",
        "configs": "-"}
    assert "_links" not in by_name


def test_every_kind_lists(logged_in: Cli) -> None:
    for kind in ("identities", "services", "service-policies", "edge-routers", "edge-router-policies",
                 "service-edge-router-policies", "routers", "configs", "config-types", "posture-checks",
                 "authenticators", "enrollments", "cas", "external-jwt-signers", "terminators", "auth-policies",
                 "api-sessions", "sessions", "identity-types", "posture-check-types"):
        result = logged_in("list", kind, "--json")
        assert result.exit_code == 0, (kind, result.stderr)
        assert isinstance(json.loads(result.stdout), list)
    api_sessions = rows_of(logged_in.ok("list", "api-sessions").stdout)
    assert api_sessions[0] == ["ID", "IDENTITY", "IP", "LAST ACTIVITY", "MFA"]
    assert "Default Admin" in [row[1] for row in api_sessions[1:]]
    types = rows_of(logged_in.ok("list", "posture-check-types", "--sort", "id").stdout)
    assert [row[0] for row in types[1:]] == ["DOMAIN", "MAC", "MFA", "OS", "PROCESS", "PROCESS_MULTI"]


def test_delete_takes_several_ids_or_names(logged_in: Cli) -> None:
    ids = _create_identities(logged_in, "doomed", 3)
    result = logged_in.ok("delete", "identities", "doomed-0", ids[1])
    assert result.stdout == f"deleted identity {ids[0]}\ndeleted identity {ids[1]}\n"
    assert [row[1] for row in rows_of(logged_in.ok("list", "identities", 'name contains "doomed"').stdout)[1:]] == \
        ["doomed-2"]
    # Stops at the first that cannot be deleted: the later ones stay.
    failed = logged_in("delete", "identities", "nobody-here", "doomed-2")
    assert failed.exit_code == ExitCode.NOT_FOUND
    assert logged_in.ok("show", "identity", "doomed-2").stdout
    assert logged_in("delete", "identity-types", "User").exit_code == ExitCode.USAGE


def test_errors_are_one_line_with_the_exit_status_of_their_class(logged_in: Cli) -> None:
    missing = logged_in("show", "services", "no-such-service")
    assert (missing.exit_code, missing.stderr) == (
        ExitCode.NOT_FOUND, "error: NOT_FOUND: no services with the id or name 'no-such-service'\n")
    nameless = logged_in("show", "api-sessions", "not-an-id")  # a kind without names: the id alone counts
    assert nameless.exit_code == ExitCode.NOT_FOUND
    invalid = logged_in("create", "service-policy", "no-type")
    assert invalid.exit_code == ExitCode.REJECTED
    assert invalid.stderr.startswith("error: COULD_NOT_VALIDATE: The supplied request contains an invalid document")
    assert invalid.stderr.endswith("(type: type in body is required)\n") and invalid.stderr.count("\n") == 1
    logged_in.ok("create", "service", "taken")
    duplicate = logged_in("create", "service", "taken")
    assert duplicate.exit_code == ExitCode.REJECTED and duplicate.stderr.startswith("error: COULD_NOT_VALIDATE:")
    bad_filter = logged_in("list", "identities", "name ==== 1")
    assert bad_filter.exit_code == ExitCode.REJECTED
    assert bad_filter.stderr.startswith("error: INVALID_FILTER: The filter query supplied is invalid (")
    logged_in.ok("create", "config-type", "held-type")
    logged_in.ok("create", "config", "holder", "--config-type", "held-type", "--data", "{}")
    conflict = logged_in("delete", "config-types", "held-type")
    assert conflict.exit_code == ExitCode.REJECTED
    assert conflict.stderr.startswith("error: CAN_NOT_DELETE_REFERENCED_ENTITY:")
    unknown_kind = logged_in("list", "gadgets")
    assert unknown_kind.exit_code == ExitCode.USAGE and "unknown kind 'gadgets'" in unknown_kind.stderr
    bad_value = logged_in("list", "identities", "--limit", "many")
    assert bad_value.exit_code == ExitCode.USAGE
