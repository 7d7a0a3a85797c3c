"""``bench/RESULTS.md``: the performance record, rewritten by ``make bench``."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

from bench.report import ScenarioResult, format_table

__all__ = ["machine_description", "write_results"]


def machine_description() -> str:
    """CPU model, core count, memory and Python version of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB RAM"
    except (ValueError, OSError):
        pass
    return (f"{cpu}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def write_results(path: Path, command: str, started: float, results: Sequence[ScenarioResult]) -> None:
    """Write every scenario's table, targets and notes as Markdown."""
    finished = time.time()
    lines = [
        "# Performance record",
        "",
        "Rewritten by `make bench`. Every figure is compared with a baseline measured in the same run, interleaved,",
        "median of the rounds shown; absolute numbers from different runs are not comparable on these shared machines.",
        "",
        f"- Command: `{command}`",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} "
        f"(took {(finished - started) / 60:.1f} min)",
        f"- Machine: {machine_description()}",
        "",
        "## Targets",
        "",
        target_table_markdown(results),
    ]
    for result in results:
        lines += ["", f"## {result.scenario}" + (" (quick smoke run)" if result.quick else ""), "",
                  format_table(result.columns, result.rows, markdown=True), ""]
        lines += [f"- {note}" for note in result.notes]
    path.write_text("\n".join(lines).rstrip() + "\n")


def target_table_markdown(results: Sequence[ScenarioResult]) -> str:
    rows = [[r.scenario, t.name, t.goal, t.value, t.baseline, t.ratio, t.unit, "met" if t.met else "**missed**"]
            for r in results for t in r.targets]
    return format_table(["scenario", "target", "goal", "value", "baseline", "ratio", "unit", "met"], rows,
                        markdown=True)



