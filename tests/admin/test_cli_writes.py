"""``tollgate create`` / ``tollgate update`` for every writable kind: each flag lands in the field it names, names
given for references and ``@`` roles become ids, ``--data``/``--body`` carry anything else, and PATCH leaves what is
not given alone."""

from __future__ import annotations

import base64
import datetime as dt
import json
import stat
from pathlib import Path
from typing import Any

from controller.admin.exits import ExitCode
from tests.admin.conftest import Cli
from tests.certificates import Authority


def _show(cli: Cli, kind: str, target: str) -> dict[str, Any]:
    shown = json.loads(cli.ok("show", kind, target, "--json").stdout)
    assert isinstance(shown, dict)
    return shown


def _created(cli: Cli, *args: str) -> str:
    return cli.ok("create", *args).stdout.strip()


def test_identities_with_type_admin_roles_and_an_ott_jwt_file(logged_in: Cli, tmp_path: Path) -> None:
    jwt_file = tmp_path / "laptop.jwt"
    identity_id = _created(logged_in, "identity", "laptop", "--type", "Device", "--role-attributes", "staff,laptops",
                           "--enroll", "ott", "--jwt-out", str(jwt_file), "--tag", "owner=ana", "--tag", "site=b")
    shown = _show(logged_in, "identities", identity_id)
    assert (shown["name"], shown["typeId"], shown["isAdmin"], shown["roleAttributes"], shown["tags"]) == (
        "laptop", "Device", False, ["staff", "laptops"], {"owner": "ana", "site": "b"})
    jwt = jwt_file.read_text().strip()
    assert jwt == shown["enrollment"]["ott"]["jwt"]
    assert stat.S_IMODE(jwt_file.stat().st_mode) == 0o600
    payload = jwt.split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"] == identity_id
    admin_id = _created(logged_in, "identity", "operator", "--admin", "--enroll", "updb")
    operator = _show(logged_in, "identity", admin_id)
    assert operator["isAdmin"] is True and "updb" in operator["enrollment"]
    [updb] = json.loads(logged_in.ok("list", "enrollments", f'identityId = "{admin_id}"', "--json").stdout)
    assert (updb["method"], updb["username"]) == ("updb", "operator")
    assert logged_in("create", "identity", "no-jwt", "--jwt-out", str(tmp_path / "x")).exit_code == ExitCode.USAGE
    # Update: rename, new roles, admin off; the rest stays.
    logged_in.ok("update", "identity", "operator", "--name", "operator-2", "--no-admin", "--role-attributes", "ops")
    changed = _show(logged_in, "identity", admin_id)
    assert (changed["name"], changed["isAdmin"], changed["roleAttributes"], changed["typeId"]) == (
        "operator-2", False, ["ops"], operator["typeId"])
    logged_in.ok("update", "identity", "operator-2", "--role-attributes", "")
    assert _show(logged_in, "identity", admin_id)["roleAttributes"] == []
    nothing = logged_in("update", "identity", "operator-2")
    assert nothing.exit_code == ExitCode.USAGE and "nothing to change" in nothing.stderr


def test_create_prints_the_id_or_the_raw_answer(logged_in: Cli) -> None:
    answer = json.loads(logged_in.ok("create", "service", "raw-answer", "--json").stdout)
    assert answer["_links"]["self"] == {"href": f"./services/{answer['id']}"}
    printed = logged_in.ok("create", "service", "plain-answer").stdout
    assert printed == f"{_show(logged_in, 'service', 'plain-answer')['id']}\n"


