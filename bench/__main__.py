"""``python -m bench <scenario|all> [--quick] [--json FILE] [--results FILE]``.

A scenario prints its table and targets; ``--json`` writes the machine-readable result (for ``all``: one file per
scenario, ``FILE`` with the scenario name inserted before the suffix). ``all --results bench/RESULTS.md`` rewrites
the performance record with the command, date, machine and every figure. The exit status is 0 even when a target is
missed (a miss is a finding, reported in the output and the JSON), and non-zero only if a scenario fails to run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from bench.record import write_results
from bench.report import ScenarioResult

SCENARIOS = {
    "http": "bench.http_bench",
    "actors": "bench.actors_bench",
    "storage": "bench.storage_bench",
    "sessions": "bench.sessions_bench",
    "crash": "bench.crash_bench",
    "steps": "bench.steps_bench",
    "replication": "bench.replication_bench",
    "console": "bench.console_bench",
    "cluster": "bench.cluster_bench",
    "events": "bench.events_bench",
    "adoption": "bench.adoption_bench",
    "gc": "bench.gc_bench",
}


def run_scenario(name: str, quick: bool) -> ScenarioResult:
    """Import the scenario's module and run it."""
    module = importlib.import_module(SCENARIOS[name])
    result: ScenarioResult = module.run(quick=quick)
    return result


def _json_path(base: Path, name: str, many: bool) -> Path:
    return base.with_name(f"{base.stem}-{name}{base.suffix}") if many else base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=[*SCENARIOS, "all"])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds (figures mean nothing)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the result as JSON")
    parser.add_argument("--results", type=Path, metavar="FILE", help="rewrite the Markdown performance record")
    args = parser.parse_args(argv)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    results: list[ScenarioResult] = []
    started = time.time()
    for name in names:
        result = run_scenario(name, args.quick)
        results.append(result)
        print(result.text(), flush=True)
        print(flush=True)
        if args.json is not None:
            result.write_json(_json_path(args.json, name, len(names) > 1))
    if args.results is not None:
        command = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
        write_results(args.results, command, started, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
