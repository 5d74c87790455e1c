"""Real DP-SGD games per second: this tree against a pinned baseline commit (asv-style).

Each cell of the committed Table-3 grid setting (digits, logistic regression, 500 training
examples, N = 20 full-batch steps, C = 1, learning rates {1e-3, 3e-3, 1e-2, 3e-2},
xi = TNB(0, 0.01) so E[K] = 21.5, sigma calibrated to eps_B) plays the same games through the
engine in two trees, alternating `--repeat` times: the working tree, and the baseline commit
(default 794a0de, the last commit before the speed work of the real-data games: per-run
einsums, torch's per-run MT19937 generators). Each tree runs in its own process with its own
package on the path (`baselines.commits`: the commit's files, helpers and all, so the baseline
cannot drift with today's code), and each process times the games only (`run_game`, after the
data, protocol and scorer are built). It prints games/s of both and their ratio.

The two trees draw their noise from different generators (today: counter-based Philox), so
their scores agree in law, not value: the last columns are the two-sample Kolmogorov-Smirnov
p-values of the released scores of each proxy (lambda_a, lambda_b) and class (b = 0, b = 1). The header says which kernels
served today's CPU runs (numba; the torch kernels serve GPUs).

    python benchmarks/bench_dpsgd_games.py                          # 3 cells, 100 games each
    python benchmarks/bench_dpsgd_games.py --games 200 --repeat 3 --cells ntnv:dirac:1 etcv:dirac:1
    python benchmarks/bench_dpsgd_games.py --baseline c97d10a      # another baseline commit

On a CUDA machine the same cells are also timed on the GPU (rows marked cuda). The baseline
runs in this environment (today's numpy and torch); a commit that needs other versions may not.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from baselines.commits import ROOT, checkout, run_in
from scipy import stats

from auditsel.executor import ExecutionOptions

BASELINE = "794a0deb176f35df88bb31f3578174927a793725"


def _in_tree(module: str) -> bool:
    """Whether the tree on the path has `module` (its file, not what an import would find: an
    editable install of another tree answers for the modules this tree lacks)."""
    import auditsel  # the tree's package (see play_cell)

    path = Path(auditsel.__file__).parent.joinpath(*module.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def play_cell(cell: dict) -> dict:
    """Worker: one cell's games in the tree on the path; games/s, and the scores to `cell["out"]`.

    Reads the tree's own API: the Table-3 grid, `attacks.dpsgd_game`, and the engine (in
    `auditsel.games.engine` since the layout by layer, `auditsel.game` before)."""
    # imported here: the package is the tree's on this process's path (the parent imports none)
    from attacks.dpsgd_game import build_protocol, load_data, make_scorer
    from auditsel.reproductions.table3 import Table3Grid

    engine = importlib.import_module(
        "auditsel.games.engine" if _in_tree("auditsel.games.engine") else "auditsel.game"
    )
    grid = Table3Grid()
    spec = replace(grid.game, threat=cell["threat"], canary=cell["canary"], device=cell["device"])
    base = grid.base(cell["eps"])
    proto = build_protocol(spec, base, grid.rounds, load_data(grid.game))
    scorer = make_scorer(spec, ("lambda_a", "lambda_b"), base, grid.rounds)
    # two games first: numba compiles or loads its cache, torch warms up (not timed)
    engine.run_game(proto, scorer, 2, cell["seed"] + 1)
    t = time.perf_counter()
    record = engine.run_game(
        proto,
        scorer,
        cell["games"],
        cell["seed"],
        execution=ExecutionOptions(chunk_size=grid.chunk_size),
    )
    if cell["device"] == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    np.savez(cell["out"], scores=record.scores, member=record.member)
    kernels = "torch"
    if _in_tree("auditsel.dpsgd.kernels"):
        module = importlib.import_module("auditsel.dpsgd.kernels")
        kernels = module.backend("cpu") if hasattr(module, "backend") else "compiled C"
    return {
        "games_per_s": cell["games"] / seconds,
        "kernels": kernels,
        "setting": f"digits/logreg, n = {grid.game.train_size}, N = {grid.steps}, "
        f"E[K] = {grid.rounds.mean:.1f}",
    }


def time_cell(tree: Path, cell: dict, out: Path) -> tuple[dict, np.lib.npyio.NpzFile]:
    """`play_cell` in a process with `tree`'s package on the path."""
    cell = {**cell, "out": str(out)}
    done = run_in(tree, [sys.executable, __file__, "--worker", json.dumps(cell)])
    if done.returncode != 0:
        raise SystemExit(f"the games failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1]), np.load(out)


def ks_by_class(a, b) -> str:
    """KS p-values of two records' scores, per proxy (lambda_a, lambda_b) and class (b = 0, 1)."""
    ps = []
    for column in (0, 1):
        for coin in (0, 1):
            x = a["scores"][a["member"] == coin, column]
            y = b["scores"][b["member"] == coin, column]
            ps.append(stats.ks_2samp(x, y).pvalue)
    return "  ".join(f"{p:.3f}" for p in ps)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2, help="alternating timings per tree (max kept)")
    ap.add_argument(
        "--cells",
        nargs="+",
        default=["ntnv:dirac:1", "ntcv:input:2", "etcv:dirac:1"],
        help="threat:canary:eps_B",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", default=BASELINE, help="the baseline commit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(play_cell(json.loads(args.worker))))
        return

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, devices {devices}; "
        f"{args.games} games per timing, best of {args.repeat}; baseline {args.baseline[:10]}"
    )
    header = False
    with checkout(args.baseline) as base, tempfile.TemporaryDirectory() as tmp:
        trees = {"before": base, "now": ROOT}
        for device in devices:
            for cell_name in args.cells:
                threat, canary, eps = cell_name.split(":")
                cell = dict(
                    threat=threat,
                    canary=canary,
                    eps=float(eps),
                    device=device,
                    games=args.games,
                    seed=args.seed,
                )
                speed = {name: 0.0 for name in trees}
                records = {}
                for i in range(args.repeat):
                    for name, tree in trees.items():
                        out = Path(tmp) / f"{name}-{i}.npz"
                        info, records[name] = time_cell(tree, cell, out)
                        speed[name] = max(speed[name], info["games_per_s"])
                        if name == "now" and not header:
                            print(f"{info['setting']}; kernels: {info['kernels']} on the CPU")
                            print(
                                f"{'device':6} {'cell':18} {'before games/s':>15} "
                                f"{'now games/s':>12} {'ratio':>7}  KS p: lambda_a b=0, b=1, lambda_b b=0, b=1"
                            )
                            header = True
                print(
                    f"{device:6} {cell_name:18} {speed['before']:15.2f} {speed['now']:12.2f} "
                    f"{speed['now'] / speed['before']:6.2f}x  "
                    f"{ks_by_class(records['before'], records['now'])}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
