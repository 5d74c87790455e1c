"""Renyi-DP curves and their conversion to (eps, delta)-DP.

Renyi divergence of order alpha > 1:  D_alpha(P || Q) = 1/(alpha-1) log sum_y P(y)^alpha Q(y)^(1-alpha).
A mechanism is (alpha, r(alpha))-RDP when D_alpha <= r(alpha) in both directions for every pair of
neighbours; `r` on a grid of orders is an "RDP curve".

Conversion (Canonne, Kamath, Steinke 2020 Prop. 12 = [PS22] Lemma 14 = [XWW24] Appendix A.2)::

    eps(delta) = min_alpha  r(alpha) + log(1 - 1/alpha) - (log(delta) + log(alpha)) / (alpha - 1),

minimised over the orders on which r is known (`rdp_to_epsilon`), and eps = 0 as soon as
delta >= sqrt(1 - exp(-r(alpha))) at some order: the total variation distance, which is the
privacy profile at eps = 0, is at most sqrt(1 - exp(-KL)) (Bretagnolle-Huber), and
KL = D_1 <= D_alpha <= r(alpha) for every alpha > 1 (as dp_accounting's `compute_epsilon`).
The panel's order grid `ORDERS` is the union of `GRID` (160 orders geometric in alpha - 1,
1.01 <= alpha <= 1024) and `DP_ACCOUNTING_ORDERS` (dp_accounting's defaults), so every
conversion over it is never looser than over dp_accounting's orders. Closed-form curves can be
minimised continuously with `rdp_to_epsilon_continuous` (golden section over alpha - 1 in log
scale, the grid value kept if smaller). With delta = 0 the conversion gives inf (a finite grid
of orders cannot certify pure DP).

Curves (all tight, i.e. equal to the true divergence, maximised over both directions):

* `gaussian_rdp(mu, alpha)`        = alpha mu^2 / 2          (Mironov 2017, Prop. 7)

* `finite_rdp(p, q, alpha)`        = max{D_alpha(p||q), D_alpha(q||p)} for a finite-output pair

* `pure_dp_rdp(eps, alpha)`        the RDP curve of binary randomized response with parameter eps,
  the largest RDP curve of any eps-DP mechanism (Mironov 2017 Prop. 10 and its tightness;
  [PS22] Prop. 17 uses the same pair), used when only a pure-DP eps of the base is known::

      p = e^eps/(1+e^eps),  D_alpha = 1/(alpha-1) log( p^alpha (1-p)^(1-alpha) + (1-p)^alpha p^(1-alpha) ).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from auditsel.numerics import FloatArray, check_deltas, golden_min, logsumexp

#: 160 orders geometric in alpha - 1 between 1.01 and 1024
GRID = 1.0 + np.logspace(-2, math.log10(1023.0), 160)
#: dp_accounting's DEFAULT_RDP_ORDERS (the same floats; stated here so that importing the panel
#: does not import dp_accounting)
DP_ACCOUNTING_ORDERS = np.array(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
    dtype=float,
)
#: the order grid of the panel (see the module docstring)
ORDERS = np.union1d(GRID, DP_ACCOUNTING_ORDERS)


def _conversion_terms(orders: FloatArray, delta: ArrayLike) -> FloatArray:
    """log(1 - 1/alpha) - (log(delta) + log(alpha)) / (alpha - 1), broadcast over both."""
    a = orders
    return np.log1p(-1.0 / a) - (np.log(delta) + np.log(a)) / (a - 1.0)


def rdp_to_epsilon(orders: ArrayLike, rdp: ArrayLike, delta: ArrayLike) -> FloatArray | float:
    """eps at delta: Canonne-Kamath-Steinke conversion minimised over the given orders.

    `delta` may be an array (one conversion per delta, the curve read once); the result is a
    float for a scalar delta, else an array. eps is clipped at 0. Orders <= 1 and non-finite
    values of the curve are skipped; with no usable order the result is inf. delta = 0 gives
    inf: a finite grid of orders cannot certify pure DP (use e.g. [PS22] Corollary 3). A delta
    outside [0, 1) is a ConfigError.
    """
    orders = np.asarray(orders, dtype=float)
    rdp = np.broadcast_to(np.asarray(rdp, dtype=float), orders.shape)
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    ok = (orders > 1) & np.isfinite(rdp)
    pos = deltas > 0
    if np.any(ok) and np.any(pos):
        a = orders[ok]
        eps = rdp[ok][None, :] + (
            np.log1p(-1.0 / a)[None, :]
            - (np.array([math.log(d) for d in deltas[pos]])[:, None] + np.log(a)[None, :])
            / (a - 1.0)[None, :]
        )
        out[pos] = np.maximum(np.min(eps, axis=1), 0.0)
        # total variation <= sqrt(1 - e^-KL) <= sqrt(1 - e^-r): eps = 0 once delta covers it
        tv = math.sqrt(-math.expm1(-max(float(np.min(rdp[ok])), 0.0)))
        out[pos] = np.where(deltas[pos] >= tv, 0.0, out[pos])
    return out if np.ndim(delta) else float(out[0])


#: the order search stops once its bracket in log(alpha - 1) is this narrow: the conversion is
#: flat at its minimum (second order), so the value found moves by far less than 1e-13
ORDER_XTOL = 1e-11


def rdp_to_epsilon_continuous(
    curve: Callable[[FloatArray], ArrayLike],
    delta: ArrayLike,
    lo: float = 1e-3,
    hi: float = 1e4,
    grid: ArrayLike | None = None,
) -> FloatArray | float:
    """eps at delta: the conversion minimised over alpha in (1 + lo, 1 + hi) for a vectorised
    curve(alpha) (inf at delta = 0; a ConfigError outside [0, 1)).

    A log-spaced scan of 400 points in alpha - 1 (or the orders of `grid`: one row for every
    delta, or one row per delta), then golden-section refinement in log(alpha - 1) between the
    best point's neighbours, stopped once the bracket is ORDER_XTOL wide. `delta` may be an
    array: the scans and the searches of every delta are evaluated together (`curve` gets an
    array of orders of any shape). A float for a scalar delta, else an array. The minimum
    found is a valid epsilon whatever its accuracy (every alpha gives one), and never above
    the scan's best point.
    """
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    pos = np.nonzero(deltas > 0)[0]
    if len(pos):
        d = deltas[pos][:, None]
        if grid is None:
            xs = np.logspace(math.log10(lo), math.log10(hi), 400)
        else:
            xs = np.asarray(grid, dtype=float) - 1
        xs = np.broadcast_to(xs, (len(pos), xs.shape[-1])) if xs.ndim == 1 else xs[pos]
        a = 1.0 + xs
        vals = np.asarray(curve(a), dtype=float) + _conversion_terms(a, d)
        vals = np.where(np.isfinite(vals), vals, np.inf)
        i = np.argmin(vals, axis=1)
        rows = np.arange(len(pos))
        scan = vals[rows, i]
        last = xs.shape[1] - 1
        left = np.log(xs[rows, np.maximum(i - 1, 0)])
        right = np.log(xs[rows, np.minimum(i + 1, last)])
        f = lambda t: (
            np.asarray(curve(1 + np.exp(t)), dtype=float)
            + _conversion_terms(1 + np.exp(t), d[:, 0])
        )
        _, best = golden_min(f, left, right, steps=60, xtol=ORDER_XTOL)
        with np.errstate(invalid="ignore"):
            found = np.maximum(np.fmin(best, scan), 0.0)
        out[pos] = np.where(np.isfinite(scan), found, math.inf)
    return out if np.ndim(delta) else float(out[0])


def rdp_to_delta(orders: ArrayLike, rdp: ArrayLike, epsilon: ArrayLike) -> FloatArray | float:
    """delta(eps) implied by an RDP curve: the inverse form of the same conversion.

    delta = min_alpha exp((alpha-1)(r(alpha) - eps + log(1 - 1/alpha)) - log(alpha)), and also
    <= sqrt(1 - exp(-r)) (Pinsker-type KL bound), as in dp_accounting's `compute_delta`.
    `epsilon` may be an array (a float for a scalar, else an array)."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.broadcast_to(np.asarray(rdp, dtype=float), orders.shape)
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    ok = (orders > 1) & np.isfinite(rdp)
    out = np.ones(eps.shape)
    if np.any(ok):
        a, r = orders[ok], rdp[ok]
        log_delta = (a - 1)[None, :] * (
            r[None, :] - eps[:, None] + np.log1p(-1 / a)[None, :]
        ) - np.log(a)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = float(np.min(0.5 * np.log(np.maximum(-np.expm1(-np.maximum(r, 0)), 0))))
        out = np.minimum(1.0, np.exp(np.minimum(np.min(log_delta, axis=1), kl)))
    return out if np.ndim(epsilon) else float(out[0])


