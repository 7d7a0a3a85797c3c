"""``make fuzz``: schemathesis over every operation of Tollgate's own OpenAPI documents, against a real controller.

Starts ``tollgate serve`` on a scratch data directory (plain HTTP on a free loopback port, a known admin password),
prepares it (``prepare.py``), then runs schemathesis once per API against the document that API serves
(``/specs/edge-client/spec``, then ``/specs/edge-management/spec``): every phase (examples, coverage, fuzzing,
stateful), positive and negative data, with the settings of ``schemathesis.toml``, a fixed seed and a time budget
shared between the APIs (fuzzing and stateful rounds repeat until it is spent). Then it stops the controller. The
exit status is 0 only when both runs found nothing, the controller logged no error and it stopped cleanly.

The client API runs first: its operations only touch the admin's own session and identity, while the management
run creates, changes and deletes everything, the prepared service included.

Usage: ``python -m tests.fuzz.run [--seed N] [--budget SECONDS] [--max-examples N] [--workdir DIR]``. The work
directory (a new temporary one unless given) keeps the controller's log and schemathesis's reports per API: the
JSON summary and JUnit XML, and, when the run fails, the NDJSON events (every request and answer, some hundred MB
otherwise thrown away). The data directory inside it is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.fuzz.harness import ENV_VAR, Harness
from tests.fuzz.prepare import with_decoys, with_service

__all__ = ["DEFAULT_SEED", "ApiRun", "Controller", "main"]

REPO = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("schemathesis.toml")
DEFAULT_SEED = 1280
DEFAULT_BUDGET = 210
APIS = (("client", "/edge/client/v1/specs/edge-client/spec"),
        ("management", "/edge/management/v1/specs/edge-management/spec"))
# Each API's share of the time budget, about as its share of the operations (50 and 177).
SHARES = {"client": 0.25, "management": 0.75}
_STARTUP_SECONDS = 60.0
_STOP_SECONDS = 30.0
# A run that takes this long has hung: schemathesis bounds every request, so the bound is generous.
_RUN_LIMIT_SECONDS = 900.0
_URL_LINE = re.compile(r"^Management API: (?P<origin>https?://[^/\s]+)/edge/management/v1$", re.MULTILINE)


class Controller:
    """A ``tollgate serve`` child process on a scratch data directory, plain HTTP on a free loopback port.

    Args:
        workdir: where its data directory, stdout and log go.
        password: the default admin's password.
    """

    def __init__(self, workdir: Path, password: str) -> None:
        self.data_dir = workdir / "data"
        self.stdout_path = workdir / "controller.out"
        self.log_path = workdir / "controller.log"
        env = {**os.environ, "TOLLGATE_ADMIN_USERNAME": "admin", "TOLLGATE_ADMIN_PASSWORD": password}
        command = [sys.executable, "-c", "import sys; from controller.cli import main; sys.exit(main())", "serve",
                   "--data-dir", str(self.data_dir), "--host", "127.0.0.1", "--port", "0", "--no-tls"]
        with self.stdout_path.open("wb") as out, self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=log)
        self.origin = self._wait_until_serving()

    def _wait_until_serving(self) -> str:
        """The origin the controller printed, once ``/version`` answers there.

        Raises:
            RuntimeError: it exited, or did not serve within ``_STARTUP_SECONDS``.
        """
        deadline = time.monotonic() + _STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the controller exited with {self.process.returncode}; see {self.log_path}")
            found = _URL_LINE.search(self.stdout_path.read_text())
            if found is not None:
                try:
                    if httpx.get(f"{found['origin']}/edge/management/v1/version", timeout=5).status_code == 200:
                        return found["origin"]
                except httpx.TransportError:
                    pass
            time.sleep(0.2)
        raise RuntimeError(f"the controller did not serve within {_STARTUP_SECONDS:.0f} s; see {self.log_path}")

    def stop(self) -> int:
        """Stop it with SIGTERM (killed if it takes longer than ``_STOP_SECONDS``); its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def logged_errors(self) -> list[dict[str, Any]]:
        """The error and critical records of its log (one JSON object per line)."""
        found = []
        # Split on newlines only: a logged path may hold U+2028 and other characters splitlines() also breaks at.
        for line in self.log_path.read_text(errors="replace").split("\n"):
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                found.append({"level": "unparsed", "event": line})
                continue
            if record.get("level") in ("error", "critical"):
                found.append(record)
        return found


