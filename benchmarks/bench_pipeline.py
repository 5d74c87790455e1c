"""Speed (and memory) of a pipeline audit, as the user meets it.

    python benchmarks/bench_pipeline.py                 # the tutorial's Opacus pipeline
    python benchmarks/bench_pipeline.py --games 2000 --jobs 2 --loop 100
    python benchmarks/bench_pipeline.py --docs          # the tutorial page as written, its
                                                        # printouts and plots (docs/tutorials/img)
    python benchmarks/bench_pipeline.py --memory        # peak memory, 10^5 vs 10^6 games
    python benchmarks/bench_pipeline.py --compare-jobs --games 200 --repeat 3 [--baseline COMMIT]
    python benchmarks/bench_pipeline.py --timeline --games 200 --jobs 2
                                                        # one audit's phases, by process
    python benchmarks/bench_pipeline.py --threads-check --games 100
                                                        # a NumPy pipeline: BLAS threads
                                                        # --jobs 2 against --jobs 1: CPU, wall

Default: the pipeline of docs/tutorials/audit-your-pipeline.md (saved as tuning.py, exactly
the page's blocks) audited end to end through the CLI (`auditsel audit-pipeline ... --jobs J`,
worker start-up, checkpoints, estimator panel, report and plots included), against the same
pipeline in a plain Python loop in this process (`tune` then `score`, one game after another,
nothing else). Prints games/s of both and their ratio, and the load average before and after:
on a shared machine the wall-clock numbers move with the load, the ratio less so.

--compare-jobs: the CLI audit with --jobs 1 and --jobs 2, alternately, `--repeat` times: the
CPU of the whole process tree and the wall time of each, their ratios (jobs 2 / jobs 1) with
the load average around each pair, then the median and the range of the ratios; with
`--baseline COMMIT`, the same pairs with that commit's package too, alternating with this
tree's (`benchmarks/baselines/commits.py`); with `--idle-below L`, each pair waits for a
1-minute load average under L first (on a shared machine: idle-ish numbers).

--threads-check: a hand-written NumPy pipeline (full-batch DP-SGD of a linear autoencoder on 512
examples of 64 features, 20 steps, two 512 x 64 x 64 matrix products each) audited in this process with
jobs = 1, BLAS threads limited to one (the default) and to every core (`game_threads`),
alternately: wall and CPU seconds per game, and the ratio.

--memory: a cheap numpy pipeline, 10^5 then 10^6 games streamed to checkpoints (each in a fresh
process): peak resident memory should not grow with the number of games.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_docs_pipeline import run_tutorial, tutorial_module  # the page, as the tests run it

from auditsel.pipelines.pipeline import Pipeline

CLI = [
    "--score",
    "tuning.py:score",
    "--data",
    "tuning.py:train_data",
    "--canary",
    "{kind: gradient, coordinate: 30}",
    "--delta",
    "1e-5",
]


# the CLI without the exit's gc.freeze (auditsel.cli.main runs _main, then freezes)


def wait_for_idle(below: float | None, most: float = 900.0) -> None:
    """Wait (at most `most` seconds) until the 1-minute load average is under `below`."""
    start = time.monotonic()
    while below is not None and os.getloadavg()[0] >= below and time.monotonic() - start < most:
        time.sleep(5)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def plain_loop(folder: Path, games: int) -> tuple[float, float]:
    """games/s and CPU s/game of tune + score in a plain loop in this process."""
    sys.path.insert(0, str(folder))
    import tuning

    from auditsel import GradientCanary

    canary = GradientCanary(coordinate=30)
    rng = np.random.default_rng(0)
    tuning.tune(tuning.train_data, 0, canary)  # warm-up: first-call costs of torch and Opacus
    wall, cpu = time.perf_counter(), time.process_time()
    for g in range(games):
        bound = canary.for_game(bool(g % 2), rng)
        tuning.score(tuning.tune(bound.prepare(tuning.train_data), g, bound), canary)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return games / wall, cpu / games


def cli_audit(folder: Path, games: int, jobs: int, tree: Path = ROOT) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds of the whole process tree (the CLI and its workers: start-up,
    imports and task transfer included) and result.json of one CLI audit (`tree`: whose
    package runs)."""
    out = folder / "audit"
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable, "-m", "auditsel", "audit-pipeline", "tuning.py:tune", *CLI,
        "--games", str(games), "--jobs", str(jobs), "--out", str(out), "--no-progress", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=folder, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, tree_cpu, json.loads((out / "result.json").read_text())


