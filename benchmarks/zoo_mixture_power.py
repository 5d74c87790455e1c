"""What a final-model score of a Poisson-sampled canary can certify: the bug zoo's estimate.

    python benchmarks/zoo_mixture_power.py 0.5 0.86 --games 4000 8000

A score whose shift is m x D standard deviations when the canary is in m of the run's steps
(m ~ Binomial(STEPS, RATE): the digits loops of `auditsel.reproductions.bugzoo.hand_dpsgd`,
5 steps at rate 0.2) and 0 without it, N(0, 1) noise either way. For each D and each number of
games per canary (half of them with the canary in) it prints the largest eps over thresholds
of ln((TPR_lower - delta) / FPR_upper) at the expected counts, with Clopper-Pearson limits at
the route's share of 5% (4 looks, 2 canaries, 4 thresholds, two sides): about what the
early-stopping audit's last look certifies with a score of that signal (docs/findings/bugzoo.md).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

STEPS, RATE, DELTA = 5, 0.2, 1e-5
ALPHA = 0.05 / 4 / 2 / 4  # looks, canaries, thresholds


def certified(shift: float, games: int) -> float:
    n = games // 2
    steps = np.arange(STEPS + 1)
    law = stats.binom.pmf(steps, STEPS, RATE)
    best = 0.0
    for t in np.arange(1.0, 5.0, 0.05):
        fpr = stats.norm.sf(t)
        tpr = float(np.sum(law * stats.norm.sf(t - steps * shift)))
        upper = stats.beta.ppf(1 - ALPHA / 2, fpr * n + 1, n - fpr * n)
        lower = stats.beta.ppf(ALPHA / 2, tpr * n, n - tpr * n + 1)
        if lower > DELTA:
            best = max(best, float(np.log((lower - DELTA) / upper)))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shifts", nargs="+", type=float, help="D: standard deviations a step")
    parser.add_argument("--games", nargs="+", type=int, default=[4000, 8000])
    args = parser.parse_args()
    for shift in args.shifts:
        for games in args.games:
            print(
                f"shift {shift} per step in, {games:,} games per canary: eps {certified(shift, games):.3f}"
            )


if __name__ == "__main__":
    main()
