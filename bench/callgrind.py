"""Counting instructions of chosen code regions with Valgrind's callgrind, from Python.

Timings on shared machines drift by a third between runs; instruction counts repeat. Callgrind counts every
instruction the process executes (all threads), and its client requests, issued from the counted program, choose
which: :class:`Marks` wraps them (a tiny C library built with the system compiler against ``valgrind/callgrind.h``
on first use, loaded with ctypes). Outside Valgrind the requests are no-ops, so the same program runs plain.

:func:`run_counted` runs a Python module under ``valgrind --tool=callgrind --collect-atstart=no``; the program
switches collection on around each measured region (:meth:`Marks.measuring`) and dumps the counts of a series of
regions under a name (:meth:`Marks.dump`); the dumps come back as ``{name: instructions}``.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Marks", "available", "run_counted"]

_SOURCE = r"""
#include <valgrind/callgrind.h>
void marks_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void marks_zero(void) { CALLGRIND_ZERO_STATS; }
void marks_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
int marks_running(void) { return RUNNING_ON_VALGRIND; }
"""
_HEADER = Path("/usr/include/valgrind/callgrind.h")
_TRIGGER = re.compile(r"^desc: Trigger: Client Request: (.+)$", re.MULTILINE)
_TOTAL = re.compile(r"^(?:summary|totals): (\d+)", re.MULTILINE)


def available() -> str | None:
    """None when instructions can be counted here; otherwise what is missing."""
    for tool in ("valgrind", "cc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not _HEADER.exists():
        return f"{_HEADER} is missing (the valgrind development headers)"
    return None


_LIBRARY_VARIABLE = "TOLLGATE_CALLGRIND_MARKS"  # the built library's path, for the counted process


def _build(directory: Path) -> Path:
    source, library = directory / "marks.c", directory / "libmarks.so"
    source.write_text(_SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True)
    return library


class Marks:
    """Client requests to callgrind; every method is a no-op when the process does not run under it (or was not
    started by :func:`run_counted`)."""

    def __init__(self) -> None:
        path = os.environ.get(_LIBRARY_VARIABLE)
        library = ctypes.CDLL(path) if path else None
        self._lib = library if library is not None and library.marks_running() else None

    @property
    def counting(self) -> bool:
        """Whether this process runs under callgrind."""
        return self._lib is not None

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """Count the instructions executed inside the block (every thread's)."""
        if self._lib is not None:
            self._lib.marks_toggle()
        try:
            yield
        finally:
            if self._lib is not None:
                self._lib.marks_toggle()

    def zero(self) -> None:
        """Start a new series of regions."""
        if self._lib is not None:
            self._lib.marks_zero()

    def dump(self, name: str) -> None:
        """End the series: its count is reported under ``name``."""
        if self._lib is not None:
            self._lib.marks_dump(name.encode())


def run_counted(module: str, arguments: Sequence[str]) -> dict[str, int]:
    """Run ``python -m module arguments`` under callgrind and return the instructions of each dumped series.

    Raises:
        RuntimeError: counting is not available here (see :func:`available`), or the program failed.
    """
    missing = available()
    if missing is not None:
        raise RuntimeError(f"cannot count instructions: {missing}")
    out = Path(tempfile.mkdtemp(prefix="tollgate-callgrind-"))
    try:
        library = _build(out)
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--dump-instr=no",
                   f"--callgrind-out-file={out}/callgrind.out.%p", sys.executable, "-m", module, *arguments]
        env = {**os.environ, _LIBRARY_VARIABLE: str(library), "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the counted program failed ({done.returncode}):\n{done.stderr[-4000:]}")
        counts: dict[str, int] = {}
        for dump in sorted(out.glob("callgrind.out.*")):
            text = dump.read_text(errors="replace")
            trigger, total = _TRIGGER.search(text), _TOTAL.search(text)
            if trigger is not None and total is not None:
                counts[trigger.group(1).strip()] = int(total.group(1))
        return counts
    finally:
        shutil.rmtree(out, ignore_errors=True)
