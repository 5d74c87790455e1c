"""The GDP fit of an audit's scores: a heuristic eps_L that holds if the Gaussian trade-off
model does, with a goodness-of-fit check.

GDP fit ([NHSBTJCT23]; heuristic, `gdp_fit`): mu_L = max over every threshold and both
directions of Phi^-1(1 - FP_u(t)) - Phi^-1(FN_u(t)), with limits at two-sided level
alpha / (2 n) (with the lower limits of the goodness-of-fit check, 4 n one-sided events of the
order-statistic argument of `auditsel.auditing.lower`, so they hold at every threshold at
once), converted to eps at delta with the Gaussian profile ([DRS22] Corollary 2.13).
`gdp_fit_ok` is false when the data reject the model at level alpha: some threshold's interval
[mu_lo(t), mu_hi(t)] (mu_hi from the lower limits) lies wholly below mu_L.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from auditsel.auditing.clopper_pearson import cp_limits
from auditsel.auditing.sorted_scores import SortedPart, SortedScores
from auditsel.auditing.threshold_search import CandidateRows, search_both, search_rows
from auditsel.mechanisms import gaussian_epsilon
from auditsel.numerics import FloatArray, check_deltas

#: the user-facing names (the other functions are building blocks of the audits)


def mu_objective(fp_u: ArrayLike, fn_u: ArrayLike) -> FloatArray:
    """Phi^-1(1 - FP) - Phi^-1(FN): decreasing in both (-inf where FP = 1)."""
    with np.errstate(invalid="ignore"):
        mu = ndtri(1 - np.asarray(fp_u, dtype=float)) - ndtri(np.asarray(fn_u, dtype=float))
    return np.where(np.isnan(mu), -np.inf, mu)


def minus_mu_objective(fp_l: ArrayLike, fn_l: ArrayLike) -> FloatArray:
    """-(Phi^-1(1 - FP) - Phi^-1(FN)) at lower limits: increasing in both (no information,
    -inf, where the interval is unbounded)."""
    with np.errstate(invalid="ignore"):
        mu = ndtri(1 - np.asarray(fp_l, dtype=float)) - ndtri(np.asarray(fn_l, dtype=float))
    return np.where(np.isnan(mu), -np.inf, -mu)


def gdp_mu(fp_upper: float, fn_upper: float) -> float:
    """mu_L = Phi^-1(1 - FP) - Phi^-1(FN), clipped at 0 ([NHSBTJCT23])."""
    return max(float(ndtri(1 - fp_upper) - ndtri(fn_upper)), 0.0)


def _gdp_epsilon(mu: float, delta: float) -> float:
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    return gaussian_epsilon(mu, delta) if delta > 0 else math.inf


@dataclass(frozen=True)
class GdpFit:
    """The GDP fit over every threshold (module docstring): eps at delta, mu_L (and
    `mu_interval_max_low`, the same before clipping at 0), the goodness of fit (`ok`; when the
    model is rejected, `mu_interval_min_high` is a threshold's mu_hi below mu_L, else +inf),
    and the threshold where mu_L is reached."""

    eps: float
    mu: float
    ok: bool
    mu_interval_max_low: float
    mu_interval_min_high: float
    threshold: float | None
    direction: str


def gdp_over_rows(
    above: CandidateRows, below: CandidateRows, n0: int, n1: int, n: int, alpha: float, delta: float
) -> GdpFit:
    """gdp_fit over candidate rows: mu_L's maximum in '>' over `above` and '<=' over `below`;
    the goodness-of-fit minimum of mu_hi over the other rows, in the direction of the
    maximum."""
    a = alpha / (2 * n)
    limits = (cp_limits(n0, a), cp_limits(n1, a))
    flip, rows, (i, lo, _, _) = search_both(above, below, n0, n1, limits, mu_objective)
    l0, l1 = cp_limits(n0, a, upper=False), cp_limits(n1, a, upper=False)
    gof = search_rows(
        above if flip else below,
        n0,
        n1,
        l0,
        l1,
        minus_mu_objective,
        flip=flip,
        increasing=True,
        stop_above=-lo if math.isfinite(lo) else math.inf,
        floor=-lo if math.isfinite(lo) else -math.inf,
    )
    hi = -gof[1]  # +inf when no threshold's interval lies below mu_L
    mu = max(lo, 0.0)
    return GdpFit(
        eps=_gdp_epsilon(mu, delta),
        mu=mu,
        ok=bool(hi >= lo),
        mu_interval_max_low=lo,
        mu_interval_min_high=hi,
        threshold=float(rows.threshold(np.array([i]))[0]) if i >= 0 else None,
        direction="<=" if flip else ">",
    )


def gdp_fit(sorted_scores: SortedScores, alpha: float, delta: float) -> GdpFit:
    """The GDP fit of the games of `sorted_scores` over every threshold at significance alpha."""
    delta = float(check_deltas(delta)[0])
    ss = sorted_scores

    def compute():
        s0, s1 = ss.by_coin()
        p0, p1 = SortedPart(s0), SortedPart(s1)
        at0, at1 = CandidateRows.on(p0, p0, p1), CandidateRows.on(p1, p0, p1)
        # mu_L decreases in the counts: '>' at b = 0 scores, '<=' at b = 1 scores; mu_hi
        # increases: the other way round
        return gdp_over_rows(at0, at1, len(s0), len(s1), ss.n, alpha, delta)

    return ss.memo(("gdp", alpha, delta), compute)
