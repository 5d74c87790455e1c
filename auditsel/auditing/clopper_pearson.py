"""Clopper-Pearson limits of a binomial proportion, exact and cheaply bounded.

Contract. `clopper_pearson_upper(count, nobs, alpha)` is the upper end of the two-sided
Clopper-Pearson interval at level alpha, the (1 - alpha/2) quantile of Beta(count + 1,
nobs - count) (1 at count = nobs), and `clopper_pearson_lower` the lower end, the alpha/2
quantile of Beta(count, nobs - count + 1) (0 at count = 0): the numbers of statsmodels'
`proportion_confint(method="beta")` (tests/auditing/test_lower.py compares them), vectorised.
`CpLimits.bound(count)` is never better for a search than the exact limit (at most the upper
limit, at least the lower one) and within one count of it (Zubkov and Serov 2013).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betainccinv, betaincinv, ndtri, xlogy

#: the user-facing names (the other functions are building blocks of the audits)


def clopper_pearson_upper(count: ArrayLike, nobs: int, alpha: float) -> NDArray[np.float64]:
    """Upper limit of the two-sided Clopper-Pearson interval at level alpha: the (1 - alpha/2)
    quantile of Beta(count + 1, nobs - count), as statsmodels' `proportion_confint(method="beta")`
    computes it (called here through scipy.special without its per-call overhead); vectorised."""
    counts = np.asarray(count)
    if np.size(counts) == 0:
        return np.zeros(np.shape(counts))
    full = counts >= nobs
    c = np.where(full, nobs - 1, counts).astype(float)
    upper = betainccinv(c + 1, nobs - c, alpha / 2)
    return np.where(full, 1.0, upper)


def clopper_pearson_lower(count: ArrayLike, nobs: int, alpha: float) -> NDArray[np.float64]:
    """Lower limit of the two-sided Clopper-Pearson interval at level alpha: the alpha/2
    quantile of Beta(count, nobs - count + 1); vectorised."""
    counts = np.asarray(count)
    if np.size(counts) == 0:
        return np.zeros(np.shape(counts))
    empty = counts <= 0
    c = np.where(empty, 1, counts).astype(float)
    lower = betaincinv(c, nobs - c + 1, alpha / 2)
    return np.where(empty, 0.0, lower)


class CpLimits:
    """Clopper-Pearson limits of counts out of `nobs` at two-sided level `a`: exact on demand
    (`exact`), and a cheap bound that is never better for a search (`bound`: at most the upper
    limit, at least the lower limit) and within one count of it.

    The bound is Zubkov and Serov's (2013) universal inequality for the binomial cdf F (from
    Alfers and Dinges 1984): F(k - 1) <= Phi(sign(k - n p) sqrt(2 n H(k/n, p))) <= F(k), with H
    the Kullback-Leibler divergence of Bernoulli(k/n) from Bernoulli(p). At the upper limit
    p = u, F(k) = a/2, so H(k/n, u) >= z^2 / (2 n) with z = Phi^-1(1 - a/2): u is at least the
    root above k/n of H(k/n, .) = z^2 / (2 n); likewise the lower limit is at most the root below
    k/n. The roots are bracketed from the safe side (`_kl_root_below`)."""

    def __init__(self, nobs: int, a: float, upper: bool) -> None:
        self.nobs, self.a, self.upper = nobs, a, upper
        z = -float(ndtri(a / 2))  # Phi^-1(1 - a/2), accurate for tiny a
        self.c = z * z / (2 * max(nobs, 1))
        self.edge = -math.expm1(math.log(a / 2) / max(nobs, 1))  # exact limit at count 0

    def exact(self, count: ArrayLike) -> NDArray[np.float64]:
        if self.upper:
            return clopper_pearson_upper(count, self.nobs, self.a)
        return clopper_pearson_lower(count, self.nobs, self.a)

    def bound(self, count: ArrayLike) -> NDArray[np.float64]:
        """A limit never better than the exact one at `count`: lower for upper limits, higher
        for lower limits."""
        x = np.asarray(count, dtype=float) / max(self.nobs, 1)
        return _limit_bounds(self.upper, x, self.c, self.edge)


def _limit_bounds(
    upper: bool,
    x: NDArray[np.float64],
    c: float | NDArray[np.float64],
    edge: float | NDArray[np.float64],
) -> NDArray[np.float64]:
    """`CpLimits.bound` at rates x (c and edge: scalars or arrays like x)."""
    if upper:  # exact at 0 (1 - (a/2)^(1/n)) and at nobs (1)
        return np.where(x >= 1, 1.0, np.where(x <= 0, edge, _kl_root_below(x, c)))
    below = 1 - _kl_root_below(1 - x, c) + 1e-15  # a margin for 1 - (1 - p)
    return np.where(x <= 0, 0.0, np.where(x >= 1, 1 - edge + 1e-15, np.minimum(below, x + 1e-15)))


def pair_limit_bounds(
    lim0: CpLimits, f: ArrayLike, lim1: CpLimits, g: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(lim0.bound(f), lim1.bound(g)) in one pass (both upper or both lower limits)."""
    f, g = np.asarray(f, dtype=float), np.asarray(g, dtype=float)
    if lim0.upper != lim1.upper:
        return lim0.bound(f), lim1.bound(g)
    k = len(f)
    x = np.concatenate([f / max(lim0.nobs, 1), g / max(lim1.nobs, 1)])
    c = np.repeat([lim0.c, lim1.c], [k, len(g)])
    edge = np.repeat([lim0.edge, lim1.edge], [k, len(g)])
    out = _limit_bounds(lim0.upper, x, c, edge)
    return out[:k], out[k:]


