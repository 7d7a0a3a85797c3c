"""A server under load, in its own process pinned to one core: the real controller, or a bare ASGI hello app.

``python -m bench.servers controller --data-dir D --info F [--model NAME] [--no-posture-checks]
[--no-posture-evaluation] [--no-events] [--actors N]`` loads the model into ``D`` if it is empty (a separate,
non-durable phase, as a restore would), then serves the real controller (plain HTTP on a free port, durable LMDB,
fsync on) with its real start-up. ``hello`` serves a bare ASGI app on the same hypercorn Trio worker and
configuration, and ``quart`` a bare quart-trio app answering a static list (the framework's own cost, for reference).
Once serving, the info file ``F`` gets the URL and the loaded model; on SIGTERM the process stops and writes the
garbage-collection pauses it saw to ``F.gc.json``.

:class:`Server` starts such a process (``taskset`` onto one core) from a scenario and stops it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from controller.runtime.composition import Controller

__all__ = ["GcPauses", "Server", "Spec", "running", "running_all", "seed", "wait_idle"]

ADMIN_PASSWORD = "bench-admin-password"  # a throwaway controller's admin


class GcPauses:
    """Records every garbage collection's duration through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._started))

    def summary(self) -> dict[str, Any]:
        durations = [d for _, d in self.pauses]
        return {"collections": len(durations), "max_ms": max(durations, default=0.0) * 1e3,
                "over_50ms": sum(1 for d in durations if d > 0.05),
                "by_generation": {g: sum(1 for gen, _ in self.pauses if gen == g) for g in (0, 1, 2)}}


PAUSES = GcPauses()


def _hello_app() -> Any:
    body = b'{"data":{"hello":"world"},"meta":{}}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _quart_app() -> Any:
    """A bare quart-trio app answering a static ten-item list: the framework's own ceiling, for reference."""
    from quart_trio import QuartTrio

    app = QuartTrio("bench")
    items = [{"id": f"item-{i}", "name": f"name-{i}", "tags": {}} for i in range(10)]

    @app.route("/<path:_path>")
    async def static_list(_path: str) -> Any:
        return {"data": items, "meta": {"pagination": {"limit": 10, "offset": 0, "totalCount": 10}}}

    return app


def _settings(args: argparse.Namespace, *, durable: bool) -> Any:
    from controller.runtime.settings import Settings

    return Settings(data_dir=args.data_dir, host="127.0.0.1", port=0, tls=False, durable=durable,
                    admin_username="admin", admin_password=ADMIN_PASSWORD,
                    evaluate_posture=not args.no_posture_evaluation, events=not args.no_events)


async def _seed(args: argparse.Namespace) -> dict[str, Any]:
    from bench.model import HTTP, LARGE, MEDIUM, load_model
    from controller.runtime.composition import Controller
    from controller.runtime.task_tree import start_services

    size = {"http": HTTP, "medium": MEDIUM, "large": LARGE}[args.model]
    if args.no_posture_checks:
        from dataclasses import replace

        size = replace(size, posture=False)
    if args.scale != 1.0:
        from bench.model import scaled

        size = scaled(size, args.scale)
    controller = Controller.open(_settings(args, durable=False))
    try:
        async with trio.open_nursery() as services:
            await start_services(controller, services)
            loaded = await load_model(controller, size)
            if args.actors:
                from bench.identity_seeding import seed_mfa_identities

                # Deadlines two hours ahead (spread over 100 s): the actors stay parked for the whole benchmark.
                actor_ids = await seed_mfa_identities(controller, args.actors, deadlines_per_second=1_000,
                                                start_in=7_200, timeout_seconds=86_400, role="parked")
            services.cancel_scope.cancel()
    finally:
        controller.close()
    model = asdict(loaded)
    if args.actors:
        model["actor_ids"] = actor_ids
    return model


def _serve_controller(args: argparse.Namespace) -> None:
    from controller.runtime.logs import configure_logging
    from controller.runtime.task_tree import serve_controller

    configure_logging("INFO")  # as `tollgate serve` runs: one JSON line per request (to the server's log file)

    model_file = args.data_dir / "bench-model.json"
    if args.model != "none" and not model_file.exists():
        model_file.write_text(json.dumps(trio.run(_seed, args)))
    if args.seed_only:
        return
    model = json.loads(model_file.read_text()) if model_file.exists() else {}

    actor_ids = model.pop("actor_ids", [])

    async def announce(controller: Controller, url: str) -> None:
        if actor_ids and args.wake:
            from bench.identity_seeding import wake_all

            await wake_all(controller, actor_ids)
            from controller.runtime import memory

            memory.settle()  # as after a restore: the parked actors live on, freeze them (controller/runtime/memory.py)
        PAUSES.pauses.clear()  # count only the pauses of serving, not those of loading the model or the actors
        _write_info(args.info, {"url": url, "pid": os.getpid(), "model": model,
                                "actors": controller.engine.actors.statistics()})

    def ready(controller: Controller, urls: list[str]) -> None:
        # The info file (which the benchmark waits for) is written once every actor is awake and parked.
        trio.lowlevel.spawn_system_task(announce, controller, urls[0])

    trio.run(lambda: serve_controller(_settings(args, durable=True), on_ready=ready))


