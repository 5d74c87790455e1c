"""Benchmark: the reduced-game engine against a straightforward vectorised baseline.

All play the same game (K ~ xi, release the max of K draws of N(b mu, 1)) in this process.
The baseline draws all K normals of every trial (numpy, no Python loop per trial) and reduces
them with np.maximum.reduceat; the engine's version 1 streams drew K and then the max as
F^-1(U^(1/K)) (two draws per trial, K from numpy's samplers); version 2 (the engine now,
`selection.winner_tail`) draws the winner's tail from one uniform by the pgf inverse. Prints
trials per second of each and the ratios at TNB(eta=0, nu=0.01) (E[K] ~ 21.5) and at the
geometric law nu = 1e-3 (E[K] = 1000), then times 10^7 engine trials on all cores (peak RSS).

    python benchmarks/bench_game.py [--quick]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from scipy.special import ndtri

from attacks.proxies import make_proxy
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import TruncatedNegativeBinomial
from auditsel.selection import GaussianWinner, max_uniform_complement


class BaselineProtocol:
    """Draws all k normals per trial; memory bounded by processing `block` trials at a time."""

    def __init__(self, winner, block=20_000):
        self.winner, self.block = winner, block

    def release(self, member, rng):
        out = np.empty(len(member))
        for start in range(0, len(member), self.block):
            m = member[start : start + self.block]
            k = self.winner.law.sample(len(m), rng)
            draws = rng.standard_normal(int(k.sum()))
            offsets = np.concatenate([[0], np.cumsum(k)[:-1]])
            out[start : start + len(m)] = np.maximum.reduceat(draws, offsets) + m * self.winner.mu
        return out


class StreamsV1:
    """The engine's version 1 streams: K ~ xi, then 1 - max of K uniforms = -expm1(log U / K)."""

    def __init__(self, winner):
        self.winner = winner

    def release(self, member, rng):
        k = self.winner.law.sample(len(member), rng)
        w = max_uniform_complement(k, rng)
        with np.errstate(divide="ignore"):
            x = -ndtri(w)
        return np.where(k > 0, x + member * self.winner.mu, -np.inf)


def trials_per_second(protocol, proxy, trials, jobs=1):
    start = time.perf_counter()
    run_game(protocol, proxy, trials, seed=0, execution=ExecutionOptions(jobs=jobs))
    return trials / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer trials")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    base = GaussianBase.from_epsilon(1.0, 1e-5)
    print(
        f"{'law':<22}{'E[K]':>7}{'engine/s':>13}{'v1/s':>13}{'baseline/s':>13}"
        f"{'engine/v1':>11}{'engine/baseline':>17}"
    )
    for name, law, n_engine, n_base in (
        ("TNB(eta=0, nu=0.01)", TruncatedNegativeBinomial(0.0, 0.01), 2_000_000, 500_000),
        ("geometric nu=1e-3", TruncatedNegativeBinomial(1.0, 1e-3), 2_000_000, 20_000),
    ):
        winner = GaussianWinner(base, law)
        proxy = make_proxy("sample", winner)
        engine = trials_per_second(winner, proxy, n_engine // scale)
        v1 = trials_per_second(StreamsV1(winner), proxy, n_engine // scale)
        baseline = trials_per_second(BaselineProtocol(winner), proxy, n_base // scale)
        print(
            f"{name:<22}{law.mean:>7.1f}{engine:>13,.0f}{v1:>13,.0f}{baseline:>13,.0f}"
            f"{engine / v1:>11.2f}{engine / baseline:>17.1f}"
        )
    winner = GaussianWinner(base, TruncatedNegativeBinomial(0.0, 0.01))
    trials = 10_000_000 // scale
    start = time.perf_counter()
    run_game(
        winner, make_proxy("sample", winner), trials, seed=0, execution=ExecutionOptions(jobs=2)
    )
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{trials:,} engine trials with jobs=2: {seconds:.2f} s "
        f"({trials / seconds:,.0f} trials/s); peak RSS of this process {rss:.0f} MiB"
    )


if __name__ == "__main__":
    main()
