"""Optimistic and pessimistic privacy-loss distributions (Doroshenko et al., "Connect the Dots",
[DGKKM22]), composed by FFT: a two-sided interval  eps_opt <= eps_true <= eps_pess.

A pair (P, Q) is described by its hockey-stick curve h(alpha) = D_alpha(P || Q) = sum [P - alpha Q]_+
(alpha = e^eps; h(eps) in the eps variable is the privacy profile). On the grid
alpha_0 = 0 < alpha_1 < ... < alpha_(k-1) < alpha_k = inf, with alpha_i = e^(eps_i), eps_i uniform
with step `step` and 0 on the grid:

* Algorithm 1 (DiscretizePLD) turns curve values f(alpha_1..alpha_(k-1)) into a pair on k+1 points::

      Q(alpha_i) = (f_(i-1) - f_i)/(alpha_i - alpha_(i-1)) - (f_i - f_(i+1))/(alpha_(i+1) - alpha_i)
      (second term 0 for i = k-1),  P(alpha_i) = alpha_i Q(alpha_i),  P(alpha_k) = f_k,

  whose privacy-loss distribution puts mass P(alpha_i) on loss eps_i and f_k on +inf.

* Pessimistic (connect the dots, Lemma 4.1): f = h at the grid points, and f_k = h(alpha_(k-1))
  (the mass beyond the grid goes to +inf, as [DGKKM22] leave it implicit). Exact at the grid
  points, above h in between.

* Optimistic (Algorithm 2, Theorem 5.4): tangents of h from the left of alpha = 1 and from the right, ::

      fR[i+1] = h(alpha_i) + (alpha_(i+1) - alpha_i) h'(alpha_i)    (i < i*),  fR[0] = 1,
      fL[i-1] = h(alpha_i) - (alpha_i - alpha_(i-1)) h'(alpha_i)    (i > i*),  fL[k-1] = 0,

  f = the lower convex hull of those points, f_k = 0. The resulting pair is dominated by (P, Q).

* Composition: PLDs add; the finite parts are convolved (one FFT for all N steps), and the
  +inf masses combine as 1 - prod(1 - m_i). delta(eps) = m_inf + sum_(l_j > eps) (1 - e^(eps - l_j)) p_j
  (Lemma 2.6). Composition preserves domination, so optimistic <= true <= pessimistic after N steps.

Curves with closed forms ([DGKKM22] Sec. 2 and the Poisson-subsampled Gaussian of DP-SGD): Gaussian (mu), Laplace (e0 = Delta/b),
and the Poisson-subsampled Gaussian in its REMOVE pair ((1-q) N(0,s^2) + q N(1,s^2) vs N(0,s^2))
and ADD pair (the reverse); for DP-SGD both are composed and the max is reported.
The grid ends are set where the curve is within `tail` of its limits (1 - alpha on the left, 0 on
the right), and `dpsgd_epsilon_interval` returns (optimistic, pessimistic) eps_B of a DP-SGD run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr

from auditsel.mechanisms import gaussian_delta
from auditsel.numerics import FloatArray, check_deltas


@dataclass(frozen=True)
class Curve:
    """h(alpha) and h'(alpha) of one pair, vectorised, for alpha > 0."""

    h: Callable[[np.ndarray], np.ndarray]
    dh: Callable[[np.ndarray], np.ndarray]
    name: str = ""

    def at_eps(self, eps: ArrayLike) -> np.ndarray:
        return self.h(np.exp(np.asarray(eps, dtype=float)))


def gaussian_curve(mu: float) -> Curve:
    h = lambda a: gaussian_delta(mu, np.log(a))
    dh = lambda a: -ndtr(-mu / 2 - np.log(a) / mu)
    return Curve(h, dh, f"gaussian({mu:g})")


def laplace_curve(e0: float) -> Curve:
    """Laplace mechanism with Delta/b = e0 (closed-form hockey-stick curve)."""

    def h(a):
        a = np.asarray(a, dtype=float)
        e = np.log(a)
        return np.where(e <= -e0, 1 - a, np.where(e < e0, -np.expm1((e - e0) / 2), 0.0))

    def dh(a):
        a = np.asarray(a, dtype=float)
        e = np.log(a)
        return np.where(e <= -e0, -1.0, np.where(e < e0, -0.5 * np.exp(-(e + e0) / 2), 0.0))

    return Curve(h, dh, f"laplace({e0:g})")


