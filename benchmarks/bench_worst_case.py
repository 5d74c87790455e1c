"""Benchmark: the worst-case DP-SGD game (`game.kind: dpsgd_worst_case`) against a plain numpy loop.

Both play the same game in this process (K ~ xi runs of N steps x_i = b B_i + sigma Z_i, the
highest-LLR run released). The baseline loops over trials in Python, drawing each trial's K x N
steps with numpy in float64; the engine's sampler is vectorised over trials, runs and steps in
float32 blocks. Prints games/s of both and their ratio, and the engine's cost per Gaussian step
(E[K] N steps per game) across N and laws, which stays flat if the cost is linear in E[K] N.
Then times 10^7 games of a 10-step single run (k = 1) through the engine with --jobs.

    python benchmarks/bench_worst_case.py [--quick] [--jobs 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attacks.proxies import SampleProxy
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.games.worst_case import DpsgdWorstCase, step_log_likelihood_ratio
from auditsel.rounds import Point, TruncatedNegativeBinomial, TwoPoint


def loop_release(game, member, rng):
    out = np.empty(len(member))
    ks = game.law.sample(len(member), rng)
    for i, (b, k) in enumerate(zip(member, ks)):
        if k == 0:
            out[i] = -np.inf
            continue
        x = game.noise_multiplier * rng.standard_normal((k, game.steps)) + b * (
            rng.random((k, game.steps)) < game.sample_rate
        )
        out[i] = (
            step_log_likelihood_ratio(x, game.noise_multiplier, game.sample_rate).sum(axis=1).max()
        )
    return out


def rate(fn, games):
    start = time.perf_counter()
    fn()
    return games / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    rng = np.random.default_rng(0)
    print(
        f"{'N':>5} {'law':>22} {'E[K]N':>8} {'engine games/s':>15} {'loop games/s':>13} {'ratio':>6} "
        f"{'ns per step':>11}"
    )
    for steps, law in [
        (1, Point(1)),
        (10, Point(1)),
        (100, Point(1)),
        (1000, Point(1)),
        (10, TruncatedNegativeBinomial(0.0, 0.1)),
        (10, TwoPoint(10, 0.5)),
    ]:
        game = DpsgdWorstCase(1.0, steps, 0.1, law)
        cost = game.mean_step_draws
        games = max(2000, int(4e7 / cost) // scale)
        member = rng.integers(0, 2, games, dtype=np.int8)
        engine = rate(lambda: game.release(member, rng), games)
        few = member[: max(200, min(games, int(2e5 / cost)) // scale)]
        loop = rate(lambda: loop_release(game, few, rng), len(few))
        print(
            f"{steps:>5} {law.kind + str(law.params()):>22} {cost:>8.3g} {engine:>15,.0f} {loop:>13,.0f} "
            f"{engine / loop:>6.1f} {1e9 / (engine * cost):>11.1f}"
        )
    trials = 10_000_000 // scale
    game = DpsgdWorstCase(1.0, 10, 0.1, Point(1))
    start = time.perf_counter()
    run_game(game, SampleProxy(), trials, 0, execution=ExecutionOptions(jobs=args.jobs))
    print(
        f"{trials:,} games of a 10-step single run (sigma 1, tau 0.1) with --jobs {args.jobs}: "
        f"{time.perf_counter() - start:.1f} s (the game only; `auditsel run` adds the bounds, audit and plots)"
    )


if __name__ == "__main__":
    main()
