"""Speed of this tree against a baseline commit, end to end through the CLI (asv-style).

    python benchmarks/compare.py BASELINE [--workload NAME ...] [--repeat 5]
    python benchmarks/compare.py BASELINE --command "auditsel run configs/quickstart.yaml ..."

The baseline commit's files are unpacked into a temporary folder (`baselines.commits`, removed
afterwards); each workload runs as the same command line in both trees, each with its own
package on the path (PYTHONPATH = that tree; the working directory a fresh temporary folder), alternating
baseline and current `--repeat` times so that the machine's load hits both alike. It prints
the fastest wall time of each and the ratio baseline / current (above 1: this tree is faster),
and the same for the CPU seconds of the whole process tree (its forked processes included:
the better guide on a loaded machine).

The baseline is the code of that commit, helpers and all, so it never drifts the way a copy of
old code that imports today's helpers does. Both trees run in the same environment (the same
numpy, torch, dp_accounting); a baseline from before a dependency change may not run in it.

Workloads (the user's commands, small enough for a shared machine): see WORKLOADS below.
Numbers depend on the machine and its load: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import sys
import tempfile
import time
from pathlib import Path

from baselines.commits import ROOT, checkout, run_in

CLI = [sys.executable, "-m", "auditsel"]

# name -> arguments of `auditsel` (the workload's own folder is the working directory)
WORKLOADS = {
    "help": ["--help"],
    "quickstart": ["run", "{tree}/auditsel/configs/quickstart.yaml", "--out", "q", "--quiet"],
    "reduced-1e6": [
        "run",
        "{tree}/auditsel/configs/quickstart.yaml",
        "--trials",
        "1000000",
        "--out",
        "r",
        "--quiet",
        "--no-progress",
    ],
    "run-1e5": [
        "run",
        "{tree}/auditsel/configs/quickstart.yaml",
        "--trials",
        "100000",
        "--out",
        "r5",
        "--quiet",
        "--no-progress",
    ],
    "reduced-1e7": [
        "run",
        "{tree}/auditsel/configs/quickstart.yaml",
        "--trials",
        "10000000",
        "--out",
        "r7",
        "--quiet",
        "--no-progress",
    ],
    "table4": ["reproduce", "table4", "--out", "t"],
    "dpsgd-leak-200": [
        "run",
        "{tree}/auditsel/configs/dpsgd_leak.yaml",
        "--trials",
        "200",
        "--out",
        "d",
        "--quiet",
        "--no-progress",
    ],
}


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children, theirs included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(tree: Path, args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one command with `tree`'s package
    first on the path, in a fresh folder."""
    command = [a.replace("{tree}", str(tree)) for a in args]
    with tempfile.TemporaryDirectory(prefix="auditsel-compare-") as work:
        start, cpu = time.perf_counter(), children_cpu()
        done = run_in(tree, command, cwd=work)
        seconds, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed in {tree}:\n{done.stderr[-2000:]}")
    return seconds, cpu


def compare(
    baseline: Path, current: Path, args: list[str], repeat: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Fastest (wall, CPU) seconds of (baseline, current), alternating the two `repeat` times."""
    times: dict[Path, list[tuple[float, float]]] = {baseline: [], current: []}
    for _ in range(repeat):
        for tree in (baseline, current):
            times[tree].append(run_once(tree, args))
    best = lambda runs: (min(r[0] for r in runs), min(r[1] for r in runs))
    return best(times[baseline]), best(times[current])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="the baseline commit (a hash, tag or branch)")
    parser.add_argument("--workload", action="append", choices=list(WORKLOADS))
    parser.add_argument("--command", help="an `auditsel ...` command line instead")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command:
        words = shlex.split(args.command)
        if words[:1] == ["auditsel"]:
            words = words[1:]
        jobs = {"command": CLI + words}
    else:
        jobs = {name: CLI + WORKLOADS[name] for name in args.workload or list(WORKLOADS)}
    with checkout(args.baseline) as base:
        print(f"baseline {args.baseline} against the working tree, best of {args.repeat}")
        print(
            f"{'workload':<16}{'baseline s':>12}{'current s':>12}{'ratio':>8}"
            f"{'base CPU s':>12}{'cur CPU s':>11}{'CPU ratio':>10}"
        )
        for name, command in jobs.items():
            before, now = compare(base, ROOT, command, args.repeat)
            print(
                f"{name:<16}{before[0]:>12.3f}{now[0]:>12.3f}{before[0] / now[0]:>8.2f}"
                f"{before[1]:>12.3f}{now[1]:>11.3f}{before[1] / now[1]:>10.2f}"
            )
        print(
            f"load average {os.getloadavg()[0]:.1f}; CPU: the whole process tree, least of the repeats"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
