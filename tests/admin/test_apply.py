"""``tollgate apply`` and ``tollgate export`` against real controllers (in process, TLS on a real socket, port 0).

Each test starts its own controller(s) in its nursery; the CLI (click's runner, blocking httpx) runs in a worker
thread so that the controller keeps serving on the Trio thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from click.testing import CliRunner, Result

import controller.admin.apply_command as apply_module
from controller.admin.admin_client import AdminClient
from controller.admin.config import Config, Profile
from controller.admin.verbs import cli
from controller.authentication import password_hashing as passwords
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, make_settings, seed_pki
from tests.support import serving as serving_controller

T = TypeVar("T")

MODEL = """
config-types:
  - name: proxy.v1
    schema: {type: object, properties: {port: {type: integer}}, required: [port]}
  - name: ziti-tunneler-client.v1
    schema: {type: object}
configs:
  - name: web-intercept
    configType: intercept.v1
    data: {protocols: [tcp], addresses: [web.internal], portRanges: [{low: 443, high: 443}]}
  - name: web-proxy
    configType: proxy.v1
    data: {port: 8080}
posture-checks:
  - {name: os, typeId: OS, operatingSystems: [{type: Windows, versions: [">=10.0.19041"]}, {type: Linux}]}
  - {name: mac, typeId: MAC, macAddresses: ["AA:BB:CC:DD:EE:FF"]}
  - {name: domain, typeId: DOMAIN, domains: [corp.example], roleAttributes: [corp]}
  - {name: mfa, typeId: MFA, timeoutSeconds: 300, promptOnWake: true}
  - {name: proc, typeId: PROCESS, process: {osType: Linux, path: /usr/bin/agent}}
  - name: procs
    typeId: PROCESS_MULTI
    semantic: AnyOf
    processes: [{osType: macOS, path: /Applications/Agent.app, signerFingerprints: ["%s"]}]
services:
  - {name: web, roleAttributes: [web], configs: [web-intercept, web-proxy], tags: {owner: ops}}
  - {name: db, encryptionRequired: false, maxIdleTimeMillis: 60000}
identities:
  - {name: alice, type: User, roleAttributes: [staff], enroll: ott}
  - {name: web-host, type: Device, serviceHostingCosts: {web: 10}, appData: {rack: b2}}
service-policies:
  - name: dial-web
    type: Dial
    identityRoles: ["#staff", "@Default Admin"]
    serviceRoles: ["@web"]
    postureCheckRoles: ["@mfa", "#corp"]
  - {name: bind-web, type: Bind, semantic: AnyOf, identityRoles: ["@web-host"], serviceRoles: ["#web"]}
edge-router-policies:
  - {name: staff-routers, identityRoles: ["#staff"], edgeRouterRoles: ["@er1"]}
service-edge-router-policies:
  - {name: everywhere, serviceRoles: ["#all"], edgeRouterRoles: ["#all"]}
""" % ("ab" * 20)


@pytest.fixture(autouse=True)
def cheap_password_hashing() -> Iterator[None]:
    previous = passwords.use_params(passwords.ScryptParams(n=2**8, r=8, p=1))
    yield
    passwords.use_params(previous)


async def in_thread(function: Callable[[], T]) -> T:
    """Run blocking client code off the Trio thread, which must keep serving its requests."""
    return await trio.to_thread.run_sync(function)


@dataclass
class Target:
    """A running controller and a CLI configuration logged in to it as the default admin."""

    url: str
    ca: Path
    config: Path
    controller: Controller

    async def run(self, *args: str, input: str | None = None) -> Result:
        """``tollgate ARGS`` with this target's configuration."""
        invoke = partial(CliRunner().invoke, cli, list(args), input=input,
                         env={"TOLLGATE_CONFIG": str(self.config)}, catch_exceptions=False)
        return await in_thread(invoke)

    async def ok(self, *args: str, input: str | None = None) -> Result:
        result = await self.run(*args, input=input)
        assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
        return result

    async def apply(self, text: str, *flags: str) -> Result:
        return await self.run("apply", "-f", "-", *flags, input=text)

    async def export(self) -> str:
        return (await self.ok("export")).stdout

    async def call(self, work: Callable[[AdminClient], T]) -> T:
        """``work(client)`` with a client logged in as the default admin, in a worker thread."""
        def run() -> T:
            with AdminClient(self.url, token=None, verify=str(self.ca)) as client:
                client.authenticate_password(ADMIN_USERNAME, ADMIN_PASSWORD)
                return work(client)
        return await in_thread(run)

    async def by_name(self, kind: str) -> dict[str, dict[str, Any]]:
        rows = await self.call(lambda client: client.list_all(kind))
        return {row["name"]: row for row in rows}