def subsampled_gaussian_curves(q: float, sigma: float) -> tuple[Curve, Curve]:
    """(REMOVE, ADD) curves of the Poisson-subsampled Gaussian, sensitivity 1, noise sigma."""
    s = sigma
    S = lambda t: ndtr(-t)

    def x_remove(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            return s * s * np.log((a - 1 + q) / q) + 0.5

    def h_remove(a):
        a = np.asarray(a, dtype=float)
        x = x_remove(np.maximum(a, 1 - q + 1e-300))
        val = (1 - q) * S(x / s) + q * S((x - 1) / s) - a * S(x / s)
        return np.where(a <= 1 - q, 1 - a, np.maximum(val, 0.0))

    def dh_remove(a):
        a = np.asarray(a, dtype=float)
        x = x_remove(np.maximum(a, 1 - q + 1e-300))
        return np.where(a <= 1 - q, -1.0, -S(x / s))

    def x_add(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            return s * s * np.log((1 / a - 1 + q) / q) + 0.5

    def h_add(a):
        a = np.asarray(a, dtype=float)
        lim = 1 / (1 - q) if q < 1 else np.inf
        x = x_add(np.minimum(a, lim * (1 - 1e-15)))
        val = ndtr(x / s) - a * ((1 - q) * ndtr(x / s) + q * ndtr((x - 1) / s))
        return np.where(a >= lim, 0.0, np.maximum(val, 0.0))

    def dh_add(a):
        a = np.asarray(a, dtype=float)
        lim = 1 / (1 - q) if q < 1 else np.inf
        x = x_add(np.minimum(a, lim * (1 - 1e-15)))
        return np.where(a >= lim, 0.0, -((1 - q) * ndtr(x / s) + q * ndtr((x - 1) / s)))

    return (Curve(h_remove, dh_remove, "subsampled-remove"), Curve(h_add, dh_add, "subsampled-add"))


@dataclass(frozen=True)
class DiscretePld:
    """Privacy-loss distribution: mass pmf[j] on loss (offset + j) * step, plus inf_mass."""

    step: float
    offset: int
    pmf: np.ndarray
    inf_mass: float

    @property
    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(len(self.pmf))) * self.step

    def delta(self, eps: ArrayLike) -> FloatArray | float:
        """m_inf + sum_(l_j > eps) (1 - e^(eps - l_j)) p_j  ([DGKKM22] Lemma 2.6), vectorised."""
        eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
        l = self.losses
        out = np.empty(len(eps_arr))
        for i, e in enumerate(eps_arr):
            sel = l > e
            out[i] = self.inf_mass + float(np.sum(-np.expm1(e - l[sel]) * self.pmf[sel]))
        return out if np.ndim(eps) else float(out[0])

    def epsilon(self, delta: float) -> float:
        """Smallest eps >= 0 with delta(eps) <= delta (bisection; delta(eps) is decreasing)."""
        delta = float(check_deltas(delta)[0])
        if self.inf_mass > delta:
            return math.inf
        if self.delta(0.0) <= delta:
            return 0.0
        keep = self.pmf > 0
        l, p = self.losses[keep], self.pmf[keep]
        lo, hi = 0.0, float(l[-1])
        f = lambda e: self.inf_mass + float(np.sum(-np.expm1(np.minimum(e - l, 0.0)) * p))
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            if f(mid) <= delta:
                hi = mid
            else:
                lo = mid
        return hi

    def compose(self, times: int) -> DiscretePld:
        """The N-fold self-composition, by one FFT."""
        n = int(times)
        size = n * (len(self.pmf) - 1) + 1
        nfft = 1 << int(math.ceil(math.log2(max(size, 2))))
        spec = np.fft.rfft(self.pmf, nfft)
        out = np.fft.irfft(spec**n, nfft)[:size]
        out = np.maximum(out, 0.0)
        return DiscretePld(
            self.step,
            self.offset * n,
            out,
            -math.expm1(n * math.log1p(-self.inf_mass)) if self.inf_mass < 1 else 1.0,
        )


def _grid(curve: Curve, step: float, tail: float) -> np.ndarray:
    """eps_i = i step covering where h differs from its limits by more than `tail`."""
    hi = step
    while float(curve.at_eps(hi)) > tail and hi < 1e4:
        hi *= 2
    lo = -step
    while float(curve.at_eps(lo)) - (-math.expm1(lo)) > tail and lo > -1e4:
        lo *= 2
    return np.arange(math.floor(lo / step), math.ceil(hi / step) + 1)


def _discretize(alpha: np.ndarray, f: np.ndarray, f_inf: float):
    """Algorithm 1 on alpha_1..alpha_(k-1) (with alpha_0 = 0, f_0 = 1, alpha_k = inf)."""
    a = np.concatenate([[0.0], alpha])
    ff = np.concatenate([[1.0], f])
    left = (ff[:-1] - ff[1:]) / (a[1:] - a[:-1])  # slope magnitudes on each segment
    right = np.concatenate([left[1:], [0.0]])
    qmass = left - right
    pmass = alpha * qmass
    return np.maximum(pmass, 0.0), f_inf


def pessimistic_pld(curve: Curve, step: float = 1e-3, tail: float = 1e-15) -> DiscretePld:
    """Connect-the-dots PLD of one pair ([DGKKM22] Algorithm 1 on the true curve)."""
    idx = _grid(curve, step, tail)
    alpha = np.exp(idx * step)
    f = np.asarray(curve.h(alpha), dtype=float)
    p, inf_mass = _discretize(alpha, f, float(f[-1]))
    return DiscretePld(step, int(idx[0]), p, inf_mass)


def _lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The lower convex hull of the points, evaluated at x (sorted by x, ties: lowest y)."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    hull: list[int] = []
    for i in range(len(xs)):
        if hull and xs[hull[-1]] == xs[i]:
            continue
        while len(hull) >= 2:
            i1, i2 = hull[-2], hull[-1]
            cross = (xs[i2] - xs[i1]) * (ys[i] - ys[i1]) - (ys[i2] - ys[i1]) * (xs[i] - xs[i1])
            if cross <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return np.interp(x, xs[hull], ys[hull])


def optimistic_pld(curve: Curve, step: float = 1e-3, tail: float = 1e-15) -> DiscretePld:
    """[DGKKM22] Algorithm 2: a pair dominated by the true one (optimistic delta)."""
    idx = _grid(curve, step, tail)
    alpha = np.exp(idx * step)
    a = np.concatenate([[0.0], alpha])  # alpha_0 .. alpha_(k-1)
    h = np.concatenate([[1.0], np.asarray(curve.h(alpha), dtype=float)])
    dh = np.concatenate([[-1.0], np.asarray(curve.dh(alpha), dtype=float)])
    i_star = int(np.nonzero(idx == 0)[0][0]) + 1
    k1 = len(a) - 1  # index k-1
    fr = np.empty(i_star + 1)
    fr[0] = 1.0
    fr[1:] = h[:i_star] + (a[1 : i_star + 1] - a[:i_star]) * dh[:i_star]
    fl = np.empty(k1 - i_star + 1)  # for i = i*..k-1
    fl[-1] = 0.0
    i = np.arange(i_star + 1, k1 + 1)
    fl[:-1] = h[i] - (a[i] - a[i - 1]) * dh[i]
    xs = np.concatenate([a[: i_star + 1], a[i_star:]])
    ys = np.concatenate([fr, fl])
    f = _lower_hull(xs, np.maximum(ys, 0.0))
    f_grid = np.interp(a, np.sort(xs), f[np.argsort(xs, kind="stable")])
    f_grid[-1] = 0.0
    p, _ = _discretize(alpha, f_grid[1:], 0.0)
    return DiscretePld(step, int(idx[0]), p, 0.0)


def dpsgd_epsilon_interval(
    noise_multiplier: float, steps: int, sample_rate: float, delta: float, step: float = 1e-3
) -> tuple[float, float]:
    """(optimistic, pessimistic) eps of N Poisson-subsampled Gaussian steps (max over add/remove).

    tau = 1 is the Gaussian with mu = 1/sigma per step."""
    delta = float(check_deltas(delta)[0])
    curves: tuple[Curve, ...]
    if sample_rate >= 1:
        curves = (gaussian_curve(1.0 / noise_multiplier),)
    else:
        curves = subsampled_gaussian_curves(sample_rate, noise_multiplier)
    opt = max(optimistic_pld(c, step).compose(steps).epsilon(delta) for c in curves)
    pess = max(pessimistic_pld(c, step).compose(steps).epsilon(delta) for c in curves)
    return opt, pess
