"""What the zoo's authors claim, and what their pipelines really cost.

* `monotone_claim(base, rounds, delta)`: the claim of an author who accounts one run with `base`
  (a DpsgdBase, `OpacusRun.base`, or a GaussianBase) and the tuning run with the stated law of K,
  following [XWW24]: the tightest value of auditsel's interval under [XWW24]'s monotone-score
  assumption (`auditsel.accounting.interval.tuning_epsilon(..., assume="monotone_score")`). At
  sample rate 1 that is [XWW24]'s exact reduced game, which holds only for a selection score
  monotone in the reduced draw: for any score the tuning run's epsilon can be larger
  (docs/findings/any-score.md), so an audit that does not refute such a claim does not make it
  a guarantee. Below sample rate 1 it is the tightest rigorous bound.
* `any_score_interval(base, rounds, delta)`: what the tuning run really costs for any selection
  score: auditsel's interval [attack value, tightest rigorous bound], the zoo's "correct eps";
  where the attack overflows (a base far from private) the lower end is None.
* `released_runs_epsilon(mu, rounds, delta)`: the exact epsilon of releasing *every* one of
  K ~ rounds runs, each N(0, 1) vs N(mu, 1) (K is seen and does not depend on the data):
  delta(eps) = sum_k P[K = k] delta_{mu sqrt(k)}(eps).
"""

from __future__ import annotations

import math

import numpy as np

from auditsel.accounting.interval import IntervalCrossedError, rigorous_values, tightest_of
from auditsel.accounting.interval import tuning_epsilon as interval_tuning_epsilon
from auditsel.mechanisms import gaussian_delta
from auditsel.numerics import bisect, check_deltas
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw


def monotone_claim(base: MechanismPair, rounds: RoundsLaw, delta: float) -> float:
    """The author's claim for (base, rounds) at delta: the upper end of the interval under
    [XWW24]'s monotone-score assumption (module docstring)."""
    return interval_tuning_epsilon(base, rounds, delta, assume="monotone_score").epsilon


def any_score_interval(
    base: MechanismPair, rounds: RoundsLaw, delta: float
) -> tuple[float | None, float]:
    """(lower, upper): the tuning run's epsilon for any score lies between them (module
    docstring; lower None where the attack overflows)."""
    try:
        interval = interval_tuning_epsilon(base, rounds, delta).interval
    except IntervalCrossedError:  # the attack overflowed (inf) on a base far from private
        return None, float(tightest_of(rigorous_values(base, rounds, delta)).epsilon)
    return float(interval.lower), float(interval.upper)


def released_runs_epsilon(mu: float, rounds: RoundsLaw, delta: float, tail: float = 1e-16) -> float:
    """Exact eps at delta of the release of all K ~ rounds runs, each Gaussian with shift mu
    (the P[K > k_max] < tail of the law, at most `tail`, is added to delta as if it leaked all).
    delta must be in [0, 1); at delta = 0 the answer is inf (a Gaussian release is not pure DP)."""
    delta = float(check_deltas(delta)[0])
    if delta == 0.0 or delta <= tail:
        return math.inf  # every eps leaves delta_{mu sqrt(k)}(eps) > 0 (and the tail) above it
    k_max = int(rounds.mean + 20 * math.sqrt(rounds.mean) + 50)
    while True:
        ks = np.arange(1, k_max + 1)
        weights = rounds.pmf(ks)
        rest = max(1.0 - float(rounds.p_zero) - float(weights.sum()), 0.0)
        if rest <= tail:
            break
        k_max *= 2

    def excess(eps: float) -> float:
        leak = sum(w * float(gaussian_delta(mu * math.sqrt(k), eps)) for k, w in zip(ks, weights))
        return leak + rest - delta

    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return bisect(excess, 0.0, hi) if excess(0.0) > 0 else 0.0