@asynccontextmanager
async def serving(data_dir: Path) -> AsyncIterator[Target]:
    """A controller on ``data_dir`` (HTTPS, 127.0.0.1, a free port) and a CLI configuration logged in to it."""
    seed_pki(data_dir)
    async with serving_controller(make_settings(data_dir, tls=True, host="127.0.0.1", port=0)) as (controller, urls):
        url = urls[0]
        ca = data_dir / "pki" / "ca.pem"
        config = Config(data_dir.parent / f"{data_dir.name}-cli.yaml")

        def login() -> str:
            with AdminClient(url, token=None, verify=str(ca)) as client:
                return client.authenticate_password(ADMIN_USERNAME, ADMIN_PASSWORD)

        config.put(Profile(name="test", url=url, ca=str(ca), token=await in_thread(login)), make_default=True)
        config.save()
        yield Target(url, ca, config.path, controller)


@pytest.fixture
async def target(tmp_path: Path) -> AsyncIterator[Target]:
    async with serving(tmp_path / "controller") as running:
        await running.call(lambda client: client.create("edge-routers", {"name": "er1"}))
        yield running


async def test_apply_creates_every_kind_with_references_resolved(target: Target) -> None:
    result = await target.ok("apply", "-f", "-", input=MODEL)
    assert result.stdout.splitlines()[0] == "+ create config-types proxy.v1"
    assert "~ update config-types ziti-tunneler-client.v1: schema: " in result.stdout
    assert result.stdout.splitlines()[-1] == "applied 18 changes: 17 created, 1 updated, 0 deleted"

    config_types = await target.by_name("config-types")
    configs = await target.by_name("configs")
    assert configs["web-intercept"]["configTypeId"] == config_types["intercept.v1"]["id"]
    assert configs["web-proxy"]["configTypeId"] == config_types["proxy.v1"]["id"]
    assert config_types["ziti-tunneler-client.v1"]["schema"] == {"type": "object"}
    services = await target.by_name("services")
    assert sorted(services["web"]["configs"]) == sorted([configs["web-intercept"]["id"], configs["web-proxy"]["id"]])
    assert services["web"]["tags"] == {"owner": "ops"}
    assert (services["db"]["encryptionRequired"], services["db"]["maxIdleTimeMillis"]) == (False, 60000)
    checks = await target.by_name("posture-checks")
    assert {name: row["typeId"] for name, row in checks.items()} == {
        "os": "OS", "mac": "MAC", "domain": "DOMAIN", "mfa": "MFA", "proc": "PROCESS", "procs": "PROCESS_MULTI"}
    assert checks["mac"]["macAddresses"] == ["aa-bb-cc-dd-ee-ff"]
    assert (checks["mfa"]["timeoutSeconds"], checks["mfa"]["promptOnWake"]) == (300, True)
    identities = await target.by_name("identities")
    admin_id, alice_id, host_id = (identities[n]["id"] for n in ("Default Admin", "alice", "web-host"))
    assert identities["alice"]["enrollment"]["ott"]["jwt"]
    assert identities["web-host"]["serviceHostingCosts"] == {services["web"]["id"]: 10}
    policies = await target.by_name("service-policies")
    assert sorted(policies["dial-web"]["identityRoles"]) == sorted(["#staff", f"@{admin_id}"])
    assert policies["dial-web"]["serviceRoles"] == [f"@{services['web']['id']}"]
    assert sorted(policies["dial-web"]["postureCheckRoles"]) == sorted(["#corp", f"@{checks['mfa']['id']}"])
    assert policies["bind-web"]["identityRoles"] == [f"@{host_id}"]
    dialers = await target.call(lambda c: c.request("GET", f"service-policies/{policies['dial-web']['id']}/identities"))
    assert sorted(row["id"] for row in dialers) == sorted([admin_id, alice_id])
    routers = await target.by_name("edge-routers")
    erp = (await target.by_name("edge-router-policies"))["staff-routers"]
    assert erp["edgeRouterRoles"] == [f"@{routers['er1']['id']}"]

    again = await target.ok("apply", "-f", "-", input=MODEL)
    assert again.stdout == "no changes\n"
    dry = await target.ok("apply", "-f", "-", "--dry-run", "--prune", input=MODEL)
    assert dry.stdout == "no changes\n"


