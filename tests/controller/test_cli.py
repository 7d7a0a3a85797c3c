"""The command line, the first-start bootstrap, and the process lifecycle (a real ``tollgate serve`` stopped by a
signal)."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from controller.cli import parse_settings
from controller.data.domain import Domain
from controller.resources.catalog import build_registry
from controller.runtime.bootstrap import bootstrap
from controller.runtime.composition import Controller
from controller.runtime.settings import Settings
from controller.runtime.task_tree import serve_controller
from storage.store import Store
from tests.support import make_settings

TOLLGATE = Path(sys.executable).with_name("tollgate")


def test_serve_help() -> None:
    done = subprocess.run([str(TOLLGATE), "serve", "--help"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0
    for flag in ("--data-dir", "--host", "--port", "--no-tls", "--san", "--session-timeout", "--max-body-bytes",
                 "--log-level", "TOLLGATE_ADMIN_PASSWORD"):
        assert flag in done.stdout


def test_defaults() -> None:
    settings, level = parse_settings(["serve"], environ={})
    assert settings == Settings(data_dir=Path("data"), host="127.0.0.1", port=1280, tls=True, sans=(),
                                session_timeout=1800.0, max_body_bytes=1 << 20, admin_username="admin",
                                admin_password=None)
    assert level == "INFO"


def test_flags_and_environment_map_to_settings() -> None:
    settings, level = parse_settings(
        ["serve", "--data-dir", "/srv/tg", "--host", "::1", "--port", "0", "--no-tls", "--san", "ctl.example",
         "--san", "10.0.0.5", "--session-timeout", "90", "--max-body-bytes", "2048", "--log-level", "debug"],
        environ={"TOLLGATE_ADMIN_USERNAME": "operator", "TOLLGATE_ADMIN_PASSWORD": "op-password"})
    assert (settings.data_dir, settings.host, settings.port, settings.tls) == (Path("/srv/tg"), "::1", 0, False)
    assert settings.sans == ("ctl.example", "10.0.0.5")
    assert (settings.session_timeout, settings.effective_session_timeout) == (90.0, 90.0)
    assert settings.max_body_bytes == 2048
    assert (settings.admin_username, settings.admin_password) == ("operator", "op-password")
    assert level == "DEBUG"
    assert settings.evaluate_posture is True


def test_event_flags_map_to_settings() -> None:
    settings, _ = parse_settings(["serve", "--events-file", "/var/log/tg/events.jsonl", "--events-file-max-bytes",
                                  "1000", "--events-file-backups", "0", "--events-keep", "50",
                                  "--events-heartbeat", "2.5"], environ={})
    assert (settings.events, settings.events_file, settings.events_file_max_bytes, settings.events_file_backups,
            settings.events_keep, settings.events_heartbeat) == (True, Path("/var/log/tg/events.jsonl"), 1000, 0,
                                                                 50, 2.5)
    assert parse_settings(["serve", "--no-events"], environ={})[0].events is False


def test_posture_evaluation_switch() -> None:
    settings, _ = parse_settings(["serve", "--no-posture-evaluation"], environ={})
    assert settings.evaluate_posture is False


def test_empty_environment_values_mean_unset() -> None:
    settings, _ = parse_settings(["serve"], environ={"TOLLGATE_ADMIN_USERNAME": "", "TOLLGATE_ADMIN_PASSWORD": ""})
    assert (settings.admin_username, settings.admin_password) == ("admin", None)


@pytest.mark.parametrize(("argv", "environ", "message"), [
    (["serve", "--port", "70000"], {}, "--port"),
    (["serve", "--port", "http"], {}, "--port"),
    (["serve", "--max-body-bytes", "0"], {}, "--max-body-bytes"),
    (["serve", "--log-level", "chatty"], {}, "--log-level"),
    (["serve"], {"TOLLGATE_ADMIN_USERNAME": "abc"}, "TOLLGATE_ADMIN_USERNAME must be 4 to 100"),
    (["serve"], {"TOLLGATE_ADMIN_PASSWORD": "abcd"}, "TOLLGATE_ADMIN_PASSWORD must be 5 to 100"),
    ([], {}, "command"),
])
def test_bad_arguments_exit_2_with_a_message(argv: list[str], environ: dict[str, str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_settings(argv, environ=environ)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


async def _bootstrap_once(settings: Settings) -> tuple[str | None, bool]:
    controller = Controller.open(settings)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.writer.run)
            result = await bootstrap(controller)
            nursery.cancel_scope.cancel()
    finally:
        controller.close()
    return result.generated_password, result.created_admin


async def test_a_random_admin_password_is_made_once_and_kept_private(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, admin_password=None)

    password, created = await _bootstrap_once(settings)

    assert created and password is not None and len(password) >= 20
    path = tmp_path / "admin-credentials"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == f"username=admin\npassword={password}\n"

    assert await _bootstrap_once(settings) == (None, False)
    assert path.read_text() == f"username=admin\npassword={password}\n"


async def test_the_credentials_are_durable_before_the_admin_commits(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between the admin's commit and the file would leave an admin whose password nobody has: the file
    comes first, so a crash before the commit leaves only a stale file, which the next start replaces."""
    settings = make_settings(tmp_path, admin_password=None)
    path = tmp_path / "admin-credentials"
    seen: list[str] = []

    async def power_cut(self: Domain, fn: Any) -> Any:
        seen.append(path.read_text())
        raise RuntimeError("power cut before the commit")

    with monkeypatch.context() as patched:
        patched.setattr(Domain, "write", power_cut)
        with pytest.raises(ExceptionGroup) as crashed:
            await _bootstrap_once(settings)
    assert crashed.group_contains(RuntimeError, match="power cut")
    assert len(seen) == 1 and seen[0].startswith("username=admin\npassword=")
    controller = Controller.open(settings)
    try:
        with controller.store.read() as txn:
            assert txn.meta("defaultAdminId") is None
    finally:
        controller.close()

    password, created = await _bootstrap_once(settings)
    assert created and password is not None
    assert path.read_text() == f"username=admin\npassword={password}\n" != seen[0]


