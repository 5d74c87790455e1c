"""`winner_bucket_bounds` encloses the TRUE winner's bucket law of the attack's score (issue 37:
`winner_bucket_laws`' far-tail entries of a composed run are FFT round-off, 4.2e-17 where the
truth is far smaller): against the law computed independently, with no FFT (the step laws
convolved directly: nonnegative terms, so every entry, tails included, to a relative error of
a few hundred u; the winner's law from the pgf in mpmath), every bucket, on both sides."""

import mpmath
import numpy as np
import pytest

from auditsel.accounting.attack import (
    _pair_run,
    attack,
    winner_bucket_bounds,
)
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase
from auditsel.rounds import Poisson

mpmath.mp.prec = 120
H = 0.01  # a coarser label step than the default (1e-3): ten times fewer step buckets


def direct_run(pair) -> tuple[np.ndarray, list[np.ndarray]]:
    """(labels, [law on X, law on X']) of the labelled run by direct convolution."""
    step, steps = _pair_run(pair, H)
    laws = []
    for v in (step.p, step.q):
        v = np.asarray(v, dtype=float) / np.sum(v)
        run = v
        for _ in range(steps - 1):
            run = np.convolve(run, v)
        laws.append(run)
    labels = (steps * step.start + np.arange(len(laws[0]))) * step.step
    return labels, laws


def winner_masses(bucket_masses: np.ndarray, ranks, law: Poisson) -> list:
    """G(F(L u {j})) - G(F(L)) per bucket in mpmath (Poisson K), buckets in increasing rank (ties by
    index)."""
    order = np.lexsort((np.arange(len(ranks)), np.asarray(ranks, dtype=float)))
    lam = mpmath.mpf(law.mean)

    def pgf(z):  # Poisson's pgf
        return mpmath.exp(lam * (z - 1))

    out = [mpmath.mpf(0)] * len(order)
    acc = mpmath.mpf(0)
    for j in order:
        nxt = acc + mpmath.mpf(float(bucket_masses[j]))
        out[j] = pgf(nxt) - pgf(acc)
        acc = nxt
    return out


@pytest.mark.parametrize(
    "pair, law",
    [
        (DpsgdBase(0.8, 3, 0.2), Poisson(5.0)),
        (DpsgdBase(1.0, 2, 0.1), Poisson(12.0)),
    ],
)
def test_bounds_enclose_the_directly_computed_winner_law(pair, law):
    # the tails cut at the 1e-20 quantiles (not at the delta-dependent ones): far-tail buckets
    score = attack(pair, law, 1e-5, label_step=H, tail=1e-20).score
    labels, laws = direct_run(pair)
    buckets = score.bucket(labels)
    bounds = winner_bucket_bounds(pair, law, score, label_step=H)
    for side in (0, 1):
        masses = np.bincount(buckets, laws[side], len(score.ranks))
        truth = np.array([float(v) for v in winner_masses(masses, score.ranks, law)])
        lo, hi = bounds[side]
        slack = 1e-9 * truth + 1e-28  # the direct law's own rounding; the window's 1e-30 tail
        assert np.all(lo <= truth + slack), np.max(lo - truth)
        assert np.all(truth <= hi + slack), np.max(truth - hi)
        assert np.all(lo <= hi)
        # tight where the law has its mass; point values of FFT noise are not read as mass
        bulk = truth > 1e-6
        assert np.all((hi - lo)[bulk] <= 1e-3 * truth[bulk])
        assert np.any(truth < 1e-12)  # tail buckets are checked too


def test_finite_pair_in_output_units():
    pair, law = FiniteOutputBase((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), Poisson(3.0)
    score = attack(pair, law, 1e-5, scores="monotone").score
    assert score is not None and score.unit == "output"
    bounds = winner_bucket_bounds(pair, law, score)
    for side in (0, 1):
        masses = np.bincount(score.bucket(np.arange(3)), pair.law(side), len(score.ranks))
        truth = np.array([float(v) for v in winner_masses(masses, score.ranks, law)])
        lo, hi = bounds[side]
        assert np.all(lo <= truth) and np.all(truth <= hi)
        assert np.all(hi - lo <= 1e-10 * hi)