async def test_changing_one_field_updates_only_that_field(target: Target) -> None:
    await target.ok("apply", "-f", "-", input=MODEL)
    before = {kind: await target.by_name(kind) for kind in ("services", "identities", "service-policies")}
    changed = MODEL.replace("{name: db, encryptionRequired: false, maxIdleTimeMillis: 60000}",
                            "{name: db, encryptionRequired: false, maxIdleTimeMillis: 5000}")
    dry = await target.ok("apply", "-f", "-", "--dry-run", input=changed)
    assert dry.stdout.splitlines() == ["~ update services db: maxIdleTimeMillis: 60000 -> 5000",
                                       "dry run: 0 to create, 1 to update, 0 to delete; nothing changed"]
    done = await target.ok("apply", "-f", "-", input=changed)
    assert done.stdout.splitlines() == ["~ update services db: maxIdleTimeMillis: 60000 -> 5000",
                                        "applied 1 change: 0 created, 1 updated, 0 deleted"]
    after = {kind: await target.by_name(kind) for kind in before}
    touched = [(kind, name) for kind in before for name in before[kind]
               if before[kind][name]["updatedAt"] != after[kind][name]["updatedAt"]]
    assert touched == [("services", "db")]
    assert after["services"]["db"]["maxIdleTimeMillis"] == 5000


async def test_prune_deletes_only_what_the_file_stops_naming_and_only_when_asked(target: Target) -> None:
    await target.ok("apply", "-f", "-", input=MODEL)
    smaller = (MODEL.replace('  - {name: bind-web, type: Bind, semantic: AnyOf, identityRoles: ["@web-host"], '
                             'serviceRoles: ["#web"]}\n', "")
               .replace("  - {name: proc, typeId: PROCESS, process: {osType: Linux, path: /usr/bin/agent}}\n", ""))
    assert (await target.ok("apply", "-f", "-", input=smaller)).stdout == "no changes\n"
    assert "bind-web" in await target.by_name("service-policies")
    pruned = await target.ok("apply", "-f", "-", "--prune", input=smaller)
    assert pruned.stdout.splitlines() == ["- delete service-policies bind-web", "- delete posture-checks proc",
                                          "applied 2 changes: 0 created, 0 updated, 2 deleted"]
    assert set(await target.by_name("service-policies")) == {"dial-web"}
    assert "proc" not in await target.by_name("posture-checks")
    assert "Default Admin" in await target.by_name("identities")
    assert {"intercept.v1", "host.v1", "host.v2", "ziti-tunneler-server.v1"} <= set(
        await target.by_name("config-types"))
    emptied = await target.ok("apply", "-f", "-", "--prune", input="")
    assert emptied.stdout.splitlines()[-1] == "applied 15 changes: 0 created, 0 updated, 15 deleted"
    assert await target.export() == "config-types:\n- name: ziti-tunneler-client.v1\n  schema:\n    type: object\n"
    assert set(await target.by_name("identities")) == {"Default Admin"}
    assert len(await target.by_name("config-types")) == 5  # the seeded ones stay, even the changed one


async def test_dry_run_changes_nothing(target: Target) -> None:
    await target.ok("apply", "-f", "-", input=MODEL)
    before = await target.export()
    other = (MODEL.replace("maxIdleTimeMillis: 60000", "maxIdleTimeMillis: 1")
             .replace("{name: alice, type: User, roleAttributes: [staff], enroll: ott}", "{name: carol, type: User}")
             .replace('identityRoles: ["#staff", "@Default Admin"]', 'identityRoles: ["#staff"]'))
    dry = await target.ok("apply", "-f", "-", "--dry-run", "--prune", input=other)
    assert dry.stdout.splitlines() == [
        "~ update services db: maxIdleTimeMillis: 60000 -> 1",
        "+ create identities carol",
        '~ update service-policies dial-web: identityRoles: ["#staff", "@Default Admin"] -> ["#staff"]',
        "- delete identities alice",
        "dry run: 1 to create, 2 to update, 1 to delete; nothing changed",
    ]
    assert await target.export() == before


