"""The DP-SGD kernels: numba (today) against the pinned C kernels of auditsel 0.1, in one process.

Two parts, each alternating the two implementations ``--repeat`` times and printing the ratio
numba speed / C speed of every repeat (median, min and max: the spread on a shared machine):

* kernels: the draws (normals, uniforms) and the softmax pass at the sizes of a step of 256
  runs of the Table-3 setting (digits, logistic regression, 650 parameters, 500 examples);
* games: real DP-SGD games of the committed Table-3 cells through the engine, once with the
  package as it is (numba kernels, numpy's SeedSequence for the run keys) and once with the
  baseline patched into the trainer (C kernels and the hand-copied seed hash of 0.1); the
  released scores must be the same bit for bit (checked), so only the speed differs.

Kernels split their rows over a fixed rule (``kernels._split``); nothing is chosen online.

``--torch-twin`` adds the torch kernels on the CPU (what ran without a compiler before numba).
``--no-compiler`` builds the C baseline first, then runs the benchmark in a child process with
no C compiler (CC=/nonexistent, PATH without cc/gcc/clang) and an empty numba cache, so the
numba kernels are compiled there from scratch without one.

    python benchmarks/bench_kernels.py                     # 5 repeats, 100 games per cell
    python benchmarks/bench_kernels.py --no-compiler
    python benchmarks/bench_kernels.py --repeat 9 --games 200 --cells ntnv:dirac:1 etcv:dirac:1
    python benchmarks/bench_kernels.py --threads 1 --skip-games --repeat 9   # one thread each
    python benchmarks/bench_kernels.py --threads 1 --cpu-time --skip-games   # CPU time, loaded
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from baselines import kernels_c

from attacks.dpsgd_game import build_protocol, load_data, make_scorer
from auditsel.dpsgd import kernels, trainer
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.reproductions.table3 import Table3Grid

BASELINE = SimpleNamespace(
    draw=kernels_c.draw,
    softmax_grad_=kernels_c.softmax_grad_,
    seed_keys=kernels_c.seed_keys,
    keys_of=kernels_c.keys_of,
)


class TorchOnCpu:
    """The package's kernels with the torch implementation serving CPU tensors."""

    def __enter__(self):
        self.saved = kernels._numba_serves
        kernels._numba_serves = lambda device: False

    def __exit__(self, *exc):
        kernels._numba_serves = self.saved


CLOCK = time.perf_counter  # --cpu-time (one thread): time.thread_time, blind to waiting


def best_of(fn, inner: int) -> float:
    times = []
    for _ in range(inner):
        t = CLOCK()
        fn()
        times.append(CLOCK() - t)
    return min(times)


def spread(ratios: list[float]) -> str:
    return (
        f"{statistics.median(ratios):5.2f}x  [{min(ratios):.2f}, {max(ratios):.2f}]"
        f"  ({len(ratios)} repeats)"
    )


def kernel_cases():
    R, d, n, K = 256, 650, 500, 10
    keys = kernels.seed_keys(range(R))
    g = torch.Generator().manual_seed(0)
    z0 = torch.randn(R, K, n, generator=g) * 3
    label = torch.randint(0, K, (n,), generator=g)
    clip, a_sq = torch.ones(R), torch.rand(n, generator=g) * 60 + 1
    z = z0.clone()

    def softmax(impl):
        def run():
            z.copy_(z0)
            impl.softmax_grad_(z, label, clip=clip, a_sq=a_sq)

        return run

    return [
        (
            f"draw normals ({R} runs x 20 steps x {d})",
            lambda m: lambda: m.draw(keys, 2, 0, 20, d, True),
        ),
        (
            f"draw uniforms ({R} x 20 x {n + 1})",
            lambda m: lambda: m.draw(keys, 1, 0, 20, n + 1, False),
        ),
        (f"softmax pass ({R} x {K} x {n}, clipped)", softmax),
    ]


def bench_kernels(repeat: int, twin: bool) -> None:
    print("kernels (numba speed / C speed; > 1: numba faster)")
    for name, case in kernel_cases():
        new, old = case(kernels), case(BASELINE)
        new(), old()  # compiled, warm
        ratios, twin_ratios = [], []
        for _ in range(repeat):
            t_old, t_new = best_of(old, 5), best_of(new, 5)
            ratios.append(t_old / t_new)
            if twin:
                with TorchOnCpu():
                    twin_ratios.append(t_old / best_of(new, 2))
        print(f"  {name:44} numba {spread(ratios)}")
        if twin:
            print(f"  {'':44} torch {spread(twin_ratios)}")


