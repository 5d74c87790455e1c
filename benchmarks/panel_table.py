"""The estimator panel on three cases beside the truth (and jax_privacy's estimators when the
optional `jax-privacy` package is installed): prints the markdown table of docs/explanation/lower-bounds.md.

    python benchmarks/panel_table.py

Cases (seeded, delta = 1e-5, 95%): a Gaussian (mu = 1.5, 40,000 games); a tuning release, the
winner of K ~ 1 + Poisson(9) Gaussian runs with shift 0.6 (40,000 games); a small sample
(the Gaussian with 500 games). The truth is the exact eps of each pair.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.estimators import estimator_panel
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import FinitePmf, Point
from auditsel.selection import GaussianWinner

DELTA = 1e-5


def one_plus_poisson(mean):
    pmf = np.r_[0.0, stats.poisson.pmf(np.arange(0, 80), mean)]
    return FinitePmf({k: float(v) for k, v in enumerate(pmf / pmf.sum()) if v > 0})


def jax_numbers(s, m):
    try:
        from jax_privacy import auditing
    except ImportError:
        return None
    a = auditing.CanaryScoreAuditor(s[m == 1], s[m == 0])
    return {
        "cp_split": a.epsilon_clopper_pearson(
            0.05, DELTA, False, threshold_strategy=auditing.Split(seed=0)
        ),
        "cp_multisplit": a.epsilon_clopper_pearson(
            0.05, DELTA, False, threshold_strategy=auditing.MultiSplit(num_samples=21, seed=0)
        ),
        "cp_bonferroni_all": a.epsilon_clopper_pearson(0.05, DELTA, False),
        "gdp_fit": a.epsilon_from_gdp(0.05, DELTA),
        "auroc_hull": a.attack_auroc(),  # jax_privacy's AUROC is the ROC hull's
    }


def main():
    cases = {
        "Gaussian mu = 1.5, 40,000 games": (GaussianWinner(GaussianBase(1.5), Point(1)), 40_000),
        "tuning release, K ~ 1 + Poisson(9), shift 0.6, 40,000 games": (
            GaussianWinner(GaussianBase(0.6), one_plus_poisson(9)),
            40_000,
        ),
        "small sample: Gaussian mu = 1.5, 500 games": (
            GaussianWinner(GaussianBase(1.5), Point(1)),
            500,
        ),
    }
    rows = [
        "cp_split",
        "cp_multisplit",
        "cp_bonferroni",
        "cp_bonferroni_all",
        "bayesian",
        "best_threshold",
        "gdp_fit",
        "selection_fit",
        "auroc",
        "auroc_hull",
    ]
    results, truths, jax = {}, {}, {}
    for name, (w, n) in cases.items():
        rng = np.random.default_rng(1)
        m = rng.integers(0, 2, n).astype(np.int8)
        s = w.release(m, rng)
        truths[name] = exact_epsilon(w, DELTA)
        results[name] = estimator_panel(s, m, DELTA, law=w.law)
        jax[name] = jax_numbers(s, m)
    names = list(cases)
    print("| estimator | label | " + " | ".join(names) + " |")
    print("|---|---|" + "---:|" * len(names))
    print("| **exact eps (truth)** | | " + " | ".join(f"**{truths[c]:.3f}**" for c in names) + " |")
    for r in rows:
        cells = []
        for c in names:
            e = results[c][r]
            cell = f"{e.value:.3f}"
            if r == "gdp_fit" and not e.detail["gdp_fit_ok"]:
                cell += " (rejected)"
            if jax[c] is not None and r in jax[c]:
                cell += f" (jax {jax[c][r]:.3f})"
            cells.append(cell)
        label = results[names[0]][r].label
        print(f"| {r} | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