BAD_FILES = [
    ("services: [{name: web", "error: the file is not valid YAML at line 2, column 22: expected "),
    ("routers: [{name: r}]", "error: unknown kind 'routers' (known: config-types, configs, posture-checks, "),
    ("services: [{name: web, colour: red}]", "error: services 'web': unknown field 'colour' (known: "),
    ("service-policies: [{name: p, type: Dial, serviceRoles: ['@nope']}]",
     "error: service-policies 'p': serviceRoles: no service named 'nope'"),
    ("identities: [{name: Default Admin, isAdmin: true}]", "error: identities 'Default Admin': belongs to the "),
    ("services: [{name: db, encryptionRequired: true, maxIdleTimeMillis: 60000}]",
     "error: services 'db': encryptionRequired cannot change once created (false -> true); delete it first"),
]


async def test_bad_files_are_refused_before_any_change(target: Target) -> None:
    await target.ok("apply", "-f", "-", input=MODEL)
    before = await target.export()
    for text, message in BAD_FILES:
        # A good entity first: nothing of the file is applied when any of it is wrong.
        result = await target.apply("config-types: [{name: first.v1}]\n" + text, "--prune")
        assert result.exit_code == 2, (text, result.stdout, result.stderr)
        assert result.stdout == ""
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert await target.export() == before


async def test_a_refused_change_stops_the_apply_and_says_what_was_done(target: Target) -> None:
    text = ("config-types: [{name: first.v1}]\n"
            "configs: [{name: broken, configType: intercept.v1, data: {protocols: [tcp]}},"
            " {name: later, configType: first.v1, data: {}}]\n")
    result = await target.apply(text)
    assert result.exit_code == 5, (result.stdout, result.stderr)
    assert result.stdout.splitlines() == ["+ create config-types first.v1"]
    assert result.stderr.splitlines()[:2] == [
        "stopped after 1 of 3 changes (1 created, 0 updated, 0 deleted); failed:", "  + create configs broken"]
    assert "COULD_NOT_VALIDATE" in result.stderr.splitlines()[2]
    assert "first.v1" in await target.by_name("config-types")
    assert await target.by_name("configs") == {}


async def test_export_applied_to_a_new_controller_exports_the_same_text(target: Target, tmp_path: Path) -> None:
    await target.ok("apply", "-f", "-", input=MODEL)
    exported = await target.export()
    assert exported.startswith("config-types:\n- name: proxy.v1\n")
    assert "name: ziti-tunneler-client.v1" in exported  # changed, so exported
    assert "intercept.v1:" not in exported and "name: intercept.v1" not in exported  # seeded as is: left out
    assert "name: Default Admin" not in exported and "'@Default Admin'" in exported
    assert "enroll: ott" in exported and "jwt" not in exported and "token" not in exported
    assert "createdAt" not in exported and "id:" not in exported.replace("typeId:", "")
    saved = tmp_path / "model.yaml"
    await target.ok("export", "-o", str(saved))
    assert saved.read_text(encoding="utf-8") == exported

    async with serving(tmp_path / "second") as second:
        await second.call(lambda client: client.create("edge-routers", {"name": "er1"}))
        assert await second.export() == ""
        await second.ok("apply", "-f", str(saved))
        assert await second.export() == exported
        assert (await second.ok("apply", "-f", str(saved), "--prune")).stdout == "no changes\n"


async def test_large_plans_show_a_progress_bar_on_a_terminal(target: Target,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    many = "identities:\n" + "".join(f"  - {{name: user{i:02}, type: User}}\n" for i in range(25))
    monkeypatch.setattr(apply_module, "_on_terminal", lambda: True)
    result = await target.ok("apply", "-f", "-", input=many)
    assert "applying" in result.stdout and "+ create" not in result.stdout
    assert result.stdout.splitlines()[-1] == "applied 25 changes: 25 created, 0 updated, 0 deleted"
    monkeypatch.setattr(apply_module, "_on_terminal", lambda: False)
    pruned = await target.ok("apply", "-f", "-", "--prune", input="")
    assert "applying" not in pruned.stdout and pruned.stdout.count("- delete identities user") == 25
