"""How often each threshold rule over-claims (eps_L > true eps), on settings with a known eps.

    python benchmarks/rule_overclaims.py [--reps 500] [--trials 5000] [--delta 0.05] [--mu 1]

Prints, per setting and rule, the fraction of independent audits whose eps_L exceeds the exact
epsilon at --delta (default 0.05; likelihood-ratio proxy, 95% confidence). Valid rules must stay below
~5%; `best` (max over all thresholds) and `point` (no confidence interval) are optimistic.
"""

import argparse

import numpy as np

from attacks.proxies import make_proxy
from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.validity import Repetitions, overclaim_rates
from auditsel.mechanisms import FiniteOutputBase, GaussianBase
from auditsel.rounds import Point, TruncatedNegativeBinomial
from auditsel.selection import FiniteWinner, GaussianWinner


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--mu", type=float, default=1.0)
    args = parser.parse_args()
    delta, mu = args.delta, args.mu
    settings = {
        f"Gaussian mu={mu:g}, k=1": (
            GaussianWinner(GaussianBase(mu), Point(1)),
            np.linspace(-8, 8, 20),
        ),
        f"reduced mu={mu:g}, TNB(0, 0.05)": (
            GaussianWinner(GaussianBase(mu), TruncatedNegativeBinomial(0.0, 0.05)),
            np.linspace(-8, 8, 20),
        ),
        "Example 1": (
            FiniteWinner(FiniteOutputBase.example1(), TruncatedNegativeBinomial(1.0, 1e-3)),
            np.array([-10.0, -2.0, 0.0, 2.0]),
        ),
    }
    rules = ("split", "bonferroni", "bonferroni_all", "multisplit", "best", "point")
    print(f"{args.reps} audits of {args.trials:,} games each, delta = {delta:g}, 95% confidence")
    print(f"{'setting':<30}{'true eps':>9}" + "".join(f"{r:>16}" for r in rules))
    for name, (winner, grid) in settings.items():
        truth = exact_epsilon(winner, delta)
        cov = overclaim_rates(
            winner,
            make_proxy("likelihood_ratio", winner),
            truth,
            delta,
            Repetitions(args.reps, args.trials),
            rules=rules,
            threshold_grid=grid,
        )
        print(f"{name:<30}{truth:>9.3f}" + "".join(f"{cov[r].rate:>16.1%}" for r in rules))
        print(f"{'  mean eps_L':<30}{'':>9}" + "".join(f"{cov[r].mean_eps:>16.3f}" for r in rules))


if __name__ == "__main__":
    main()