def play(grid, cell, games, seed, impl):
    threat, canary, eps = cell.split(":")
    spec = replace(grid.game, threat=threat, canary=canary, device="cpu")
    base = grid.base(float(eps))
    saved = trainer.kernels
    trainer.kernels = impl
    try:
        proto = build_protocol(spec, base, grid.rounds, load_data(grid.game))
        scorer = make_scorer(spec, ("lambda_a", "lambda_b"), base, grid.rounds)
        t = time.perf_counter()
        record = run_game(
            proto, scorer, games, seed, execution=ExecutionOptions(chunk_size=grid.chunk_size)
        )
        return record, time.perf_counter() - t
    finally:
        trainer.kernels = saved


def bench_games(cells, games: int, repeat: int, twin: bool) -> None:
    grid = Table3Grid()
    print(
        f"games (Table-3 setting: digits/logreg, n = {grid.game.train_size}, N = {grid.steps}, "
        f"E[K] = {grid.rounds.mean:.1f}; {games} games per timing; games/s numba over C)"
    )
    for cell in cells:
        play(grid, cell, 4, 1, kernels), play(grid, cell, 4, 1, BASELINE)  # warm
        ratios, twin_ratios, rates = [], [], []
        for _ in range(repeat):
            old, t_old = play(grid, cell, games, 0, BASELINE)
            new, t_new = play(grid, cell, games, 0, kernels)
            assert np.array_equal(old.member, new.member)
            assert np.array_equal(np.asarray(old.scores), np.asarray(new.scores)), cell
            ratios.append(t_old / t_new)
            rates.append((games / t_old, games / t_new))
            if twin:
                with TorchOnCpu():
                    twin_ratios.append(t_old / play(grid, cell, games, 0, kernels)[1])
        c, m = statistics.median(r[0] for r in rates), statistics.median(r[1] for r in rates)
        print(f"  {cell:14} C {c:8.1f} games/s  numba {m:8.1f} games/s  numba/C {spread(ratios)}")
        if twin:
            print(f"  {'':14} {'':45} torch/C {spread(twin_ratios)}")
    print("  (scores of every timing identical bit for bit)")


def without_compiler(argv: list[str]) -> int:
    """Build the C baseline, then rerun this benchmark where no C compiler can be found."""
    with tempfile.TemporaryDirectory(prefix="auditsel-bench-") as tmp:
        lib = kernels_c.build(tmp)
        if lib is None:
            print("no C compiler here to build the baseline with", file=sys.stderr)
            return 1
        empty = Path(tmp) / "bin"
        empty.mkdir()
        (Path(tmp) / "numba").mkdir(mode=0o700)
        env = {
            **os.environ,
            "CC": "/nonexistent",
            "PATH": str(empty),
            "NUMBA_CACHE_DIR": str(Path(tmp) / "numba"),
            "AUDITSEL_BASELINE_LIB": str(lib),
            "AUDITSEL_BENCH_CHILD": "1",
        }
        return subprocess.run(
            [sys.executable, os.path.abspath(__file__), *argv], env=env
        ).returncode


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument(
        "--cells",
        nargs="+",
        default=["ntnv:dirac:1", "ntcv:input:2", "etcv:dirac:1"],
        help="threat:canary:eps_B",
    )
    ap.add_argument("--torch-twin", action="store_true", help="also the torch kernels on the CPU")
    ap.add_argument("--no-compiler", action="store_true", help="run where no C compiler is")
    ap.add_argument(
        "--threads", type=int, default=0, help="torch and OpenMP threads (default: torch's)"
    )
    ap.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the kernels by the CPU time of the calling thread (needs --threads 1): on a "
        "loaded machine, the work itself, not the wait for a core",
    )
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--skip-games", action="store_true")
    args = ap.parse_args(argv)
    if args.no_compiler and not os.environ.get("AUDITSEL_BENCH_CHILD"):
        return without_compiler([a for a in argv if a != "--no-compiler"])
    if args.cpu_time:
        if args.threads != 1:
            ap.error("--cpu-time needs --threads 1 (a thread's CPU time misses the others')")
        global CLOCK
        CLOCK = time.thread_time
    if args.threads:  # before the baseline's OpenMP runtime is loaded
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        torch.set_num_threads(args.threads)
    compiler = [c for c in ("cc", "gcc", "clang") if shutil.which(c)]
    t = time.perf_counter()
    kernels._cpu()
    stats = kernels._cpu().philox_fill.stats
    how = "loaded from numba's cache" if stats.cache_hits else "compiled"
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; numba kernels {how} in "
        f"{time.perf_counter() - t:.1f} s; C compiler on PATH: {', '.join(compiler) or 'none'}"
        f" (CC={os.environ.get('CC', 'unset')}); C baseline: "
        f"{'prebuilt ' + os.environ['AUDITSEL_BASELINE_LIB'] if os.environ.get('AUDITSEL_BASELINE_LIB') else 'built now'}"
    )
    if not kernels_c.available():
        print("the C baseline could not be built here", file=sys.stderr)
        return 1
    if not args.skip_kernels:
        bench_kernels(args.repeat, args.torch_twin)
    if not args.skip_games:
        bench_games(args.cells, args.games, args.repeat, args.torch_twin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
