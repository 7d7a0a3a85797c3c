"""The admin CLI's building blocks: ``AdminClient`` against a real controller, the kinds table against the
controller's own resources, the exit-status table, the configuration file, and the output and flag formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from controller.admin import admin_client as client_module
from controller.admin.admin_client import AdminClient, AdminError, ConnectionProblem, controller_root
from controller.admin.config import Config, ConfigProblem, NotLoggedIn, Profile
from controller.admin.exits import EXIT_HELP, ExitCode, exit_code_for
from controller.admin.flags import FlagContext, operating_systems, processes, tags
from controller.admin.kinds import KINDS, find_kind
from controller.admin.output import cell, details, error_line, table
from controller.resources.catalog import RESOURCES
from tests.admin.conftest import Server


def test_the_client_surface(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    with server.admin_client() as admin:
        ids = [admin.create("services", {"name": f"client-{index}", "encryptionRequired": True,
                                         "roleAttributes": ["client"]}) for index in range(5)]
        assert admin.get("services", ids[0])["name"] == "client-0"
        assert [row["id"] for row in admin.list("services", filter='name contains "client-"', sort="name desc",
                                                limit=2, offset=1)] == [ids[3], ids[2]]
        monkeypatch.setattr(client_module, "PAGE_SIZE", 2)  # pages of 2, 2 and 1
        assert sorted(row["id"] for row in admin.list_all("services", 'name contains "client-"')) == sorted(ids)
        admin.update("services", ids[0], {"roleAttributes": ["changed"]})
        assert admin.get("services", ids[0])["roleAttributes"] == ["changed"]
        assert admin.resolve("services", "client-1") == ids[1] == admin.resolve("services", ids[1])
        admin.delete("services", ids[4])
        with pytest.raises(AdminError) as missing:
            admin.resolve("services", "client-4")
        assert (missing.value.status, missing.value.code) == (404, "NOT_FOUND")
        with pytest.raises(AdminError) as gone:
            admin.get("services", ids[4])
        assert (gone.value.status, gone.value.code, gone.value.cause) == (
            404, "NOT_FOUND", {"code": "UNHANDLED", "message": f"service with id {ids[4]} not found"})
        with pytest.raises(AdminError) as invalid:
            admin.create("services", {"name": "client-0", "encryptionRequired": True})
        assert (invalid.value.status, invalid.value.code, invalid.value.cause["field"]) == (
            400, "COULD_NOT_VALIDATE", "name")
        # A name holding a slash stays one path segment when it is tried as an id.
        slashed = admin.create("services", {"name": "a/b", "encryptionRequired": True})
        assert admin.resolve("services", "a/b") == slashed
    with AdminClient(server.url + "/edge/management/v1/", token=None, verify=str(server.ca)) as anonymous:
        assert anonymous.root == server.url
        with pytest.raises(AdminError) as unauthorized:
            anonymous.list("services")
        assert (unauthorized.value.status, unauthorized.value.code) == (401, "UNAUTHORIZED")
    with AdminClient("https://127.0.0.1:1", token=None, verify=True) as nowhere, pytest.raises(ConnectionProblem):
        nowhere.request("GET", "version")
    with pytest.raises(ConnectionProblem, match="cannot load TLS files"):
        AdminClient(server.url, token=None, verify="/no/such/ca.pem")


def test_the_client_from_a_profile(server: Server) -> None:
    with server.admin_client() as admin:
        token = admin.token
    with AdminClient.from_profile(Profile("p", server.url, ca=str(server.ca), token=token)) as client:
        assert client.request("GET", "current-identity")["name"] == "Default Admin"


def test_every_listable_kind_of_the_controller_is_declared_once() -> None:
    served = {resource.kind for resource in RESOURCES if "list" in resource.operations}
    assert {kind.path for kind in KINDS} == served
    assert len({kind.singular for kind in KINDS}) == len(KINDS)
    by_kind = {resource.kind: resource for resource in RESOURCES}
    for kind in KINDS:
        operations = by_kind[kind.path].operations
        assert kind.updatable == ("patch" in operations), kind.path
        assert kind.deletable == ("delete" in operations), kind.path
        # Enrollments are created through their own operation (POST /enrollments), not the standard one.
        assert kind.creatable == ("create" in operations or kind.path == "enrollments"), kind.path
        resource = by_kind[kind.path]
        fields = {f.name for f in resource.all_fields()}
        if resource.variants is not None:
            fields.add(resource.variants.discriminator)
            assert kind.discriminator == resource.variants.discriminator
        for flag in kind.flags:
            assert flag.field.split(".")[0] in fields, (kind.path, flag.name)
    assert find_kind("Service-Policy") is find_kind("service-policies") is not None
    assert find_kind("gadgets") is None


@pytest.mark.parametrize(("error", "code"), [
    (AdminError(404, "NOT_FOUND", "gone"), ExitCode.NOT_FOUND),
    (AdminError(401, "UNAUTHORIZED", "no"), ExitCode.NOT_AUTHORIZED),
    (AdminError(401, "INVALID_AUTH", "no"), ExitCode.NOT_AUTHORIZED),
    (AdminError(403, "FORBIDDEN", "no"), ExitCode.NOT_AUTHORIZED),
    (AdminError(400, "COULD_NOT_VALIDATE", "bad"), ExitCode.REJECTED),
    (AdminError(409, "CAN_NOT_DELETE_REFERENCED_ENTITY", "held"), ExitCode.REJECTED),
    (AdminError(429, "RATE_LIMITED", "later"), ExitCode.API_ERROR),
    (AdminError(500, "UNHANDLED", "oops"), ExitCode.API_ERROR),
    (AdminError(502, "HTTP_502", "proxy"), ExitCode.API_ERROR),
    (ConnectionProblem("refused"), ExitCode.CONNECTION),
    (NotLoggedIn("log in"), ExitCode.NOT_AUTHORIZED),
    (ConfigProblem("broken file"), ExitCode.API_ERROR),
])
def test_exit_statuses_by_class_of_failure(error: Exception, code: ExitCode) -> None:
    assert exit_code_for(error) == code


def test_the_exit_status_table_and_its_help() -> None:
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0, "API_ERROR": 1, "USAGE": 2, "NOT_FOUND": 3, "NOT_AUTHORIZED": 4, "REJECTED": 5, "CONNECTION": 6}
    documented = [line.split()[0] for line in EXIT_HELP.splitlines()[2:]]
    assert documented == [str(int(code)) for code in ExitCode]


def test_the_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "cli.yaml"
    config = Config.load(path)
    assert (config.profiles, config.default) == ({}, None)
    with pytest.raises(NotLoggedIn):
        config.profile(None)
    config.put(Profile("one", "https://a:1", token="t"), make_default=False)
    config.put(Profile("two", "https://b:2"), make_default=False)
    config.save()
    again = Config.load(path)
    assert again.default == "one" and again.profile(None).token == "t" and again.profile("two").token is None
    with pytest.raises(ConfigProblem, match="invalid controller name"):
        again.put(Profile("../x", "https://c"), make_default=False)
    path.write_text("controllers: [1, 2]\n")
    with pytest.raises(ConfigProblem, match="not a tollgate CLI configuration"):
        Config.load(path)
    path.write_text("controllers:\n  x: {token: t}\n")
    with pytest.raises(ConfigProblem, match="has no url"):
        Config.load(path)
    path.write_text("{")
    with pytest.raises(ConfigProblem, match="not valid YAML"):
        Config.load(path)


def test_cells_tables_and_details() -> None:
    assert [cell(v) for v in (None, True, False, [], ["a", "b"], {}, {"k": 1}, "two  words\n", 3)] == [
        "-", "true", "false", "-", "a,b", "-", '{"k":1}', "two words", "3"]
    assert cell({"id": "x", "name": "Default", "entity": "auth-policies"}) == "Default"
    assert cell([{"type": "Linux"}]) == '[{"type":"Linux"}]'
    rows: list[dict[str, Any]] = [{"id": "1", "ref": {"name": "long name"}}, {"id": "22", "ref": None}]
    assert table(rows, (("id", "id"), ("ref name", "ref.name"))) == "ID  REF NAME\n1   long name\n22  -"
    assert details({"id": "1", "_links": {"self": {}}, "enrollment": {"ott": {"jwt": "j"}}, "tags": {}}) == (
        "id:                 1\n"
        "enrollment.ott.jwt: j\n"
        "tags:               -")


def test_error_lines() -> None:
    assert error_line("NOT_FOUND", "gone") == "error: NOT_FOUND: gone"
    assert error_line("COULD_NOT_VALIDATE", "bad", {"field": "name", "reason": "is required", "value": ""}) == \
        "error: COULD_NOT_VALIDATE: bad (name: is required)"
    assert error_line("NOT_FOUND", "gone", {"code": "UNHANDLED", "message": "service with id x\nnot found"}) == \
        "error: NOT_FOUND: gone (service with id x not found)"


def _context() -> FlagContext:
    return FlagContext(client=AdminClient("https://127.0.0.1:1", token=None, verify=True), name="n", option="--x")


def test_flag_formats() -> None:
    context = _context()
    assert operating_systems(("Windows:>=10.0.19041, 10.0.22000", "macos"), context) == [
        {"type": "Windows", "versions": [">=10.0.19041", "10.0.22000"]}, {"type": "macOS", "versions": []}]
    assert processes(("Windows:C:\\Program Files\\a.exe|signers=F1|hashes=H1,H2",), context) == [
        {"osType": "Windows", "path": "C:\\Program Files\\a.exe", "hashes": ["H1", "H2"], "signerFingerprints": ["F1"]}]
    assert tags(("a=1", "b=x=y", "c="), context) == {"a": "1", "b": "x=y", "c": ""}
    bad: list[tuple[Any, ...]] = [(processes, ("Linux",)), (processes, ("Linux:/x|colour=red",)),
                                  (operating_systems, ("Plan9",)), (tags, ("novalue",))]
    for convert, value in bad:
        with pytest.raises(click.BadParameter):
            convert(value, context)


def test_controller_root() -> None:
    assert controller_root(" https://h:1/edge/management/v1/ ") == "https://h:1"
    assert controller_root("https://h:1") == "https://h:1"