def speed(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "tuning.py").write_text(tutorial_module())
        print(f"machine: {os.cpu_count()} cores; before: {load()}")
        wall, tree_cpu, result = cli_audit(folder, args.games, args.jobs)
        after_cli = load()
        rate_loop, cpu_loop = plain_loop(folder, args.loop)
        rate_cli = args.games / wall
        p = result["pipeline"]
        print(
            f"auditsel audit-pipeline --games {args.games} --jobs {args.jobs}: {wall:.1f} s wall "
            f"({rate_cli:.1f} games/s), {p['cpu_seconds']:.1f} CPU s, eps_L = "
            f"{result['lower']['eps']:.4f}; {after_cli}"
        )
        print(
            f"plain loop, this process, {args.loop} games: {rate_loop:.1f} games/s, "
            f"{cpu_loop * 1e3:.1f} ms CPU per game; {load()}"
        )
        print(f"ratio (CLI audit, {args.jobs} jobs / plain loop): {rate_cli / rate_loop:.2f}x")
        # on a loaded machine the wall clock measures the load; CPU seconds measure the work
        print(
            f"CPU of the whole CLI process tree: {tree_cpu:.1f} s = {tree_cpu / args.games * 1e3:.1f} "
            f"ms per game (plain loop {cpu_loop * 1e3:.1f}: x{tree_cpu / args.games / cpu_loop:.2f}); "
            f"on {args.jobs} idle cores that is {tree_cpu / args.jobs:.0f} s of wall time at best"
        )