def test_services_configs_and_config_types(logged_in: Cli, tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"port": {"type": "integer"}}, "required": ["port"]}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    type_id = _created(logged_in, "config-type", "port.v1", "--schema", f"@{tmp_path / 'schema.json'}")
    assert _show(logged_in, "config-types", "port.v1")["schema"] == schema
    config_id = _created(logged_in, "config", "web-port", "--config-type", "port.v1", "--data", '{"port": 443}')
    config = _show(logged_in, "configs", config_id)
    assert (config["configTypeId"], config["data"]) == (type_id, {"port": 443})
    rejected = logged_in("create", "config", "bad-port", "--config-type", "port.v1", "--data", '{"port": "x"}')
    assert rejected.exit_code == ExitCode.REJECTED
    assert logged_in("create", "config", "x", "--config-type", "port.v1", "--data", "{nope").exit_code == \
        ExitCode.USAGE
    service_id = _created(logged_in, "service", "web-app", "--configs", "web-port", "--role-attributes", "web",
                          "--no-encryption-required", "--terminator-strategy", "random")
    service = _show(logged_in, "services", service_id)
    assert (service["configs"], service["roleAttributes"], service["encryptionRequired"],
            service["terminatorStrategy"]) == ([config_id], ["web"], False, "random")
    logged_in.ok("update", "config", "web-port", "--data", '{"port": 8443}')
    assert _show(logged_in, "config", config_id)["data"] == {"port": 8443}
    logged_in.ok("update", "service", "web-app", "--configs", "", "--max-idle-time-millis", "1000")
    service = _show(logged_in, "service", service_id)
    assert (service["configs"], service["maxIdleTimeMillis"], service["roleAttributes"]) == ([], 1000, ["web"])
    # Configs' --data is the config's data; --body is the generic body for every kind.
    body_id = _created(logged_in, "config", "by-body", "--body",
                       json.dumps({"configTypeId": type_id, "data": {"port": 1}}))
    assert _show(logged_in, "config", body_id)["data"] == {"port": 1}
    generic = _created(logged_in, "service", "generic", "--data", '{"roleAttributes": ["from-data"]}')
    assert _show(logged_in, "service", generic)["roleAttributes"] == ["from-data"]
    assert logged_in("create", "service", "listy", "--data", "[1]").exit_code == ExitCode.USAGE


def test_policies_resolve_at_names_to_ids(logged_in: Cli) -> None:
    alice = _created(logged_in, "identity", "alice-p")
    service = _created(logged_in, "service", "svc-p")
    check = _created(logged_in, "posture-check", "mfa-p", "--type", "MFA")
    router = _created(logged_in, "edge-router", "er-p", "--role-attributes", "edge")
    policy_id = _created(logged_in, "service-policy", "dial-p", "--type", "Dial", "--semantic", "AllOf",
                         "--identity-roles", "@alice-p,#staff", "--service-roles", "@svc-p",
                         "--posture-check-roles", "@mfa-p")
    policy = _show(logged_in, "service-policies", policy_id)
    assert (policy["type"], policy["semantic"], sorted(policy["identityRoles"]), policy["serviceRoles"],
            policy["postureCheckRoles"]) == ("Dial", "AllOf", ["#staff", f"@{alice}"], [f"@{service}"], [f"@{check}"])
    # As OpenZiti's own CLI: a policy without --semantic needs all of its roles (the narrower reading).
    assert _show(logged_in, "service-policy", _created(logged_in, "service-policy", "bind-p", "--type", "Bind"))[
        "semantic"] == "AllOf"
    logged_in.ok("update", "service-policy", "dial-p", "--type", "Bind", "--identity-roles", "#all")
    policy = _show(logged_in, "service-policies", policy_id)
    assert (policy["type"], policy["identityRoles"], policy["serviceRoles"]) == ("Bind", ["#all"], [f"@{service}"])
    erp = _created(logged_in, "edge-router-policy", "erp-p", "--edge-router-roles", "@er-p", "--identity-roles",
                   "#all")
    assert _show(logged_in, "edge-router-policies", erp)["edgeRouterRoles"] == [f"@{router}"]
    serp = _created(logged_in, "service-edge-router-policy", "serp-p", "--edge-router-roles", "#edge",
                    "--service-roles", "@svc-p", "--semantic", "AllOf")
    shown = _show(logged_in, "service-edge-router-policies", serp)
    assert (shown["edgeRouterRoles"], shown["serviceRoles"], shown["semantic"]) == (["#edge"], [f"@{service}"],
                                                                                    "AllOf")
    unknown = logged_in("create", "service-policy", "x-p", "--type", "Dial", "--identity-roles", "@nobody-p")
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert unknown.stderr == "error: NOT_FOUND: no identities with the id or name 'nobody-p'\n"
    assert logged_in("create", "service-policy", "y-p", "--type", "Dial", "--identity-roles", "plain").exit_code == \
        ExitCode.USAGE


