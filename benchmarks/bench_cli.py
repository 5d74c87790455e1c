"""`auditsel run` end to end, as a user meets it, with the time of each phase.

    python benchmarks/bench_cli.py [--trials 10000000] [--jobs J] [--repeat 1] [--no-plots]
                                   [--rounds tnb|geometric] [--cache cold|warm]

The config: (reduced game, base {kind: gaussian, mu: 0.5}, TNB(0, 0.01), E[K] 21.5); with
`--rounds geometric`, the geometric law nu = 1e-3 (E[K] 1000).
Two measurements, each in a fresh interpreter:

1. plain: the `auditsel run CONFIG --out DIR [--jobs J] --quiet` command (no --jobs: the
   CLI's default, a thread per core for these games), wall-clock (what the
   user waits for), and `auditsel --help`;
2. phases: the same `auditsel.cli.main` call in a fresh process with timers wrapped around
   what it calls: imports (every module the run's own process loads before the run:
   matplotlib is imported in a thread beside the game), bounds (the upper panel, the bound
   curves and the exact privacy curve; computed in a thread beside the game, the audit and
   the estimator panel, so only the wait for them adds to the total), game
   (auditsel.games.engine.run_game), audit (the lower bounds from the scores), estimator
   panel (run by default up to 200,000 games), plots
   (auditsel.results.report.write_plots), rest (config, report.md, result.json, printing). It prints
   each phase, the total, the ratio of the total to the game alone, and the fixed cost (the
   total less the game: what a user pays whatever the number of games).

Numbers depend on the machine and its load: compare ratios measured in one process, not
absolute times from different runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIG = """name: bench_cli
delta: 1.0e-5
base: {kind: gaussian, mu: 0.5}
rounds: %s
game: {kind: reduced, trials: %d, seed: 0}
"""

ROUNDS = {
    "tnb": ("{kind: tnb, eta: 0.0, nu: 0.01}", "TNB(0, 0.01)"),
    "geometric": ("{kind: geometric, nu: 0.001}", "geometric nu = 1e-3"),
}

PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
import auditsel.cli
import auditsel.experiments.experiment, auditsel.results.report, auditsel.experiments.config, auditsel.auditing.lower, attacks.proxies
# (matplotlib is not imported here: the run imports it in a thread beside the game)
imports = time.perf_counter() - t0
import auditsel.experiments.experiment as ex, auditsel.results.report as rp
seconds = {"bounds": 0.0, "bounds_wait": 0.0, "game": 0.0, "audit": 0.0, "panel": 0.0,
           "panel_wait": 0.0, "plots": 0.0}
depth = dict.fromkeys(seconds, 0)

def timed(module, name, phase):
    inner = getattr(module, name)
    def wrapper(*a, **k):   # a call nested in the same phase (curves -> panel) counts once
        depth[phase] += 1
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            depth[phase] -= 1
            if depth[phase] == 0:
                seconds[phase] += time.perf_counter() - t
    setattr(module, name, wrapper)

background = ex.in_background
class TimedBackground:   # the bounds and the estimator panel, computed beside the rest: their
    def __init__(self, fn):   # own seconds (in a thread) and the main thread's wait for them
        names = fn.__code__.co_names   # the bounds: computed, or read back from the cache
        self.phase = "bounds" if {"_upper_panel", "kept_bounds"} & set(names) else "panel"
        def run():
            t = time.perf_counter()
            try:
                return fn()
            finally:
                seconds[self.phase] += time.perf_counter() - t
        self.future = background(run)
    def result(self):
        t = time.perf_counter()
        try:
            return self.future.result()
        finally:
            seconds[self.phase + "_wait"] += time.perf_counter() - t
    def cancel(self):
        return self.future.cancel()

ex.in_background = TimedBackground
for name, phase in (("run_game", "game"), ("audit_scores", "audit"), ("audit_chunks", "audit")):
    if hasattr(ex, name):
        timed(ex, name, phase)
timed(rp, "write_plots", "plots")
t1 = time.perf_counter()
rc = auditsel.cli.main(sys.argv[1:])
run = time.perf_counter() - t1
print(json.dumps({"rc": rc, "imports": imports, "run": run, **seconds}))
"""