def _serve_bare(args: argparse.Namespace) -> None:
    from hypercorn.trio import serve

    from controller.runtime.task_tree import hypercorn_config

    async def main() -> None:
        config = hypercorn_config(_settings(args, durable=True), None)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async def stop() -> None:
                async for _ in signals:
                    return

            app = _hello_app() if args.app == "hello" else _quart_app()
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(lambda task_status: serve(app, config, shutdown_trigger=stop,
                                                                      task_status=task_status))
                _write_info(args.info, {"url": binds[0], "pid": os.getpid(), "model": {}})

    trio.run(main)


def _write_info(path: Path, info: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(info))
    temporary.replace(path)  # atomic: the parent never reads half a file


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.servers")
    parser.add_argument("app", choices=["controller", "hello", "quart"])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--info", type=Path, required=True)
    parser.add_argument("--model", choices=["none", "http", "medium", "large"], default="none")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the model (quick runs)")
    parser.add_argument("--no-posture-checks", action="store_true")
    parser.add_argument("--no-posture-evaluation", action="store_true")
    parser.add_argument("--no-events", action="store_true", help="record no events (the events-off baseline)")
    parser.add_argument("--seed-only", action="store_true", help="load the model into --data-dir and exit")
    parser.add_argument("--actors", type=int, default=0,
                        help="also load this many identities with MFA deadlines two hours ahead")
    parser.add_argument("--wake", action="store_true",
                        help="bring the --actors identities' actors to life (parked on their deadlines) before serving")
    args = parser.parse_args(argv)
    gc.callbacks.append(PAUSES)
    try:
        if args.app in ("hello", "quart"):
            _serve_bare(args)
        else:
            _serve_controller(args)
    finally:
        args.info.with_suffix(".gc.json").write_text(json.dumps(PAUSES.summary()))


class Server:
    """A running server process; ``url`` and ``model`` come from its info file."""

    def __init__(self, process: subprocess.Popen[bytes], info: dict[str, Any], info_path: Path) -> None:
        self.process = process
        self.url: str = info["url"]
        self.model: dict[str, Any] = info["model"]
        self._info_path = info_path
        self.gc: dict[str, Any] = {}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        gc_file = self._info_path.with_suffix(".gc.json")
        if gc_file.exists():
            self.gc = json.loads(gc_file.read_text())


def wait_idle(server: Server, *, quiet: float = 0.05, timeout: float = 60.0) -> None:
    """Return once a trivial request answers within ``quiet`` seconds: what a finished load left in flight is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = time.monotonic()
        with urllib.request.urlopen(server.url + "/version", timeout=timeout) as response:
            response.read()
        if time.monotonic() - started < quiet:
            return
        time.sleep(0.2)


def seed(data_dir: Path, extra: tuple[str, ...]) -> None:
    """Load a model into ``data_dir`` in a separate process (so that the directory can be copied)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "bench.servers", "controller", "--data-dir", str(data_dir), "--info",
                    str(data_dir.parent / f"{data_dir.name}.seed.json"), "--seed-only", *extra], check=True,
                   env=_env(), stdout=subprocess.DEVNULL)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent),
                                                         os.environ.get("PYTHONPATH", "")])}


@dataclass(frozen=True, slots=True)
class Spec:
    """A server to start: ``app`` ("controller" or "hello"), its data directory and extra arguments."""

    app: str
    data_dir: Path
    extra: tuple[str, ...] = ()


@contextmanager
def running_all(specs: dict[str, Spec], *, cpu: int | None = 0, timeout: float = 900.0) -> Iterator[dict[str, Server]]:
    """Start every server at once (each on ``cpu``), yield them by name once all serve; stop them on exit."""
    launched: dict[str, tuple[subprocess.Popen[bytes], Path, Any]] = {}
    servers: dict[str, Server] = {}
    try:
        for name, spec in specs.items():
            launched[name] = _launch(spec, cpu)
        started = time.monotonic()
        for name, (process, info_path, log) in launched.items():
            while not info_path.exists():
                if process.poll() is not None:
                    raise RuntimeError(f"server {name} exited with {process.returncode}; see {log.name}")
                if time.monotonic() - started > timeout:
                    raise TimeoutError(f"server {name} did not start in {timeout} s; see {log.name}")
                time.sleep(0.05)
            servers[name] = Server(process, json.loads(info_path.read_text()), info_path)
        yield servers
    finally:
        for name, (process, _, log) in launched.items():
            if name in servers:
                servers[name].stop()
            elif process.poll() is None:
                process.kill()
                process.wait()
            log.close()


@contextmanager
def running(app: str, data_dir: Path, *, cpu: int | None = 0, extra: tuple[str, ...] = (),
            timeout: float = 900.0) -> Iterator[Server]:
    """Start ``python -m bench.servers APP`` on ``cpu`` and yield it once it serves; stop it on exit."""
    with running_all({app: Spec(app, data_dir, extra)}, cpu=cpu, timeout=timeout) as servers:
        yield servers[app]


def _launch(spec: Spec, cpu: int | None) -> tuple[subprocess.Popen[bytes], Path, Any]:
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    info_path = spec.data_dir.parent / f"{spec.data_dir.name}.info.json"
    info_path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "bench.servers", spec.app, "--data-dir", str(spec.data_dir), "--info",
               str(info_path), *spec.extra]
    if cpu is not None and shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        command = ["taskset", "-c", str(cpu), *command]
    log = (spec.data_dir.parent / f"{spec.data_dir.name}.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_env())
    return process, info_path, log


if __name__ == "__main__":
    main()