def compare_jobs(args) -> None:
    import statistics

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        (folder / "tuning.py").write_text(tutorial_module())
        trees = {"": ROOT}
        if args.baseline:  # the same pairs with the baseline commit's package, alternating
            sys.path.insert(0, str(ROOT / "benchmarks"))
            from baselines.commits import checkout

            trees = {f"{args.baseline}: ": stack.enter_context(checkout(args.baseline)), **trees}
        print(f"machine: {os.cpu_count()} cores; before: {load()}")
        ratios: dict[str, dict[str, list[float]]] = {t: {"CPU": [], "wall": []} for t in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():
                wait_for_idle(args.idle_below)
                before = load()
                w1, c1, r1 = cli_audit(folder, args.games, 1, tree=tree)
                w2, c2, r2 = cli_audit(folder, args.games, 2, tree=tree)
                assert r1["lower"]["eps"] == r2["lower"]["eps"]  # the same games, the same numbers
                ratios[name]["CPU"].append(c2 / c1)
                ratios[name]["wall"].append(w2 / w1)
                print(
                    f"  {name}{args.games} games: --jobs 1 {w1:5.1f} s wall {c1:5.1f} s CPU; "
                    f"--jobs 2 {w2:5.1f} s wall {c2:5.1f} s CPU; 2/1: CPU {c2 / c1:.2f}x, "
                    f"wall {w2 / w1:.2f}x; {before}, after: {load()}"
                )
        for name, by in ratios.items():
            for what, r in by.items():
                print(
                    f"{name}--jobs 2 / --jobs 1, {what}: {statistics.median(r):.2f}x "
                    f"[{min(r):.2f}, {max(r):.2f}] ({len(r)} repeats)"
                )


# --timeline: the phases of one CLI audit, each function's start and end in the process that
# ran it (the parent, or a worker: play_chunk), written to stderr by a wrapper
TIMELINE = """
import functools, importlib, os, sys, time
T0 = time.perf_counter()
def patch(module, name):
    m = importlib.import_module(module)
    fn = getattr(m, name)
    @functools.wraps(fn)
    def timed(*a, **k):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            print(f"[{os.getpid()}] {start - T0:6.2f} to {time.perf_counter() - T0:6.2f} s: "
                  f"{name} ({time.process_time() - cpu:.2f} CPU s)", file=sys.stderr)
    setattr(m, name, timed)
for module, name in [
    ("auditsel.cli.command_audit_pipeline", "load_pipeline_spec"),
    ("auditsel.pipelines.pipeline", "check_replay"),
    ("auditsel.pipelines.pipeline", "run_game"),
    ("auditsel.games.engine", "play_chunk"),
    ("auditsel.pipelines.pipeline", "estimator_panel"),
    ("auditsel.pipelines.pipeline", "write_outputs"),
]:
    patch(module, name)
from auditsel.cli import main
code = main()
print(f"[{os.getpid()}] {time.perf_counter() - T0:6.2f} s: main returned", file=sys.stderr)
sys.exit(code)
"""


def timeline(args) -> None:
    """One CLI audit with each phase's start and end printed, and its total wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tuning.py").write_text(tutorial_module())
        print(f"machine: {os.cpu_count()} cores; before: {load()}")
        command = [
            sys.executable, "-c", TIMELINE, "audit-pipeline", "tuning.py:tune", *CLI,
            "--games", str(args.games), "--jobs", str(args.jobs), "--out", "audit",
            "--no-progress", "--quiet",
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, check=True)
        print(done.stderr.strip())
        print(
            f"process ended at {time.perf_counter() - start:.2f} s (its start-up included); {load()}"
        )


_X = np.random.default_rng(1).normal(size=(512, 64))


def numpy_pipeline(data, seed, canary):
    """Full-batch DP-SGD of a linear autoencoder (64 x 64 weights) on 512 examples, by hand in
    NumPy: two matrix products (GEMMs, 512 x 64 x 64) per step, 20 steps."""
    rng = np.random.default_rng(seed)
    w = np.eye(64) * 0.5
    for _ in range(20):
        residual = _X @ w - _X  # (512, 64)
        grad = _X.T @ residual / 512  # (64, 64)
        grads = [grad.ravel() / max(np.linalg.norm(grad), 1.0)]
        canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
        w -= 0.1 * (grads[0] + rng.normal(0.0, 1.0, 64 * 64)).reshape(64, 64)
    return w.ravel()


def threads_check(args) -> None:
    import statistics

    from auditsel import ExecutionOptions, GradientCanary, ReportOptions, audit_pipeline

    print(f"machine: {os.cpu_count()} cores; before: {load()}")
    rows = {"1 (default)": None, f"{os.cpu_count()} (every core)": os.cpu_count()}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in rows}
    for _ in range(args.repeat):
        for name, value in rows.items():
            wall, cpu = time.perf_counter(), time.process_time()
            audit_pipeline(
                Pipeline(numpy_pipeline, data=None, canary=GradientCanary(coordinate=0)),
                games=args.games,
                delta=1e-5,
                report=ReportOptions(panel=False),
                execution=ExecutionOptions(game_threads=value),
            )
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            times[name].append((wall / args.games, cpu / args.games))
    for name, t in times.items():
        w = statistics.median(x[0] for x in t)
        c = statistics.median(x[1] for x in t)
        print(f"BLAS threads {name:>16}: {w * 1e3:8.2f} ms wall, {c * 1e3:8.2f} ms CPU per game")
    (one, every) = (statistics.median(x[0] for x in t) for t in times.values())
    print(f"every core / one thread, wall: {every / one:.2f}x; after: {load()}")


def docs(args) -> None:
    """Run the tutorial page as written in a temporary folder; print its output and copy its
    plots next to the page."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path.cwd()
        os.chdir(tmp)
        try:
            print(f"before: {load()}", flush=True)
            buffer = io.StringIO()
            start = time.perf_counter()
            with contextlib.redirect_stdout(buffer):
                ns = run_tutorial()
            print(buffer.getvalue())
            audit = ns["audit"]
            print(
                f"page as written: {time.perf_counter() - start:.1f} s wall; audit: "
                f"{audit.games} games in {audit.wall_seconds:.1f} s wall "
                f"({audit.games / audit.wall_seconds:.1f} games/s), "
                f"{audit.cpu_seconds:.1f} CPU s; after: {load()}"
            )
            img = ROOT / "docs" / "tutorials" / "img"
            img.mkdir(exist_ok=True)
            for name in ("scores.png", "tradeoff.png"):
                shutil.copy(Path(tmp) / "audit-opacus" / name, img / f"audit-opacus-{name}")
            print(f"copied the plots to {img}")
        finally:
            os.chdir(cwd)


def noise_pipeline(data, seed, canary):
    """Cheap: one Gaussian step with the canary (for the memory benchmark)."""
    grads = [np.zeros(4)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return grads[0] + np.random.default_rng(seed).normal(size=4)


def memory_child(games: int, folder: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_pipeline import noise_pipeline

    from auditsel import ExecutionOptions, GradientCanary, audit_pipeline

    start = time.perf_counter()
    audit = audit_pipeline(
        Pipeline(noise_pipeline, data=None, canary=GradientCanary(coordinate=0)),
        games=games,
        delta=1e-5,
        execution=ExecutionOptions(stream=True, chunk_size=8192, checkpoint_dir=folder),
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{games:>9,} games, streamed: peak RSS {peak:.0f} MiB, eps_L {audit.eps:.3f}, "
        f"{time.perf_counter() - start:.1f} s"
    )


def memory(args) -> None:
    for games in (10**5, 10**6):
        with tempfile.TemporaryDirectory() as tmp:
            code = (
                f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"from bench_pipeline import memory_child; memory_child({games}, {tmp!r})"
            )
            subprocess.run([sys.executable, "-c", code], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--loop", type=int, default=100, help="games of the plain loop")
    parser.add_argument("--docs", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--compare-jobs", action="store_true")
    parser.add_argument("--threads-check", action="store_true")
    parser.add_argument("--timeline", action="store_true")
    parser.add_argument(
        "--baseline", help="--compare-jobs: also a baseline commit's package, alternating"
    )
    parser.add_argument(
        "--idle-below",
        type=float,
        help="--compare-jobs: before each pair, wait (up to 15 min) for a load average below it",
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.docs:
        docs(args)
    elif args.memory:
        memory(args)
    elif args.compare_jobs:
        compare_jobs(args)
    elif args.threads_check:
        threads_check(args)
    elif args.timeline:
        timeline(args)
    else:
        speed(args)


if __name__ == "__main__":
    main()
