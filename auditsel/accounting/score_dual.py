"""The Lagrangian dual of the score-order problem: an upper bound on the tuning run's delta(eps)
for ANY score (proof in docs/explanation/bounds.md, "The score-order dual").

Contract. `score_dual_delta(pair, law, eps)` is an upper bound on the tuning run's delta(eps)
(max over both directions) for every score the tuner may rank its runs by, randomised scores
included (a score may split one output's mass between ranks), assuming nothing beyond the base
pair: the exact pmfs of a `FiniteOutputBase`, or the privacy-loss distribution of a
`DpsgdBase` from dp_accounting's pessimistic (connect-the-dots) PLD, a pair that dominates the
true one, each direction from its own PMF. `score_dual_epsilon` is the smallest eps found by
bisection whose bound is <= delta (its upper end: a rigorous eps). Opt-in:
`registry.OPT_IN_BOUNDS`, never part of the default panel.

The bound. Lay one run's mass out along the score's order, (a, b) the P- and Q-mass ranked
below a point; a piece of privacy loss L (s = q/p = e^-L) between (a, b) and (a + p, b + q)
has winner masses G(a + p) - G(a) and G(b + q) - G(b) ([XWW24] eq. 7; G the pgf of K). Group
the pieces into classes k of loss L_k with P-masses P_k; for any multipliers phi_k (weak
duality) ::

    delta_A(eps) <= sup over relaxed paths of  integral ([G'(a) - e^eps s G'(b)]_+ - phi_k) dp
                    + sum_k phi_k P_k,

a relaxed path being any monotone path from (0, 0) made of pieces of the classes in any amounts,
pushed up to the Neyman-Pearson floor bmin(a) when below it. The grid dynamic program
(`dual_delta`) bounds the sup with every rounding in its favour (gains frozen at the cell's top
a and lowest b, landings rounded down, each step's mixture of classes bounded by the conjugate
of its concave envelope, G' rounded up / down by 4096 ulps, a final margin). Any multipliers
give a valid bound (`fit_multipliers` only makes it smaller); every grid gives a valid bound;
bucketing a PLD's losses upwards (s rounded down) keeps it valid. In the tails the dual is
loose (its convexification gap, `mixture_certificate`; docs/findings/interval-widths.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, dense_pmfs, dpsgd_pld
from auditsel.numerics import FloatArray, check_deltas
from auditsel.roles import AccountedPair
from auditsel.rounds import RoundsLaw

#: the law's relative error on G' (as `profile.layers`), charged at every node
_REL = 4096 * float(np.finfo(float).eps)


@dataclass(frozen=True)
class DualClasses:
    """The pieces of one direction: class k has P-mass p[k] and Q/P ratio s[k] = e^-L_k (s = 0:
    loss +inf); s increasing (the order of the region's floor, highest loss first)."""

    s: FloatArray
    p: FloatArray

    def floor(self, a: ArrayLike) -> FloatArray:
        """A lower bound of bmin(a), the least Q-mass of a set of P-mass a (highest loss
        first), rounded down."""
        cum_p = np.concatenate([[0.0], np.cumsum(self.p)])
        cum_q = np.concatenate([[0.0], np.cumsum(self.p * self.s)])
        out = np.interp(np.asarray(a, dtype=float), cum_p, cum_q)
        return np.maximum(out * (1 - 1e-12) - 1e-15, 0.0)


def _classes(s: FloatArray, p: FloatArray) -> DualClasses:
    keep = p > 0
    s, p = s[keep], p[keep]
    order = np.argsort(s, kind="stable")
    return DualClasses(np.asarray(s[order], dtype=float), np.asarray(p[order], dtype=float))


def finite_classes(p: ArrayLike, q: ArrayLike) -> DualClasses:
    """Every output with P-mass > 0 is a class (s = q/p exactly); q-only outputs dropped."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(p > 0, q / np.where(p > 0, p, 1.0), 0.0)
    return _classes(s, p)


def pld_classes(
    losses: ArrayLike, probs: ArrayLike, inf_mass: float, buckets: int = 8, tail: float = 1e-9
) -> DualClasses:
    """The PLD's atoms merged into `buckets` classes by loss, each loss rounded UP to its
    bucket's top (s rounded down: a lower path, a lower floor); the losses below the `tail`
    quantile of P-mass go to the lowest bucket; the +inf mass is a class with s = 0."""
    losses, probs = np.asarray(losses, dtype=float), np.asarray(probs, dtype=float)
    keep = probs > 0
    losses, probs = losses[keep], probs[keep]
    cum = np.cumsum(probs)
    lo = float(losses[min(int(np.searchsorted(cum, tail)), len(losses) - 1)])
    hi = float(losses[-1])
    edges = np.linspace(lo, hi, buckets + 1)[1:] if hi > lo else np.array([hi])
    idx = np.minimum(np.searchsorted(edges, losses, side="left"), len(edges) - 1)
    mass = np.asarray(np.bincount(idx, weights=probs, minlength=len(edges)), dtype=float)
    s = np.exp(-edges)
    if inf_mass > 0:
        s, mass = np.concatenate([[0.0], s]), np.concatenate([[inf_mass], mass])
    return _classes(s, mass)


def pair_classes(pair: AccountedPair, buckets: int = 8) -> list[DualClasses]:
    """The classes of each direction of a finite pair or a DP-SGD base (dp_accounting's
    pessimistic PLD of one run: remove, then add when asymmetric)."""
    if isinstance(pair, FiniteOutputBase):
        p, q = pair.law(0), pair.law(1)
        return [finite_classes(p, q), finite_classes(q, p)]
    if isinstance(pair, DpsgdBase):
        pmfs = dense_pmfs(dpsgd_pld(pair.noise_multiplier, pair.steps, pair.sample_rate))
        return [pld_classes(lo, pr, inf, buckets) for lo, pr, inf in pmfs]
    raise TypeError(f"score_dual supports finite-output and DP-SGD bases, not {type(pair)}")


@dataclass(frozen=True)
class DualGrid:
    """a-nodes t (w = 1 - t kept without cancellation) and the b-grid u (each a-cell split
    into `refine` b-cells); `window` landing cells are read one by one, beyond them the
    monotone bound of the last."""

    t: FloatArray
    w: FloatArray
    u: FloatArray
    uw: FloatArray
    window: int


def dual_grid(
    h: float = 1e-2, rho: float = 0.1, floor: float = 1e-10, refine: int = 4, window: int = 16
) -> DualGrid:
    """Uniform with step h, then geometric in 1 - t (ratio 1 + rho) down to `floor`, then 1:
    the winner lives near a, b -> 1 where G' is largest."""
    xs = [floor]
    while rho * xs[-1] < h and xs[-1] < 0.5:
        xs.append(xs[-1] * (1 + rho))
    x0 = xs[-1]
    n_uniform = int(math.ceil((1 - x0) / h))
    head = np.linspace(0.0, 1.0 - x0, n_uniform + 1)[:-1]
    geo = np.array(xs[::-1])
    t = np.concatenate([head, 1.0 - geo, [1.0]])
    w = np.concatenate([1.0 - head, geo, [0.0]])
    f = np.arange(refine) / refine
    uw = np.concatenate([(w[:-1, None] + (w[1:] - w[:-1])[:, None] * f).ravel(), [0.0]])
    u = np.concatenate([(t[:-1, None] + (t[1:] - t[:-1])[:, None] * f).ravel(), [1.0]])
    return DualGrid(t, w, u, uw, window)


def _gprime(law: RoundsLaw, z: FloatArray, w: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.asarray(law.pgf_derivative(z, w), dtype=float)


def dual_delta(
    classes: DualClasses, law: RoundsLaw, eps: float, phi: ArrayLike, grid: DualGrid
) -> float:
    """A rigorous upper bound on one direction's delta(eps) for any score: the dynamic program
    of the module docstring at multipliers `phi` (one per class), plus sum_k phi_k P_k."""
    s, p = classes.s, classes.p
    phi = np.asarray(phi, dtype=float)
    t, u, D = grid.t, grid.u, grid.window
    n_a, n_b = len(t) - 1, len(u) - 1
    ga = _gprime(law, t, grid.w) * (1 + _REL)
    gb = _gprime(law, u, grid.uw) * (1 - _REL)
    ee = math.exp(eps) * (1 - 1e-15)
    smax = float(s[-1])
    jfl = np.maximum(np.searchsorted(u, classes.floor(t), side="right") - 1, 0)
    pairs = [(k1, k2) for k1 in range(len(s)) for k2 in range(len(s)) if s[k1] < s[k2]]
    jj = np.arange(n_b + 1)
    V = np.zeros(n_b + 1)
    for i in range(n_a - 1, -1, -1):
        da = t[i + 1] - t[i]
        c = np.maximum(ga[i + 1] - ee * gb[:, None] * s[None, :], 0.0) - phi[None, :]
        # lambda >= 0 candidates: 0 and the pairwise slopes of the points (s_k, c_k)
        lam = np.stack(
            [np.zeros(n_b + 1)]
            + [np.maximum((c[:, b] - c[:, a]) / (s[b] - s[a]), 0.0) for a, b in pairs],
            axis=1,
        )
        conj = np.max(c[:, None, :] - lam[:, :, None] * s[None, None, :], axis=2)
        stop = da * np.maximum(np.max(c, axis=1), 0.0)  # a partial step, then stop
        best = np.maximum(stop, 0.0)
        for d in range(D):
            land = np.minimum(jj + d, n_b - 1)
            sig = np.minimum((u[land + 1] - u) / da, smax)
            val = da * np.min(lam * sig[:, None] + conj, axis=1) + V[land]
            best = np.where(jj + d < n_b, np.maximum(best, val), best)
        far = jj + D <= n_b  # every landing at or beyond cell j + D: V there is at most V[j+D]
        val = da * np.min(lam * smax + conj, axis=1) + V[np.minimum(jj + D, n_b)]
        best = np.where(far, np.maximum(best, val), best)
        # at b = 1 only the classes with s = 0 move (sigma = 0)
        best[n_b] = max(float(stop[n_b]), da * float(np.min(conj[n_b])) + V[n_b], 0.0)
        best[: jfl[i]] = best[jfl[i]]  # below the floor: pushed up to it
        V = best
    total = float(V[0]) + float(phi @ p)
    return total * (1 + 1e-9) + 1e-13 * (1.0 + float(np.abs(phi) @ p))


def _approx_value(
    classes: DualClasses, law: RoundsLaw, eps: float, phi: FloatArray, t: FloatArray, w: FloatArray
) -> tuple[float, FloatArray]:
    """The relaxed problem on a coarse grid by linear interpolation (NOT a bound: it only
    steers the multipliers) and the class usage of its greedy path (a subgradient)."""
    s, p = classes.s, classes.p
    n = len(t)
    g = _gprime(law, t, w)
    da = np.diff(t)
    ee = math.exp(eps)
    fl = classes.floor(t)
    W = np.zeros((n, n))
    choice = np.full((n, n), -1)
    for i in range(n - 2, -1, -1):
        gain = np.maximum(g[i + 1] - ee * s[None, :] * g[:, None], 0.0) - phi[None, :]
        land = np.maximum(t[:, None] + s[None, :] * da[i], fl[i + 1])
        val = np.where(land <= 1.0, da[i] * gain + np.interp(land, t, W[i + 1]), -np.inf)
        k = np.argmax(val, axis=1)
        top = val[np.arange(n), k]
        W[i] = np.maximum(top, 0.0)
        choice[i] = np.where(top > 0, k, -1)
        j0 = max(int(np.searchsorted(t, fl[i], side="right")) - 1, 0)
        W[i, :j0] = W[i, j0]
    used = np.zeros(len(p))
    b = 0.0
    for i in range(n - 1):
        b = max(b, float(fl[i]))
        k = int(choice[i, min(int(np.searchsorted(t, b, side="right")) - 1, n - 2)])
        if k < 0:
            break
        used[k] += da[i]
        b += float(s[k]) * da[i]
    return float(W[0, 0] + phi @ p), used


def fit_multipliers(
    classes: DualClasses,
    law: RoundsLaw,
    eps: float,
    iters: int = 60,
    grid: tuple[float, float] = (2e-2, 0.2),
    start: ArrayLike | None = None,
    nonnegative: bool = False,
) -> FloatArray:
    """Multipliers by subgradient steps on the coarse relaxed problem (any phi is valid: this
    only makes `dual_delta` smaller); the best of the steps, `nonnegative` kept >= 0."""
    coarse = dual_grid(*grid, refine=1)
    t, w = coarse.t, coarse.w
    phi = np.zeros(len(classes.p)) if start is None else np.asarray(start, dtype=float).copy()
    best, best_phi = math.inf, phi.copy()
    for it in range(iters):
        value, used = _approx_value(classes, law, eps, phi, t, w)
        if value < best:
            best, best_phi = value, phi.copy()
        step = 20.0 * max(best, 1e-12) / (1 + it) ** 0.7
        phi = phi - step * (classes.p - used)
        if nonnegative:
            phi = np.maximum(phi, 0.0)
    return best_phi


def score_dual_delta(
    pair: AccountedPair,
    law: RoundsLaw,
    eps: float,
    *,
    grid: DualGrid | None = None,
    iters: int = 60,
    buckets: int = 8,
) -> float:
    """The bound on the tuning run's delta(eps), max over both directions (module docstring)."""
    grid = grid or dual_grid()
    out = 0.0
    for cls in pair_classes(pair, buckets):
        # both fits are valid multipliers: the smaller bound is kept (a grid's rounding of b
        # favours a path that lags below its true b, which negative multipliers reward)
        out = max(
            out,
            min(
                dual_delta(
                    cls, law, eps, fit_multipliers(cls, law, eps, iters, nonnegative=sign), grid
                )
                for sign in (False, True)
            ),
        )
    return min(out, 1.0)


def score_dual_epsilon(
    pair: AccountedPair,
    law: RoundsLaw,
    delta: ArrayLike,
    *,
    hi: float = 50.0,
    steps: int = 10,
    **kwargs: Any,
) -> FloatArray:
    """The smallest eps found by bisection on [0, hi] with `score_dual_delta` <= delta (the
    upper end, valid); inf where even `hi` does not get there (and at delta = 0)."""
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    for n, d in enumerate(deltas.tolist()):
        if d <= 0 or score_dual_delta(pair, law, hi, **kwargs) > d:
            continue
        lo, top = 0.0, hi
        for _ in range(steps):
            mid = 0.5 * (lo + top)
            if score_dual_delta(pair, law, mid, **kwargs) <= d:
                top = mid
            else:
                lo = mid
        out[n] = top
    return out


def region_pure_epsilon(pair: AccountedPair, law: RoundsLaw, step: float = 1e-4) -> float:
    """An eps with delta_A(eps) = 0 for every score (so a bound at every delta), for a finite
    pair whose privacy loss is bounded: the max over both directions of ::

        L_max + sup over a in [0, 1] of  log G'(a) - log G'(bmin(a)),

    L_max the direction's largest loss, bmin its Neyman-Pearson floor (a lower set of P-mass a
    has Q-mass >= bmin(a)). Every piece of the order, of loss L <= L_max, lies between lower-set
    points (a, b) with b >= bmin(a), so its gain [G'(a) - e^(eps - L) G'(b)]_+ is 0 at this eps
    (docs/explanation/bounds.md). The sup is bounded cell by cell on a grid (a rounded up,
    bmin down: both monotone); inf when some output has P-mass and no Q-mass."""
    grid = dual_grid(h=step, rho=10 * step, floor=1e-12, refine=1)
    t, w = grid.t, grid.w
    log_top = np.asarray(law.log_pgf_derivative(t[1:], w[1:]), dtype=float)
    out = 0.0
    for cls in pair_classes(pair):
        if cls.s[0] <= 0:
            return math.inf
        b = cls.floor(t[:-1])
        with np.errstate(divide="ignore"):
            log_low = np.asarray(law.log_pgf_derivative(b, 1.0 - b), dtype=float)
        shift = float(np.max(log_top - log_low))
        out = max(out, -math.log(float(cls.s[0])) + max(shift, 0.0))
    return out * (1 + 1e-9) + 1e-12


def mixture_certificate(
    classes: DualClasses,
    law: RoundsLaw,
    eps: float,
    paths: list[list[tuple[int, float]]],
    weights: ArrayLike,
    fine: int = 50,
) -> tuple[float, FloatArray]:
    """A lower bound on the dual for EVERY choice of multipliers: relaxed paths (each a list
    of (class, P-mass) pieces from (0, 0), pushed up to the floor) mixed with `weights`; the
    value is the mixture's summed gains (each piece integrated exactly on a fine split) and the
    second output its class usage minus P (zero: then no multipliers can go below the value).
    """
    weights = np.asarray(weights, dtype=float)
    total, usage = 0.0, np.zeros(len(classes.p))
    for path, weight in zip(paths, weights.tolist()):
        a = b = gain = 0.0
        for k, mass in path:
            sk = float(classes.s[k])
            for piece in np.full(fine, mass / fine).tolist():
                b = max(b, float(classes.floor(np.array([a]))[0]))
                ga = float(law.pgf(np.array([a + piece]))[0] - law.pgf(np.array([a]))[0])
                gq = float(law.pgf(np.array([b + sk * piece]))[0] - law.pgf(np.array([b]))[0])
                gain += max(ga - math.exp(eps) * gq, 0.0)
                a, b = a + piece, b + sk * piece
            usage[k] += weight * mass
        total += weight * gain
    return total, usage - classes.p