def gaussian_rdp(mu: float, orders: ArrayLike) -> FloatArray:
    """alpha mu^2 / 2: RDP of N(0,1) vs N(mu,1), exact and symmetric (`GaussianBase.rdp`)."""
    return np.asarray(orders, dtype=float) * mu * mu / 2.0


def renyi_divergence_finite(p: ArrayLike, q: ArrayLike, orders: ArrayLike) -> FloatArray:
    """D_alpha(p || q) for finite laws (inf where supp p is not inside supp q)."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    a = np.asarray(orders, dtype=float)[..., None]
    if np.any((p > 0) & (q == 0)):
        return np.full(np.shape(orders), np.inf)
    keep = p > 0
    lp, lq = np.log(p[keep]), np.log(q[keep])
    return logsumexp(a * lp + (1 - a) * lq) / (a[..., 0] - 1)


def finite_rdp(p: ArrayLike, q: ArrayLike, orders: ArrayLike) -> FloatArray:
    """max over both directions of the Renyi divergence of two finite laws (p, q may carry an
    extra atom, so they need not be a `FiniteOutputBase`)."""
    return np.maximum(renyi_divergence_finite(p, q, orders), renyi_divergence_finite(q, p, orders))


def pure_dp_rdp(eps: float, orders: ArrayLike) -> FloatArray:
    """The RDP curve of randomized response with parameter eps (tight for eps-DP)."""
    a = np.asarray(orders, dtype=float)
    if eps == 0:
        return np.zeros_like(a)
    lp = eps - math.log1p(math.exp(eps))  # log p,   p = e^eps / (1 + e^eps)
    lq = -math.log1p(math.exp(eps))  # log(1-p)
    t1 = a * lp + (1 - a) * lq
    t2 = a * lq + (1 - a) * lp
    return np.minimum(np.logaddexp(t1, t2) / (a - 1), eps)


def monotone_envelope(orders: ArrayLike, rdp: ArrayLike) -> FloatArray:
    """r'(alpha_i) = min_{alpha_j >= alpha_i} r(alpha_j): RDP is non-decreasing in alpha."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    idx = np.argsort(orders)
    env = np.minimum.accumulate(rdp[idx][::-1])[::-1]
    out = np.empty_like(env)
    out[idx] = env
    return out