def test_posture_checks_of_every_type(logged_in: Cli) -> None:
    h1, h2, h3, f1 = "ab" * 32, "cd" * 32, "ef" * 32, "0f" * 20
    os_id = _created(logged_in, "posture-check", "os-c", "--type", "OS", "--os", "Windows:10.0.19041,10.0.22000",
                     "--os", "linux", "--role-attributes", "desktop")
    os_check = _show(logged_in, "posture-checks", os_id)
    assert (os_check["typeId"], os_check["roleAttributes"]) == ("OS", ["desktop"])
    assert sorted(os_check["operatingSystems"], key=lambda entry: entry["type"]) == [
        {"type": "Linux", "versions": []}, {"type": "Windows", "versions": ["10.0.19041", "10.0.22000"]}]
    mac = _show(logged_in, "posture-check", _created(logged_in, "posture-check", "mac-c", "--type", "MAC",
                                                     "--mac-addresses", "aa-bb-cc-dd-ee-ff,11-22-33-44-55-66"))
    assert mac["macAddresses"] == ["aa-bb-cc-dd-ee-ff", "11-22-33-44-55-66"]
    domain = _show(logged_in, "posture-check", _created(logged_in, "posture-check", "dom-c", "--type", "DOMAIN",
                                                        "--domains", "corp.example"))
    assert domain["domains"] == ["corp.example"]
    process_id = _created(logged_in, "posture-check", "proc-c", "--type", "PROCESS", "--os-type", "Windows",
                          "--path", "C:\\agent.exe", "--hashes", f"{h1},{h2}", "--signer-fingerprint", f1)
    process = _show(logged_in, "posture-check", process_id)["process"]
    assert (process["osType"], process["path"], process["hashes"], process["signerFingerprint"]) == (
        "Windows", "C:\\agent.exe", [h1, h2], f1)
    multi = _show(logged_in, "posture-check", _created(
        logged_in, "posture-check", "multi-c", "--type", "PROCESS_MULTI", "--semantic", "AllOf",
        "--process", f"Windows:C:\\a.exe|hashes={h1},{h3}|signers={f1}", "--process", "Linux:/usr/bin/b"))
    assert multi["semantic"] == "AllOf"
    assert [(p["osType"], p["path"], p["hashes"], p["signerFingerprints"]) for p in multi["processes"]] == [
        ("Windows", "C:\\a.exe", [h1, h3], [f1]), ("Linux", "/usr/bin/b", [], [])]
    mfa = _show(logged_in, "posture-check", _created(logged_in, "posture-check", "mfa-c", "--type", "MFA",
                                                     "--timeout-seconds", "300", "--prompt-on-wake",
                                                     "--no-prompt-on-unlock", "--ignore-legacy-endpoints"))
    assert (mfa["timeoutSeconds"], mfa["promptOnWake"], mfa["promptOnUnlock"], mfa["ignoreLegacyEndpoints"]) == (
        300, True, False, True)
    # Update: the type comes from the check, and a nested field keeps its siblings.
    logged_in.ok("update", "posture-check", "proc-c", "--path", "C:\\agent2.exe")
    process = _show(logged_in, "posture-check", process_id)["process"]
    assert (process["osType"], process["path"], process["hashes"]) == ("Windows", "C:\\agent2.exe", [h1, h2])
    logged_in.ok("update", "posture-check", "mfa-c", "--timeout-seconds", "60")
    assert _show(logged_in, "posture-check", "mfa-c")["timeoutSeconds"] == 60
    # A flag of another type is a usage error, on create and on update.
    wrong = logged_in("create", "posture-check", "wrong-c", "--type", "MAC", "--domains", "x")
    assert (wrong.exit_code, wrong.stderr.splitlines()[-1]) == (ExitCode.USAGE,
                                                                "Error: --domains applies to DOMAIN checks only")
    assert logged_in("update", "posture-check", "mac-c", "--timeout-seconds", "5").exit_code == ExitCode.USAGE
    assert logged_in("create", "posture-check", "bad-os", "--type", "OS", "--os", "Plan9").exit_code == \
        ExitCode.USAGE
    assert logged_in("create", "posture-check", "bad-p", "--type", "PROCESS_MULTI", "--process", "nopath").exit_code \
        == ExitCode.USAGE


