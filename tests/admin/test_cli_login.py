"""``tollgate login`` / ``logout`` / ``controllers`` / ``use``: trust on first use, sessions kept in a private file,
several named controllers, certificate login, and the one-line failures with their exit statuses."""

from __future__ import annotations

import base64
import json
import ssl
import stat
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from controller.admin.admin_client import AdminClient, AdminError
from controller.admin.exits import ExitCode
from controller.admin.login_verbs import fingerprint
from controller.cli import cli, main
from tests.admin.conftest import Cli, rows_of
from tests.certificates import Authority, csr_pem, new_key
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME


def _config(cli: Cli) -> dict[str, object]:
    loaded = yaml.safe_load(cli.config.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _profile(cli: Cli, name: str) -> dict[str, str]:
    controllers = _config(cli)["controllers"]
    assert isinstance(controllers, dict)
    return dict(controllers[name])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_first_login_shows_the_ca_fingerprint_and_keeps_the_accepted_bundle(tollgate: Cli) -> None:
    ca_pem = tollgate.server.ca.read_bytes()
    expected = fingerprint(x509.load_pem_x509_certificate(ca_pem))
    result = tollgate("login", tollgate.server.url, "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, input="y\n")
    assert result.exit_code == 0, result.stderr
    assert f"SHA-256 {expected}" in result.stderr
    assert "Trust it for this controller?" in result.stderr
    assert result.stdout == f"logged in to {tollgate.server.url} as admin; saved as controller 'default' (default)\n"
    profile = _profile(tollgate, "default")
    assert profile["url"] == tollgate.server.url and profile["username"] == ADMIN_USERNAME
    assert Path(profile["ca"]).read_bytes().strip() == ca_pem.strip()
    assert len(profile["token"]) == 36
    # The file holds a session token: only its owner may read it, and its directory was made private.
    assert _mode(tollgate.config) == 0o600
    assert _mode(tollgate.config.parent) == 0o700
    # The next login to the same controller trusts the kept bundle without asking.
    again = tollgate.ok("login", tollgate.server.url, "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD)
    assert "SHA-256" not in again.stderr
    assert _profile(tollgate, "default")["token"] != profile["token"]
    assert _mode(tollgate.config) == 0o600


def test_a_declined_fingerprint_saves_nothing_and_exits_6(tollgate: Cli) -> None:
    for answer in ("n\n", ""):  # declined, or no answer at all
        result = tollgate("login", tollgate.server.url, "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, input=answer)
        assert result.exit_code == ExitCode.CONNECTION
        assert result.stderr.endswith("error: the controller's CA bundle was not accepted; compare its fingerprint "
                                      "or use --ca FILE\n")
        assert not tollgate.config.exists()
        assert not list(tollgate.config.parent.glob("ca/*"))


def test_yes_accepts_without_asking(tollgate: Cli) -> None:
    result = tollgate.ok("login", tollgate.server.url, "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, "--yes")
    assert "SHA-256" in result.stderr and "Trust it" not in result.stderr
    assert tollgate.ok("list", "identity-types").stdout.startswith("ID")


def test_credentials_are_prompted_when_not_given(tollgate: Cli) -> None:
    result = tollgate("login", tollgate.server.url, "--ca", str(tollgate.server.ca),
                      input=f"{ADMIN_USERNAME}\n{ADMIN_PASSWORD}\n")
    assert result.exit_code == 0, result.stderr
    assert "Username" in result.stderr and "Password" in result.stderr
    assert ADMIN_PASSWORD not in result.stderr + result.stdout  # the password prompt does not echo


def test_bad_credentials_exit_4_with_the_api_error(tollgate: Cli) -> None:
    result = tollgate("login", tollgate.server.url, "-u", ADMIN_USERNAME, "-p", "wrong-password", "--ca",
                      str(tollgate.server.ca))
    assert result.exit_code == ExitCode.NOT_AUTHORIZED
    assert result.stderr == "error: INVALID_AUTH: The authentication request failed\n"
    assert not tollgate.config.exists()


def test_an_untrusted_certificate_or_an_unreachable_controller_exit_6(tollgate: Cli, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(Authority.create("Someone else").pem)
    result = tollgate("login", tollgate.server.url, "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, "--ca", str(other_ca))
    assert result.exit_code == ExitCode.CONNECTION
    assert result.stderr.startswith(f"error: cannot reach {tollgate.server.url}:")
    assert "CERTIFICATE_VERIFY_FAILED" in result.stderr and result.stderr.count("\n") == 1
    # Nothing listens on port 1 of the loopback address.
    refused = tollgate("login", "https://127.0.0.1:1", "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, "--yes")
    assert refused.exit_code == ExitCode.CONNECTION
    assert refused.stderr.startswith("error: cannot reach https://127.0.0.1:1:")


def test_verbs_before_login_exit_4(tollgate: Cli) -> None:
    result = tollgate("list", "identities")
    assert result.exit_code == ExitCode.NOT_AUTHORIZED
    assert result.stderr == "error: not logged in to any controller: run `tollgate login URL` first\n"


def test_logout_ends_the_session_and_forgets_its_token(logged_in: Cli) -> None:
    token = _profile(logged_in, "default")["token"]
    assert logged_in.ok("logout").stdout == f"logged out of controller 'default' ({logged_in.server.url})\n"
    assert "token" not in _profile(logged_in, "default")
    with AdminClient(logged_in.server.url, token=token, verify=str(logged_in.server.ca)) as stale, \
            pytest.raises(AdminError) as ended:
        stale.request("GET", "current-api-session")
    assert ended.value.status == 401  # the session was deleted on the controller
    result = logged_in("list", "identities")
    assert result.exit_code == ExitCode.NOT_AUTHORIZED
    assert result.stderr == (f"error: not logged in to controller 'default': run `tollgate login "
                             f"{logged_in.server.url}`\n")
    # Logging out twice is harmless.
    logged_in.ok("logout")


def test_an_ended_session_says_log_in_again(logged_in: Cli) -> None:
    token = _profile(logged_in, "default")["token"]
    with AdminClient(logged_in.server.url, token=token, verify=str(logged_in.server.ca)) as client:
        session_id = client.request("GET", "current-api-session")["id"]
    with logged_in.server.admin_client() as admin:
        admin.delete("api-sessions", session_id)
    result = logged_in("list", "services")
    assert result.exit_code == ExitCode.NOT_AUTHORIZED
    assert result.stderr == ("error: UNAUTHORIZED: the session has ended or expired: log in again "
                             "(tollgate login URL)\n")
    # Logout of an ended session still forgets it.
    logged_in.ok("logout")


def test_a_non_admin_is_told_it_is_not_authorized_not_to_log_in_again(logged_in: Cli) -> None:
    logged_in.ok("create", "identity", "plain-user")
    logged_in.ok("create", "authenticator", "--identity", "plain-user", "--method", "updb", "--username",
                 "plain-user", "--password", "plain-password")
    logged_in.ok("login", logged_in.server.url, "--name", "plain", "-u", "plain-user", "-p", "plain-password", "--ca",
                 str(logged_in.server.ca))
    result = logged_in("--controller", "plain", "list", "identities")
    assert result.exit_code == ExitCode.NOT_AUTHORIZED
    assert result.stderr.startswith("error: UNAUTHORIZED: The request could not be completed.")


def test_named_controllers_a_default_and_switching(logged_in: Cli) -> None:
    server = logged_in.server
    logged_in.ok("login", server.url, "--name", "second", "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD, "--ca",
                 str(server.ca))
    assert _config(logged_in)["default"] == "default"  # the first one stays the default
    listed = rows_of(logged_in.ok("controllers").stdout)
    assert listed[0] == ["NAME", "URL", "USER", "SESSION"]
    assert listed[1] == ["*", "default", server.url, "admin", "true"]
    assert listed[2] == ["second", server.url, "admin", "true"]
    # --controller before or after the verb, or $TOLLGATE_CONTROLLER, picks the profile.
    logged_in.ok("--controller", "second", "logout")
    assert "token" not in _profile(logged_in, "second")
    assert _profile(logged_in, "default")["token"]
    assert logged_in("list", "identities", "--controller", "second").exit_code == ExitCode.NOT_AUTHORIZED
    assert logged_in("list", "identities", env={"TOLLGATE_CONTROLLER": "second"}).exit_code == 4
    assert logged_in("list", "identities").exit_code == 0
    assert logged_in.ok("use", "second").stdout == "controller 'second' is now the default\n"
    assert logged_in("list", "identities").exit_code == ExitCode.NOT_AUTHORIZED
    assert logged_in("use", "nowhere").exit_code == ExitCode.USAGE
    assert logged_in("login", server.url, "--name", "../escape", "--yes").exit_code == ExitCode.USAGE
    as_json = json.loads(logged_in.ok("controllers", "--json").stdout)
    assert [(c["name"], c["default"], c["session"]) for c in as_json] == [("default", "", True),
                                                                          ("second", "*", False)]
    logged_in.ok("login", server.url, "--name", "third", "--default", "-u", ADMIN_USERNAME, "-p", ADMIN_PASSWORD,
                 "--yes")
    assert _config(logged_in)["default"] == "third"


def test_certificate_login(logged_in: Cli, tmp_path: Path) -> None:
    jwt_file = tmp_path / "ops.jwt"
    logged_in.ok("create", "identity", "ops-cert", "--admin", "--enroll", "ott", "--jwt-out", str(jwt_file))
    payload = jwt_file.read_text().strip().split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    key = new_key()
    enrolled = httpx.post(f"{logged_in.server.url}/edge/client/v1/enroll", params={"method": "ott",
                          "token": claims["jti"]}, content=csr_pem(key), headers={"Content-Type": "text/plain"},
                          verify=ssl.create_default_context(cafile=logged_in.server.ca))
    assert enrolled.status_code == 200, enrolled.text
    (tmp_path / "ops.pem").write_text(enrolled.text)
    (tmp_path / "ops.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    result = logged_in.ok("login", logged_in.server.url, "--name", "ops", "--cert", str(tmp_path / "ops.pem"),
                          "--key", str(tmp_path / "ops.key"), "--ca", str(logged_in.server.ca))
    assert result.stdout.startswith(f"logged in to {logged_in.server.url} with the certificate ")
    profile = _profile(logged_in, "ops")
    assert profile["cert"] == str((tmp_path / "ops.pem").resolve()) and "username" not in profile
    shown = json.loads(logged_in.ok("--controller", "ops", "show", "identity", "ops-cert", "--json").stdout)
    assert shown["hasApiSession"] is True
    assert logged_in("login", logged_in.server.url, "--cert", str(tmp_path / "ops.pem")).exit_code == ExitCode.USAGE


def test_help_lists_serve_and_every_verb_and_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for verb in ("serve", "login", "logout", "controllers", "use", "list", "show", "create", "update", "delete",
                 "policy-advice", "posture", "db", "apply", "export"):
        assert f"\n  {verb} " in text, verb
    assert "6  cannot connect" in text
    # serve keeps its own parser and help.
    try:
        main(["serve", "--help"])
    except SystemExit as stopped:
        assert stopped.code == 0
    assert "--data-dir" in capsys.readouterr().out
    assert main(["list"]) == ExitCode.USAGE
    # The click group's serve (reached with a group option before it) is the same parser.
    passed_on = CliRunner().invoke(cli, ["--controller", "x", "serve", "--help"])
    assert passed_on.exit_code == 0 and "--data-dir" in passed_on.stdout
    assert main(["no-such-verb"]) == ExitCode.USAGE
