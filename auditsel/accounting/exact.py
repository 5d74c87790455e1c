"""Exact privacy curve of the released winner (rigorous: it is the true curve of the pair).

For the winner laws A (on X) and A' (on X') of `auditsel.selection`, the privacy curve is

    delta(eps) = max{ H_{e^eps}(A || A'), H_{e^eps}(A' || A) },
    H_{e^eps}(P || Q) = sum_y [P(y) - e^eps Q(y)]_+        ([KRW24] Definitions; [DGKKM22] eq. 1)

and the exact epsilon at delta is the smallest eps >= 0 with delta(eps) <= delta.

Finite outputs: the sum above, term by term.

Gaussian base (the reduced game): H = P(S) - e^eps Q(S) with S = {x : log p(x) - log q(x) > eps}.
We locate S as a union of intervals (sign changes of the log-likelihood ratio on a fine grid,
refined by bisection) and take P(S), Q(S) from the winner's cdf G(F(x - s)) in log-safe form,
so tiny deltas (1e-12) keep full relative precision. Since p = e^eps q on the boundary of S, an
error in a boundary point changes H only at second order. The fixed output of K = 0 carries the
same mass on both sides and adds [atom (1 - e^eps)]_+.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from auditsel.mechanisms import hockey_stick_finite

__all__ = ["hockey_stick_finite", "hockey_stick", "privacy_curve", "exact_epsilon",
           "likelihood_ratio_region_masses", "tradeoff_curve"]

GRID_STEP = 2e-3
GRID_MARGIN = 40.0
BISECTION_STEPS = 45   # 2e-3 / 2^45 ~ 6e-17: below double precision of the roots


def _llr_grid(winner, direction: int):
    """The log-likelihood ratio log p_dir / p_other on the scan grid (computed once per winner)."""
    sign = 1.0 if direction == 1 else -1.0
    grid = np.arange(-GRID_MARGIN, winner.mu + GRID_MARGIN + GRID_STEP, GRID_STEP)
    return grid, sign * winner.log_likelihood_ratio(grid)


def likelihood_ratio_region_masses(winner, levels, direction: int = 1, scan=None):
    """For each level c: (P_dir(S_c), P_other(S_c)) with S_c = {x : log p_dir(x)/p_other(x) > c}.

    Gaussian winner only (real line; the K = 0 atom, where the ratio is 1, is left out).
    S_c is a union of intervals: sign changes of the log-likelihood ratio on a fine grid,
    refined by bisection; masses from the winner's cdf (`GaussianWinner.mass`).
    """
    sign = 1.0 if direction == 1 else -1.0
    llr = lambda x: sign * winner.log_likelihood_ratio(x)  # log p_dir(x) - log p_other(x)
    grid, values = scan if scan is not None else _llr_grid(winner, direction)
    levels = np.atleast_1d(np.asarray(levels, dtype=float))
    p_mass, q_mass = np.empty(len(levels)), np.empty(len(levels))
    for i, c in enumerate(levels):
        above = values > c
        change = np.nonzero(above[1:] != above[:-1])[0]
        lo, hi = grid[change].copy(), grid[change + 1].copy()
        lo_above = above[change]
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            move_lo = (llr(mid) > c) == lo_above
            lo = np.where(move_lo, mid, lo)
            hi = np.where(move_lo, hi, mid)
        edges = np.concatenate([[-np.inf], 0.5 * (lo + hi), [np.inf]])
        inside = np.concatenate([[above[0]], ~lo_above])  # state of each piece, left to right
        a, b = edges[:-1][inside], edges[1:][inside]
        p_mass[i] = np.sum(winner.mass(a, b, direction))
        q_mass[i] = np.sum(winner.mass(a, b, 1 - direction))
    return p_mass, q_mass


def _gaussian_hockey_stick(winner, eps: np.ndarray, direction: int, scan=None) -> np.ndarray:
    """H_{e^eps}(A_direction || A_other) = P(S_eps) - e^eps Q(S_eps), plus the K = 0 atom."""
    p_mass, q_mass = likelihood_ratio_region_masses(winner, eps, direction, scan)
    with np.errstate(over="ignore", invalid="ignore"):
        value = np.where(eps < 700, p_mass - np.exp(np.minimum(eps, 700)) * q_mass, p_mass)
    # the atom term [atom (1 - e^eps)]_+ is 0 for eps >= 0: clip eps so that expm1 cannot
    # overflow (atom = 0 times -inf was nan, and exact_epsilon's root finder failed on it)
    return np.maximum(value, 0.0) + np.maximum(winner.atom * -np.expm1(np.minimum(eps, 0.0)), 0.0)


def tradeoff_curve(winner, points: int = 200):
    """The exact trade-off curve (FP, FN) of the Neyman-Pearson tests "guess X' when
    log A'(y)/A(y) > c" over a range of c ([DRS22]'s f-DP curve of the pair).

    Finite winners: the vertices of the piecewise-linear curve (outputs sorted by ratio).
    """
    if hasattr(winner, "pmf"):
        a, b = winner.pmf(0), winner.pmf(1)
        with np.errstate(divide="ignore"):
            order = np.argsort(-(np.log(b) - np.log(a)))
        fp = np.concatenate([[0.0], np.cumsum(a[order])])
        fn = 1 - np.concatenate([[0.0], np.cumsum(b[order])])
        return np.clip(fp, 0, 1), np.clip(fn, 0, 1)
    lo, hi = winner.quantile_range(1e-9)
    values = winner.log_likelihood_ratio(np.linspace(lo, hi, 2001))
    levels = np.linspace(values.min(), values.max(), points)
    p1, p0 = likelihood_ratio_region_masses(winner, levels, direction=1)
    return np.clip(p0, 0, 1), np.clip(1 - p1, 0, 1)  # the K = 0 output is guessed X


def hockey_stick(winner, eps, direction: int = 0, scan=None):
    """H_{e^eps}(A || A') (direction 0) or H_{e^eps}(A' || A) (direction 1), vectorised in eps.

    `scan`: a precomputed `_llr_grid(winner, direction)`, to share across calls."""
    eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
    if hasattr(winner, "pmf"):
        a, b = winner.pmf(direction), winner.pmf(1 - direction)
        atom = winner.atom
        out = hockey_stick_finite(np.append(a, atom), np.append(b, atom), eps_arr)
    else:
        out = _gaussian_hockey_stick(winner, eps_arr, direction, scan)
    return out if np.ndim(eps) else float(out[0])


def privacy_curve(winner, eps, scans=(None, None)):
    """delta(eps) = max over both directions (vectorised in eps)."""
    return np.maximum(hockey_stick(winner, eps, 0, scans[0]), hockey_stick(winner, eps, 1, scans[1]))


def exact_epsilon(winner, delta: float, tol: float = 1e-9) -> float:
    """Smallest eps >= 0 with privacy_curve(winner, eps) <= delta (inf if none)."""
    scans = (None, None) if hasattr(winner, "pmf") else (_llr_grid(winner, 0), _llr_grid(winner, 1))
    curve = lambda e: float(privacy_curve(winner, np.array([e]), scans)[0])
    if curve(0.0) <= delta:
        return 0.0
    if delta <= 0 and hasattr(winner, "pmf"):
        return _pure_epsilon(winner)
    hi = 1.0
    while curve(hi) > delta:
        hi *= 2
        if hi > 1e4:
            return math.inf
    if delta > 0:
        f = lambda e: math.log(max(curve(e), 1e-300)) - math.log(delta)
    else:
        f = lambda e: curve(e) - delta if curve(e) > 0 else -1.0
    return brentq(f, 0.0, hi, xtol=tol, rtol=1e-12)


def _pure_epsilon(winner) -> float:
    """max |log A(y)/A'(y)| for a finite winner (inf when the supports differ)."""
    a, b = winner.pmf(0), winner.pmf(1)
    both = (a > 0) & (b > 0)
    if np.any((a > 0) != (b > 0)):
        return math.inf
    return float(np.max(np.abs(np.log(a[both]) - np.log(b[both]))))