async def test_a_given_admin_password_writes_no_file(tmp_path: Path) -> None:
    assert await _bootstrap_once(make_settings(tmp_path, admin_password="given-password")) == (None, True)
    assert not (tmp_path / "admin-credentials").exists()


async def test_serve_prints_the_password_only_on_the_first_start(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(tmp_path, admin_password=None, port=0)

    async def at_once() -> None:
        """Shut down as soon as serving starts."""

    await serve_controller(settings, shutdown_trigger=at_once)
    first = capsys.readouterr().out
    await serve_controller(settings, shutdown_trigger=at_once)
    second = capsys.readouterr().out

    password = (tmp_path / "admin-credentials").read_text().split("password=")[1].strip()
    assert f"Created the default admin 'admin' with password: {password}" in first
    assert "password" not in second
    for out in (first, second):
        assert re.search(r"^Management API: http://127\.0\.0\.1:\d+/edge/management/v1$", out, re.MULTILINE)
        assert re.search(r"^Client API: +http://127\.0\.0\.1:\d+/edge/client/v1$", out, re.MULTILINE)


class _Lines:
    """Lines of a child's stdout, read with a deadline (a hung child fails the test instead of hanging it)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self._stdout = process.stdout
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)

    def wait_for(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if self._selector.select(remaining):
                line = self._stdout.readline()
                if not line:
                    break
                if match := re.search(pattern, line):
                    return match
        raise AssertionError(f"no line matching {pattern!r} on stdout")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_process_gracefully(tmp_path: Path, signum: signal.Signals) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOLLGATE_")}
    with open(tmp_path / "stderr.log", "w") as stderr, subprocess.Popen(
            [str(TOLLGATE), "serve", "--no-tls", "--port", "0", "--data-dir", str(tmp_path)],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, bufsize=1) as process:
        try:
            lines = _Lines(process)
            password = lines.wait_for(r"^Created the default admin 'admin' with password: (\S+)$").group(1)
            url = lines.wait_for(r"^Management API: (http://127\.0\.0\.1:\d+/edge/management/v1)$").group(1)
            with httpx.Client(base_url=url, timeout=60) as client:
                login = client.post("/authenticate", params={"method": "password"},
                                    json={"username": "admin", "password": password})
                assert login.status_code == 200
                created = client.post("/identities", headers={"zt-session": login.json()["data"]["token"]},
                                      json={"name": "acknowledged", "type": "User", "isAdmin": False})
                assert created.status_code == 201

            process.send_signal(signum)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
    log = (tmp_path / "stderr.log").read_text()
    records = [json.loads(line) for line in log.splitlines()]  # every line is one JSON object, hypercorn's too
    events = [r["event"] for r in records]
    assert sum(e.startswith("Running on http://127.0.0.1:") for e in events) == 1
    assert {"method": "POST", "path": "/edge/management/v1/identities", "status": 201}.items() <= next(
        r for r in records if r.get("path") == "/edge/management/v1/identities").items()
    assert [r.get("signal") for r in records if r["event"] == "shutdown requested"] == [signum.name]
    assert events[-1] == "controller stopped"
    assert password not in log

    store = Store(tmp_path / "db", build_registry().layouts(), durable=False)
    try:
        with store.read() as txn:
            assert "acknowledged" in {row["name"] for row in txn.scan("identities")}
    finally:
        store.close()


async def test_a_second_controller_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    """A running controller's writer keeps LMDB's write lock between commits, so a second controller would hang on
    its first write: the data directory's claim (taken when the first opened it) makes the second exit at once with
    a clear error instead, and the first keeps the directory."""
    data = tmp_path / "data"
    first = Controller.open(make_settings(data))
    try:
        with trio.fail_after(60):
            done = await trio.run_process([str(TOLLGATE), "serve", "--data-dir", str(data), "--port", "0", "--no-tls"],
                                          capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 1
        assert f"{data / 'db'} is in use by another controller" in (done.stdout + done.stderr).decode()
    finally:
        first.close()
    Controller.open(make_settings(data)).close()  # free again once the first has closed


def test_server_key_and_certificate_validity_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.certificates.pki import SERVER_KEY_TYPES

    defaults, _ = parse_settings(["serve"], environ={})
    assert (defaults.server_key_type, defaults.client_cert_days) == ("rsa", 365)
    for key_type in SERVER_KEY_TYPES:  # every type ensure_pki knows is offered, and no other
        settings, _ = parse_settings(["serve", "--server-key", key_type, "--cert-validity-days", "30"], environ={})
        assert (settings.server_key_type, settings.client_cert_days) == (key_type, 30)
    with pytest.raises(SystemExit) as exited:
        parse_settings(["serve", "--help"], environ={})
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    assert "--server-key [rsa|ec]" in usage and "--cert-validity-days" in usage


@pytest.mark.parametrize(("argv", "message"), [
    (["serve", "--server-key", "dsa"], "--server-key"),
    (["serve", "--cert-validity-days", "0"], "must be a positive number of days"),
    (["serve", "--cert-validity-days", "-3"], "must be a positive number of days"),
    (["serve", "--cert-validity-days", "a year"], "--cert-validity-days"),
])
def test_bad_server_key_or_certificate_validity(argv: list[str], message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_settings(argv, environ={})
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_metrics_address_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_settings(["serve"], environ={})[0].metrics_address is None  # off by default
    for address in ("127.0.0.1:9464", "0.0.0.0:0", "[::1]:9464", "metrics.internal:65535"):
        settings, _ = parse_settings(["serve", "--metrics-address", address], environ={})
        assert settings.metrics_address == address
    with pytest.raises(SystemExit):
        parse_settings(["serve", "--help"], environ={})
    assert "--metrics-address HOST:PORT" in capsys.readouterr().out


@pytest.mark.parametrize("address", ["9464", ":9464", "::1:9464", "[]:9464", "localhost:", "localhost:http",
                                     "localhost:70000", "localhost:-1"])
def test_bad_metrics_address(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_settings(["serve", "--metrics-address", address], environ={})
    assert exited.value.code == 2
    assert "'--metrics-address': must be HOST:PORT" in capsys.readouterr().err


async def test_serve_prints_the_metrics_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def at_once() -> None:
        """Shut down as soon as serving starts."""

    await serve_controller(make_settings(tmp_path, port=0, metrics_address="127.0.0.1:0"), shutdown_trigger=at_once)
    assert re.search(r"^Metrics: +http://127\.0\.0\.1:\d+/metrics$", capsys.readouterr().out, re.MULTILINE)