def test_authenticators_enrollments_cas_signers_routers_terminators_auth_policies(logged_in: Cli,
                                                                                  tmp_path: Path) -> None:
    identity_id = _created(logged_in, "identity", "bob-w")
    authenticator = _created(logged_in, "authenticator", "--identity", "bob-w", "--method", "updb", "--username",
                             "bob-w", "--password", "bob-password")
    assert _show(logged_in, "authenticators", authenticator)["identityId"] == identity_id
    logged_in.ok("update", "authenticator", authenticator, "--username", "bobby")
    assert _show(logged_in, "authenticators", authenticator)["username"] == "bobby"
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).isoformat(timespec="milliseconds")
    enrollment = _created(logged_in, "enrollment", "--identity", "bob-w", "--method", "ott", "--expires-at",
                          expires.replace("+00:00", "Z"))
    assert _show(logged_in, "enrollments", enrollment)["method"] == "ott"
    authority = Authority.create("CLI test CA")
    (tmp_path / "ca.pem").write_text(authority.pem)
    ca_id = _created(logged_in, "ca", "third-party", "--cert-pem", f"@{tmp_path / 'ca.pem'}", "--auto-ca-enrollment",
                     "--identity-roles", "iot")
    ca = _show(logged_in, "cas", ca_id)
    assert (ca["isAuthEnabled"], ca["isAutoCaEnrollmentEnabled"], ca["isOttCaEnrollmentEnabled"],
            ca["identityRoles"]) == (True, True, False, ["iot"])
    signer = _created(logged_in, "external-jwt-signer", "idp", "--issuer", "https://idp.example",
                      "--audience", "tollgate", "--cert-pem", Authority.create("IdP").pem)
    assert _show(logged_in, "external-jwt-signers", signer)["issuer"] == "https://idp.example"
    logged_in.ok("update", "external-jwt-signer", "idp", "--no-enabled")
    assert _show(logged_in, "external-jwt-signers", signer)["enabled"] is False
    router = _created(logged_in, "router", "transit-w", "--cost", "7")
    assert _show(logged_in, "routers", router)["cost"] == 7
    _created(logged_in, "service", "hosted-w")
    terminator = _created(logged_in, "terminator", "--service", "hosted-w", "--router", "transit-w", "--binding",
                          "transport", "--address", "tcp:10.0.0.1:80", "--precedence", "required")
    shown = _show(logged_in, "terminators", terminator)
    assert (shown["routerId"], shown["address"], shown["precedence"]) == (router, "tcp:10.0.0.1:80", "required")
    policy = _created(logged_in, "auth-policy", "strict", "--primary", json.dumps(
        {"cert": {"allowed": True, "allowExpiredCerts": False}, "extJwt": {"allowed": False, "allowedSigners": []},
         "updb": {"allowed": False, "minPasswordLength": 5, "requireSpecialChar": False, "requireNumberChar": False,
                  "requireMixedCase": False, "maxAttempts": 0, "lockoutDurationMinutes": 0}}),
        "--secondary", '{"requireTotp": true}')
    assert _show(logged_in, "auth-policies", policy)["secondary"]["requireTotp"] is True
    logged_in.ok("update", "identity", "bob-w", "--auth-policy", "strict")
    assert _show(logged_in, "identity", identity_id)["authPolicyId"] == policy


def test_create_and_update_accept_singular_or_plural_kind_names(logged_in: Cli) -> None:
    first = _created(logged_in, "services", "plural-s")
    assert _show(logged_in, "service", "plural-s")["id"] == first
    logged_in.ok("update", "services", "plural-s", "--role-attributes", "x")
    assert logged_in("create", "sessions", "x").exit_code == ExitCode.USAGE  # not creatable
    assert logged_in("update", "enrollments", "x").exit_code == ExitCode.USAGE  # not updatable
