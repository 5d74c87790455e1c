"""Real DP-SGD games per second: today's trainer against the path before the speed work.

Each cell of the committed Table-3 grid setting (digits, logistic regression, 500 training
examples, N = 20 full-batch steps, C = 1, learning rates {1e-3, 3e-3, 1e-2, 3e-2},
xi = TNB(0, 0.01) so E[K] = 21.5, sigma calibrated to eps_B) plays the same games through the
engine twice in this process, alternating: once with ``auditsel.dpsgd`` as it is, once with the
trainer and score of ``dpsgd_before.py`` (the code before) patched in. It prints games/s of
both and their ratio. The two paths draw their noise from different generators (the code
before: torch's per-run MT19937 generators; today: counter-based Philox, ``kernels.draw``), so
their scores agree in law, not value: the last column is the two-sample Kolmogorov-Smirnov
p-value of the released scores of the same games (the same coins and numbers of runs). The
kernels row says which kernels served the CPU (numba; the torch kernels serve GPUs).

    python benchmarks/bench_dpsgd_games.py                          # 3 cells, 100 games each
    python benchmarks/bench_dpsgd_games.py --games 200 --repeat 3 --cells ntnv:dirac:1 etcv:dirac:1

On a CUDA machine the same cells are also timed on the GPU (rows marked cuda).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
# benchmarks/coverage.py would shadow the `coverage` package that numba probes for on import:
# import the package (and numba) before this folder goes on the path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

import numpy as np
import torch
from scipy import stats

from attacks.dpsgd_game import build_protocol, load_data, make_scorer
from auditsel.dpsgd import kernels
from auditsel.dpsgd import protocol as protocol_module
from auditsel.games.engine import run_game
from auditsel.reproductions.table3 import Table3Grid

sys.path.append(HERE)
import dpsgd_before


def play(grid, spec, base, data, games, seed, old: bool):
    new_train, new_score = protocol_module.train_runs, protocol_module.evaluate_score
    if old:
        protocol_module.train_runs = dpsgd_before.train_runs
        protocol_module.evaluate_score = dpsgd_before.evaluate_score
    try:
        proto = build_protocol(spec, base, grid.rounds, data)
        scorer = make_scorer(spec, ("lambda_a", "lambda_b"), base, grid.rounds)
        t = time.perf_counter()
        record = run_game(proto, scorer, games, seed, chunk_size=grid.chunk_size, progress=False)
        if spec.device == "cuda":
            torch.cuda.synchronize()
        return record, time.perf_counter() - t
    finally:
        protocol_module.train_runs, protocol_module.evaluate_score = new_train, new_score


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2, help="alternating timings per path (min kept)")
    ap.add_argument(
        "--cells",
        nargs="+",
        default=["ntnv:dirac:1", "ntcv:input:2", "etcv:dirac:1"],
        help="threat:canary:eps_B",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    grid = Table3Grid()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, devices {devices}; "
        f"{args.games} games per timing, min of {args.repeat}; "
        f"digits/logreg, n = {grid.game.train_size}, N = {grid.steps}, E[K] = {grid.rounds.mean:.1f}; "
        f"kernels: {kernels.backend('cpu')} on the CPU"
    )
    print(
        f"{'device':6} {'cell':18} {'before games/s':>15} {'now games/s':>12} {'ratio':>7}  "
        f"scores in law (KS p)"
    )
    for device in devices:
        data = load_data(grid.game)
        for cell in args.cells:
            threat, canary, eps = cell.split(":")
            spec = replace(grid.game, threat=threat, canary=canary, device=device)
            base = grid.base(float(eps))
            times = {False: [], True: []}
            records = {}
            for _ in range(args.repeat):
                for old in (True, False):
                    records[old], dt = play(grid, spec, base, data, args.games, args.seed, old)
                    times[old].append(dt)
            before, now = args.games / min(times[True]), args.games / min(times[False])
            assert np.array_equal(records[True].member, records[False].member)
            law = stats.ks_2samp(np.ravel(records[True].scores), np.ravel(records[False].scores))
            print(
                f"{device:6} {cell:18} {before:15.2f} {now:12.2f} {now / before:6.2f}x  "
                f"{law.pvalue:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
