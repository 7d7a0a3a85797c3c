"""A real controller in-process, started as ``controller.runtime.task_tree`` starts it, minus HTTP: what the actors and
storage scenarios measure (real clock, durable LMDB, commits on the writer's pinned thread, the runtime policy of
``controller/runtime/memory.py``).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from controller.certificates import ensure_pki
from controller.runtime import memory
from controller.runtime.composition import Controller
from controller.runtime.settings import Settings
from controller.runtime.task_tree import start_services

__all__ = ["Running", "running_controller"]

_PKI: list[Path] = []


def _settings(data_dir: Path, *, worker_threads: bool, durable: bool, events: bool, admin_password: str) -> Settings:
    return Settings(data_dir=data_dir, tls=False, worker_threads=worker_threads, durable=durable,
                    admin_password=admin_password, events=events)


def _seed_pki(data_dir: Path) -> None:
    """Copy one PKI made for the whole run: making RSA keys for every fresh data directory costs seconds."""
    if (data_dir / "pki").exists():
        return
    if not _PKI:
        parent = tempfile.mkdtemp(prefix="tollgate-bench-pki-")
        atexit.register(shutil.rmtree, parent, ignore_errors=True)
        template = Path(parent) / "pki"
        ensure_pki(template)
        _PKI.append(template)
    shutil.copytree(_PKI[0], data_dir / "pki")


@dataclass(slots=True)
class Running:
    """A started controller and how long it took from opening the data directory to serving."""

    controller: Controller
    ready_seconds: float


@asynccontextmanager
async def running_controller(data_dir: Path, *, worker_threads: bool = True, durable: bool = True,
                             events: bool = True, admin_password: str = "bench-admin-password",
                             young_steps: int | None = memory.YOUNG_STEPS) -> AsyncIterator[Running]:
    """Open ``data_dir`` and start its services (:func:`controller.runtime.task_tree.start_services`) under the
    runtime policy (:func:`controller.runtime.memory.runtime_policy`), then :func:`controller.runtime.memory.settle`.
    ``worker_threads`` and ``durable`` False commit on the Trio thread without fsync (what a count of instructions
    wants: one thread, no waiting). A new data directory's admin gets ``admin_password``; ``young_steps`` goes to the
    runtime policy."""
    _seed_pki(data_dir)
    started = time.perf_counter()
    controller = Controller.open(_settings(data_dir, worker_threads=worker_threads, durable=durable, events=events,
                                            admin_password=admin_password))
    try:
        with memory.runtime_policy(controller.engine.actors, young_steps):
            async with trio.open_nursery() as services:
                await start_services(controller, services)
                memory.settle()
                yield Running(controller, time.perf_counter() - started)
                services.cancel_scope.cancel()
    finally:
        controller.close()
