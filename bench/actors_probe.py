"""Process measurements for the actors scenario: resident memory and CPU time.

Memory is read from ``/proc/self/status``: ``RssAnon`` is the process's own memory (heap, stacks), ``RssFile`` the
file pages it has mapped, which for this controller are LMDB's (the page cache of the database, shared with the
kernel and dropped under pressure). Per-actor figures use ``RssAnon``; ``RssFile`` is reported beside them.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import time
from pathlib import Path

__all__ = ["CpuMeter", "anon_bytes", "file_bytes", "release_free_memory"]

_STATUS = Path("/proc/self/status")


def _status_bytes(field: str) -> int:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def anon_bytes() -> int:
    """Anonymous resident memory of this process (0 where ``/proc`` is missing)."""
    return _status_bytes("RssAnon")


def file_bytes() -> int:
    """File-backed resident memory of this process (LMDB's mapped pages)."""
    return _status_bytes("RssFile")


def release_free_memory() -> None:
    """Collect garbage and hand free heap memory back to the kernel, so that a later growth is not hidden by the
    reuse of memory freed earlier (glibc only; elsewhere just the collection)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(name).malloc_trim(0)


class CpuMeter:
    """CPU time since creation as a share of one core: of the whole process (every thread, the commit thread
    included) and of the calling thread (the Trio thread)."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._process = time.process_time()
        self._thread = time.thread_time()

    def share(self) -> float:
        """Process CPU seconds per wall second so far (1.0 = one core busy)."""
        wall = time.perf_counter() - self._wall
        return (time.process_time() - self._process) / wall if wall > 0 else float("nan")

    def thread_share(self) -> float:
        """CPU seconds of the calling thread per wall second so far."""
        wall = time.perf_counter() - self._wall
        return (time.thread_time() - self._thread) / wall if wall > 0 else float("nan")