def _kl(x, p, own=None):
    """H(x, p) = KL(Bernoulli(x) || Bernoulli(p)); `own` = (xlogy(x, x), 1 - x,
    xlogy(1 - x, 1 - x)) when computed once for many p (the same numbers, the same sum)."""
    a, y, b = (xlogy(x, x), 1 - x, xlogy(1 - x, 1 - x)) if own is None else own
    return a - xlogy(x, p) + b - xlogy(y, 1 - p)


def _kl_root_below(x, c, steps: int = 5):
    """A number at most the root p > x of H(x, p) = c (x < 1), within rounding of it.

    H(x, .) is convex and increasing on (x, 1). Newton's method from a start above the root
    stays above it; the chord from (x, 0) to the last iterate lies above H, so where it reaches
    c is below the root, whether or not Newton has converged. The start is the normal
    approximation x + 1.1 z sqrt(x (1 - x)) + 2c where H confirms it is above the root, else one
    that always is (Pinsker's H >= 2 (p - x)^2, or H >= (1 - x) ln((1 - x)/(1 - p)) - x)."""
    x = np.minimum(np.asarray(x, dtype=float), 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        tail = 1 - (1 - x) * np.exp(-c / np.maximum(1 - x, 1e-300) - 1)
        safe = np.minimum(x + np.sqrt(c / 2), tail)
        guess = np.minimum(x + 1.1 * np.sqrt(2 * c * x * (1 - x)) + 2 * c, safe)
        own = (xlogy(x, x), 1 - x, xlogy(1 - x, 1 - x))
        p = np.where(_kl(x, guess, own) >= c, guess, safe)
        p = np.where(p > x, p, np.nextafter(x, 2))
        for _ in range(steps):
            h = _kl(x, p, own) - c
            slope = (p - x) / (p * (1 - p))
            step = np.where((h > 0) & (slope > 0) & np.isfinite(h), h / slope, 0.0)
            p = np.maximum(p - step, x)
        h = _kl(x, p, own)
        chord = x + c * (p - x) / h
        root = np.where(h > c, chord, p)
        root = x + (root - x) * (1 - 1e-9)  # a margin for rounding in H
    return np.clip(np.where(np.isfinite(root), root, x), x, 1.0)


@lru_cache(maxsize=64)
def cp_limits(nobs: int, a: float, upper: bool = True) -> CpLimits:
    return CpLimits(int(nobs), float(a), upper)