def env(cache: str = "off"):
    """The commands' environment; `cache`: the folder of the bounds kept across runs."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "AUDITSEL_CACHE_DIR": cache,
    }


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall(cmd, cache: str = "off") -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process tree) of one command."""
    t, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(cache), cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return time.perf_counter() - t, children_cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--trials", type=int, default=10_000_000)
    ap.add_argument("--jobs", type=int, help="pass --jobs J (default: none, the CLI's default)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions; the fastest is shown")
    ap.add_argument("--no-plots", action="store_true", help="pass --no-plots to auditsel run")
    ap.add_argument(
        "--rounds",
        choices=sorted(ROUNDS),
        default="tnb",
        help="the law of K: tnb (TNB(0, 0.01), E[K] 21.5) or geometric (nu = 1e-3, E[K] 1000)",
    )
    ap.add_argument(
        "--cache",
        choices=("cold", "warm"),
        default="cold",
        help="cold (default): every command computes the bounds (an empty cache folder); warm: "
        "they are read back from the folder a first, untimed run filled (a rerun of a setting)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench_cli.yaml"
        config.write_text(CONFIG % (ROUNDS[args.rounds][0], args.trials))
        help_s = min(wall([sys.executable, "-m", "auditsel", "--help"])[0] for _ in range(3))
        argv = ["run", str(config), "--quiet", "--no-progress"]
        argv += [] if args.jobs is None else ["--jobs", str(args.jobs)]
        argv += ["--no-plots"] if args.no_plots else []
        plain, phased = [], []
        kept = f"{tmp}/cache"
        if args.cache == "warm":  # the first run of the setting, untimed
            wall([sys.executable, "-m", "auditsel", *argv, "--out", f"{tmp}/fill"], kept)
        for i in range(args.repeat):
            cache = kept if args.cache == "warm" else f"{tmp}/cache-plain{i}"
            plain.append(
                wall([sys.executable, "-m", "auditsel", *argv, "--out", f"{tmp}/plain{i}"], cache)
            )
            cache = kept if args.cache == "warm" else f"{tmp}/cache-phased{i}"
            t = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", PHASES, *argv, "--out", f"{tmp}/phased{i}"],
                capture_output=True,
                text=True,
                env=env(cache),
                cwd=ROOT,
            )
            total = time.perf_counter() - t
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
            phases = json.loads(proc.stdout.strip().splitlines()[-1])
            phases["total"] = total
            phased.append(phases)
    best = min(phased, key=lambda p: p["total"])
    # the bounds and the panel run beside the rest: only the waits for them add
    known = (
        best["imports"]
        + best["game"]
        + best["audit"]
        + best["bounds_wait"]
        + best["panel_wait"]
        + best["plots"]
    )
    rows = [
        ("imports", best["imports"]),
        ("bounds (beside the game and the audit)", best["bounds"]),
        ("  waited for after them", best["bounds_wait"]),
        ("game", best["game"]),
        ("audit", best["audit"]),
        ("estimator panel (beside the plots)", best["panel"]),
        ("  waited for after them", best["panel_wait"]),
        ("plots", best["plots"]),
        ("rest (start-up, config, report, json)", best["total"] - known),
        ("total", best["total"]),
    ]
    print(
        f"auditsel run: {args.trials:,} reduced games, mu = 0.5, {ROUNDS[args.rounds][1]}"
        + (f", --jobs {args.jobs}" if args.jobs is not None else ", default --jobs")
        + (" --no-plots" if args.no_plots else "")
        + f"; bounds {args.cache}"
        + f"; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'phase':<40} {'seconds':>8}")
    for name, value in rows:
        print(f"{name:<40} {value:8.2f}")
    print(f"{'total / game alone':<40} {best['total'] / best['game']:8.2f}")
    print(f"{'fixed cost (total - game)':<40} {best['total'] - best['game']:8.2f}")
    fastest = min(plain)
    print(f"{'plain `auditsel run` (wall-clock)':<40} {fastest[0]:8.2f}")
    print(f"{'  its CPU seconds (process tree)':<40} {fastest[1]:8.2f}")
    print(f"{'`auditsel --help` (wall-clock)':<40} {help_s:8.2f}")


if __name__ == "__main__":
    main()
