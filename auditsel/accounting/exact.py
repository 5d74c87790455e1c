"""Exact privacy curve of the released winner (rigorous: it is the true curve of the pair).

For the winner laws A (on X) and A' (on X') of `auditsel.selection`, the privacy curve is

    delta(eps) = max{ H_{e^eps}(A || A'), H_{e^eps}(A' || A) },
    H_{e^eps}(P || Q) = sum_y [P(y) - e^eps Q(y)]_+        (seed 000 Definitions; seed 003 eq. 1)

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

__all__ = ["hockey_stick_finite", "hockey_stick", "privacy_curve", "exact_epsilon"]

GRID_STEP = 2e-3
GRID_MARGIN = 40.0
BISECTION_STEPS = 60


def hockey_stick_finite(p, q, eps):
    """sum_y [p(y) - e^eps q(y)]_+ for each eps (vectorised over eps)."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    eps = np.asarray(eps, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        terms = p - np.exp(eps)[..., None] * q
    return np.sum(np.where(terms > 0, terms, 0.0), axis=-1)


def _gaussian_hockey_stick(winner, eps: np.ndarray, direction: int) -> np.ndarray:
    """H_{e^eps}(A_direction || A_other) for the Gaussian winner, each eps."""
    sign = 1.0 if direction == 1 else -1.0
    llr = lambda x: sign * winner.log_likelihood_ratio(x)  # log p_dir(x) - log p_other(x)
    grid = np.arange(-GRID_MARGIN, winner.mu + GRID_MARGIN + GRID_STEP, GRID_STEP)
    values = llr(grid)
    out = np.empty(len(eps))
    for i, e in enumerate(eps):
        above = values > e
        change = np.nonzero(above[1:] != above[:-1])[0]
        # refine each boundary by bisection on [grid[j], grid[j+1]]
        lo, hi = grid[change].copy(), grid[change + 1].copy()
        lo_above = above[change]
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            mid_above = llr(mid) > e
            move_lo = mid_above == lo_above
            lo = np.where(move_lo, mid, lo)
            hi = np.where(move_lo, hi, mid)
        roots = 0.5 * (lo + hi)
        edges = np.concatenate([[-np.inf], roots, [np.inf]])
        inside = np.concatenate([[above[0]], ~lo_above])  # state of each piece, left to right
        a, b = edges[:-1][inside], edges[1:][inside]
        p_mass = np.sum(winner.mass(a, b, direction))
        q_mass = np.sum(winner.mass(a, b, 1 - direction))
        value = p_mass - math.exp(e) * q_mass if e < 700 else p_mass
        out[i] = max(value, 0.0) + max(winner.atom * -math.expm1(e), 0.0)
    return out


def hockey_stick(winner, eps, direction: int = 0):
    """H_{e^eps}(A || A') (direction 0) or H_{e^eps}(A' || A) (direction 1), vectorised in eps."""
    eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
    if hasattr(winner, "pmf"):
        a, b = winner.pmf(direction), winner.pmf(1 - direction)
        atom = winner.atom
        out = hockey_stick_finite(np.append(a, atom), np.append(b, atom), eps_arr)
    else:
        out = _gaussian_hockey_stick(winner, eps_arr, direction)
    return out if np.ndim(eps) else float(out[0])


def privacy_curve(winner, eps):
    """delta(eps) = max over both directions (vectorised in eps)."""
    return np.maximum(hockey_stick(winner, eps, 0), hockey_stick(winner, eps, 1))


def exact_epsilon(winner, delta: float, tol: float = 1e-9) -> float:
    """Smallest eps >= 0 with privacy_curve(winner, eps) <= delta (inf if none)."""
    curve = lambda e: float(privacy_curve(winner, np.array([e]))[0])
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