@dataclass(frozen=True)
class ApiRun:
    """The figures of one schemathesis run."""

    api: str
    exit_code: int
    seconds: float
    report: dict[str, Any]

    @property
    def operations(self) -> str:
        ops = self.report.get("operations", {})
        return f"{ops.get('tested', '?')}/{ops.get('selected', '?')}"

    @property
    def generated(self) -> int:
        return int(self.report.get("test_cases", {}).get("generated", 0))

    @property
    def failures(self) -> int:
        return sum(int(group.get("count", 0)) for group in self.report.get("failures", []))

    @property
    def errors(self) -> int:
        return sum(int(group.get("count", 0)) for group in self.report.get("errors", []))


def fuzz(api: str, spec_path: str, harness: Harness, seed: int, seconds: int, max_examples: int | None,
         reports: Path) -> ApiRun:
    """Run schemathesis against ``api``'s document for about ``seconds``; its output goes to ours.

    The examples and coverage phases run once; fuzzing and stateful testing run again and again until the time is
    spent (schemathesis's ``--max-time``).
    """
    reports.mkdir(parents=True, exist_ok=True)
    schemathesis = Path(sys.executable).with_name("schemathesis")
    command = [str(schemathesis), "--config-file", str(CONFIG), "run", f"{harness.origin}{spec_path}",
               "--seed", str(seed), "--max-time", str(seconds),
               "--report", "json,ndjson,junit", "--report-dir", str(reports),
               "--report-json-path", str(reports / f"{api}.json"),
               "--report-ndjson-path", str(reports / f"{api}.ndjson"),
               "--report-junit-path", str(reports / f"{api}.xml")]
    if max_examples is not None:
        command += ["--max-examples", str(max_examples)]
    env = {**os.environ, ENV_VAR: harness.to_env(), "PYTHONPATH": str(REPO)}
    print(f"\n=== fuzzing the {api} API: {' '.join(command)}", flush=True)
    started = time.monotonic()
    exit_code = subprocess.run(command, cwd=REPO, env=env, timeout=_RUN_LIMIT_SECONDS, check=False).returncode
    elapsed = time.monotonic() - started
    report_path = reports / f"{api}.json"
    report: dict[str, Any] = json.loads(report_path.read_text()) if report_path.exists() else {}
    return ApiRun(api, exit_code, elapsed, report)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"schemathesis seed ({DEFAULT_SEED})")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                        help=f"seconds of fuzzing for both APIs together ({DEFAULT_BUDGET})")
    parser.add_argument("--max-examples", type=int, default=None,
                        help="examples per operation in each fuzzing round (schemathesis.toml's when absent)")
    parser.add_argument("--workdir", type=Path, default=None, help="where logs and reports go (a new temp dir)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the whole fuzz session; the process exit status (0: nothing found)."""
    args = _parser().parse_args(argv)
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="tollgate-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    password = secrets.token_urlsafe(18)
    controller = Controller(workdir, password)
    runs: list[ApiRun] = []
    try:
        harness = Harness(origin=controller.origin, username="admin", password=password)
        with_service(harness)
        for api, spec_path in APIS:
            if api == "management":
                harness = with_decoys(harness)
            seconds = max(1, round(args.budget * SHARES[api]))
            runs.append(fuzz(api, spec_path, harness, args.seed, seconds, args.max_examples, workdir / "reports"))
    finally:
        stop_status = controller.stop()
        shutil.rmtree(controller.data_dir, ignore_errors=True)
    logged = controller.logged_errors()
    passed = _summary(runs, logged, stop_status, time.monotonic() - started, workdir, args.seed)
    if passed:
        for events in (workdir / "reports").glob("*.ndjson"):
            events.unlink()
    return 0 if passed else 1


def _summary(runs: list[ApiRun], logged: list[dict[str, Any]], stop_status: int, seconds: float, workdir: Path,
             seed: int) -> bool:
    """Print the figures; whether they make a passing run."""
    print(f"\n=== make fuzz (seed {seed}): {seconds:.0f} s in all; logs and reports in {workdir}")
    print(f"{'API':<12}{'operations':>12}{'generated':>11}{'failures':>10}{'errors':>8}{'seconds':>9}  exit")
    for run in runs:
        print(f"{run.api:<12}{run.operations:>12}{run.generated:>11}{run.failures:>10}{run.errors:>8}"
              f"{run.seconds:>9.0f}  {run.exit_code}")
    for record in logged[:20]:
        print(f"controller logged: {json.dumps(record)[:2000]}")
    if logged:
        print(f"the controller logged {len(logged)} error(s); see {workdir / 'controller.log'}")
    if stop_status != 0:
        print(f"the controller exited with status {stop_status} on SIGTERM")
    passed = len(runs) == len(APIS) and all(run.exit_code == 0 for run in runs) and not logged and stop_status == 0
    print("=== fuzzing passed" if passed else "=== fuzzing FAILED")
    return passed


if __name__ == "__main__":
    sys.exit(main())
