"""Privacy-profile bounds for private selection (Koskela, Redberg, Wang; [KRW24]).

Notation: Q the base mechanism with privacy profile delta_Q(eps) (max over both directions),
eps_Q(d) = inf{e >= 0 : delta_Q(e) <= d}; K ~ xi with pgf G and m = E[K] = G'(1); A the tuned
mechanism (best of K runs). All results below have the form ::

    delta_A(eps) <= m * delta_Q(eps - c)   for every eps,   hence   eps_A(delta) = eps_Q(delta/m) + c,

with a shift c >= 0 that does not depend on eps, minimised once:

* TNB(eta, nu), Theorem 5.2, read with the shift minimised once (it does not depend on eps)::

      c = (eta + 1) L*,   L* = min_{eps1 >= 0} log( e^eps1 + ((1-nu)/nu) delta_Q(eps1) ),

  or the Theorem 4.1 recipe below where it is smaller (Theorem 5.2 is a relaxation of it: its
  proof bounds the same ratio of G' on the same region; both shifts are valid, hence their
  minimum).

* Binomial(n, p), Theorem 5.7: c = min over feasible eps1 of (n-1) log(1 + p(e^eps1 - 1) + p delta_Q(eps1)),
  feasible: eps1 >= log(1 + (p/(1-p)) delta_Q(eps1)). (No feasible eps1, or p = 1: general recipe.)

* Poisson(m), Corollary 5.8: c = min_{eps1 >= 0} m (e^eps1 - 1) + m delta_Q(eps1).

* Any other law, Theorem 4.1 as a recipe (if log(G'(q)/G'(q')) <= c on the region below, then
  delta_A(eps) <= m delta_Q(eps - c)): c = sup log(G'(q)/G'(q')) over the
  pairs (q, q') = probabilities of one event under Q(X), Q(X'), i.e. over the region ::

      q <= e^e q' + delta_Q(e),  1 - q' <= e^e (1 - q) + delta_Q(e)   for every e >= 0.

  We maximise on a grid of w = 1 - q (log-spaced towards 0 and towards 1) and bound every cell
  rigorously, using that G' is non-decreasing and that the largest feasible w' = 1 - q' is
  non-decreasing in w: on [w_i, w_(i+1)] the ratio is at most G'(1 - w_i) / G'(1 - w'max(w_(i+1))).
  Relaxing the region (a finite grid of e) only enlarges it, so c stays an upper bound.

Base profiles (`BaseProfile`, built by `base_profile(pair)` from the pair's own methods in
`auditsel.mechanisms`): the exact Gaussian profile for `GaussianBase` (the region is then exactly
the Gaussian trade-off curve, w' = Phi(mu + Phi^-1(w))); the exact finite hockey-stick for
`FiniteOutputBase` (the region is exact once the grid holds the log-likelihood ratios); for
`DpsgdBase` dp_accounting's pessimistic connect-the-dots PLD, so the bound stays rigorous for
tau < 1.

Report Noisy Max (bonus, [KRW24] Sec. 3): Theorem 3.2 eps_RNM(delta) = eps_base(delta/m) with the
noise mechanism's profile at sensitivity 2 (1 for monotone queries); Corollary 3.4 for Gaussian
noise, eps = 2/sigma^2 + (2/sigma) sqrt(2 log(m/delta)); and the RDP baseline of Zhu & Wang,
eps'(alpha) = 2 alpha/sigma^2 + log(m)/(alpha - 1), converted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.rdp import rdp_to_epsilon_continuous
from auditsel.mechanisms import DpsgdBase
from auditsel.numerics import FloatArray, IntArray, check_deltas, golden_min
from auditsel.roles import AccountedPair
from auditsel.rounds import Binomial, Poisson, RoundsLaw, TruncatedNegativeBinomial

#: the w = 1 - q grid of the Theorem 4.1 recipe: 0, then log-spaced on both sides of 1/2
_W_SIDE = np.logspace(-30, math.log10(0.5), 1200)


def region_grid() -> tuple[np.ndarray, np.ndarray]:
    """(w, q) with q = 1 - w computed without cancellation, w increasing from 0 to 1."""
    lower = np.concatenate([[0.0], _W_SIDE])  # w small, q = 1 - w
    upper = _W_SIDE[::-1][1:]  # q small, w = 1 - q
    w = np.concatenate([lower, 1.0 - upper, [1.0]])
    q = np.concatenate([1.0 - lower, upper, [0.0]])
    return w, q


def lines_index(m: ArrayLike, c: ArrayLike) -> Callable[[ArrayLike], np.ndarray]:
    """x -> for each x, the index of a line minimising m[i] x + c[i]: the lower envelope of the
    lines is built once (O(n log n)), then each x costs a binary search instead of n
    evaluations.

    A line dropped by rounding in the intersection test can only make the reported minimum
    larger (by far less than the digits reported); the region built from it then only grows,
    so the bounds that use it stay upper bounds."""
    m, c = np.asarray(m, dtype=float), np.asarray(c, dtype=float)
    order = np.lexsort((c, -m))  # slope decreasing, then intercept increasing
    ms, cs = m.tolist(), c.tolist()
    hull: list[int] = []
    for i in order.tolist():
        if hull and ms[i] == ms[hull[-1]]:
            continue  # same slope, intercept no smaller
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is useless when line i meets a no later than b does
            if (cs[i] - cs[a]) * (ms[a] - ms[b]) <= (cs[b] - cs[a]) * (ms[a] - ms[i]):
                hull.pop()
            else:
                break
        hull.append(i)
    h = np.array(hull)
    breaks = (c[h[1:]] - c[h[:-1]]) / (m[h[:-1]] - m[h[1:]])  # where the next line takes over
    return lambda x: h[np.searchsorted(breaks, np.asarray(x, dtype=float), side="left")]


def envelope_region(
    e: ArrayLike, d_set: ArrayLike, d_comp: ArrayLike
) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(w, q) -> (largest w', smallest q') over the region q <= e^e q' + d_set(e) and
    w' <= e^e w + d_comp(e) for every e of the grid `e` (a finite grid only enlarges it), with
    its mirror constraints; each min/max is a lower/upper envelope of lines (`lines_index`,
    built once), evaluated at the line it selects. One profile for both directions: d_set =
    d_comp (`BaseProfile.region`); each direction's own: `two_sided`."""
    e = np.asarray(e, dtype=float)
    da, db = np.asarray(d_set, dtype=float), np.asarray(d_comp, dtype=float)
    up, down = np.exp(e), np.exp(-e)
    i1 = lines_index(up, db)  # w' <= e^e w + db
    i2 = lines_index(-down, down * da + 1.0)  # w' <= 1 - e^-e (q - da)
    i3 = lines_index(-down, down * da)  # q' >= e^-e (q - da)
    i4 = lines_index(up, db - 1.0)  # q' >= 1 - db - e^e w

    def region(w: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        j1, j2, j3, j4 = i1(w), i2(q), i3(q), i4(w)
        w_max = np.minimum(up[j1] * w + db[j1], 1.0 - down[j2] * (q - da[j2]))
        q_min = np.maximum((q - da[j3]) * down[j3], 1.0 - db[j4] - up[j4] * w)
        w_max, q_min = np.clip(w_max, 0.0, 1.0), np.clip(q_min, 0.0, 1.0)
        return np.maximum(w_max, w), np.minimum(q_min, q)

    return region


@dataclass(frozen=True)
class BaseProfile:
    """delta_Q(eps) (max over directions), its inverse, and the post-processing region."""

    delta: Callable[[np.ndarray], np.ndarray]
    epsilon: Callable[[float], float]
    eps_grid: np.ndarray  # where the region and the eps1 scans look
    exact_region: Callable | None = None  # w -> (w'max, q'min) when known in closed form
    name: str = ""
    _lines: dict = field(default_factory=dict, compare=False, repr=False)

    def region(self, w: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Largest w' = 1 - q' (and smallest q') over the post-processings with 1 - q = w::

            w'max = min over e of min(e^e w + d(e), 1 - e^-e (q - d(e))),
            q'min = max over e of max((q - d(e)) e^-e, 1 - d(e) - e^e w),

        e over `eps_grid`; each min/max is a lower/upper envelope of lines, evaluated at the
        line it selects with the formula above."""
        if self.exact_region is not None:
            return self.exact_region(w, q)
        if not self._lines:
            e = np.asarray(self.eps_grid, dtype=float)
            d = np.asarray(self.delta(e), dtype=float)
            self._lines["region"] = envelope_region(e, d, d)  # one profile: both sides' d
        return self._lines["region"](w, q)


def base_profile(base: AccountedPair) -> BaseProfile:
    """The privacy profile of a mechanism pair, from the pair's own methods (`mechanisms`):
    delta(eps), its inverse, the scan grid and the exact region where the pair has one."""
    if isinstance(base, DpsgdBase):  # its PLD on the finer grid where cheap (`profile_step`)
        return BaseProfile(
            lambda e: np.asarray(base.profile_delta(e), dtype=float),
            base.profile_epsilon_fine,
            base.profile_grid(),
            base.region,
            type(base).__name__,
        )
    return BaseProfile(
        base.delta, base.profile_epsilon, base.profile_grid(), base.region, type(base).__name__
    )


def _scan_min(values_fn, grid: np.ndarray, feasible=None) -> float:
    """min over eps1 on the grid (any eps1 gives a valid shift), then a local refinement."""
    # e^eps1 far above the minimum overflows to inf: the right value
    with np.errstate(over="ignore"):
        vals = np.asarray(values_fn(grid), dtype=float)
    if feasible is not None:
        vals = np.where(feasible(grid), vals, np.inf)
    i = int(np.argmin(vals))
    best = float(vals[i])
    if not math.isfinite(best):
        return math.inf
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    if hi > lo:

        def f(x):
            x = np.array([x])
            if feasible is not None and not feasible(x)[0]:
                return math.inf
            return float(values_fn(x)[0])

        # golden section (an infeasible eps1 scores inf and is never kept); the value returned
        # is a real evaluation of f, so it is a valid shift whatever the accuracy of the search
        _, value = golden_min(f, float(lo), float(hi), steps=60)
        if value < best:
            best = float(value)
    return best


def tnb_shift(profile: BaseProfile, eta: float, nu: float) -> float:
    """(eta + 1) L* of [KRW24] Theorem 5.2 (the shift minimised over eps1 once)."""
    ratio = (1 - nu) / nu
    lstar = _scan_min(lambda e: np.log(np.exp(e) + ratio * profile.delta(e)), profile.eps_grid)
    return (eta + 1) * lstar


def poisson_shift(profile: BaseProfile, mean: float) -> float:
    """Corollary 5.8: min_eps1 m (e^eps1 - 1) + m delta_Q(eps1)."""
    return _scan_min(lambda e: mean * np.expm1(e) + mean * profile.delta(e), profile.eps_grid)


def binomial_shift(profile: BaseProfile, n: int, p: float) -> float:
    """Theorem 5.7: min over feasible eps1 of (n-1) log(1 + p(e^eps1 - 1) + p delta_Q(eps1))."""
    if p >= 1:
        return math.inf
    feasible = lambda e: e >= np.log1p(p / (1 - p) * profile.delta(e)) - 1e-15
    return _scan_min(
        lambda e: (n - 1) * np.log1p(p * np.expm1(e) + p * profile.delta(e)),
        profile.eps_grid,
        feasible,
    )


def _log_gprime(law: RoundsLaw, z, w):
    with np.errstate(divide="ignore", invalid="ignore"):
        log_z = np.where(w < 0.5, np.log1p(-np.minimum(w, 0.5)), np.log(np.maximum(z, 0)))
        return np.asarray(law.log_pgf_derivative(z, w, log_z=log_z), dtype=float)


def _refine_cells(lo_w, hi_w, lo_q, hi_q, pieces: int = 16):
    """Interior points splitting each cell [lo_w, hi_w] into `pieces` (geometric in the smaller
    of w and q = 1 - w, so that both stay accurate)."""
    t = np.linspace(0.0, 1.0, pieces + 1)[1:-1][None, :]
    lower = (hi_w <= 0.5)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        # geometric in w (lower half) or in q (upper half); linear when an end is 0
        gw = np.where(
            lo_w[:, None] > 0,
            lo_w[:, None] * (hi_w / np.where(lo_w > 0, lo_w, 1))[:, None] ** t,
            lo_w[:, None] + (hi_w - lo_w)[:, None] * t,
        )
        gq = np.where(
            hi_q[:, None] > 0,
            lo_q[:, None] * (hi_q / lo_q)[:, None] ** t,
            lo_q[:, None] + (hi_q - lo_q)[:, None] * t,
        )
    new_w = np.where(lower, gw, 1.0 - gq)
    new_q = np.where(lower, 1.0 - gw, gq)
    return new_w.ravel(), new_q.ravel()


def _region_values(
    profile: BaseProfile, law: RoundsLaw, w: FloatArray, q: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(log G'(q), log G'(q')) at each point (w, q) of the region's grid, with (w', q') the
    region's most powerful test there (`BaseProfile.region`)."""
    w_max, q_min = profile.region(w, q)
    return _log_gprime(law, q, w), _log_gprime(law, q_min, w_max)


def region_sup(
    profile: BaseProfile,
    law: RoundsLaw,
    a: ArrayLike = 1.0,
    b: ArrayLike = 1.0,
    tol: ArrayLike = 1e-6,
    max_rounds: int = 12,
) -> FloatArray:
    """Rigorous upper bound on sup over the region of  a log G'(q) - b log G'(q')  (a, b >= 0,
    broadcast as arrays over orders), by cell bounds on an adaptively refined grid; the grid is
    refined until each row's bound is within `tol` (per row) of its best grid point, or for
    `max_rounds` rounds (the bound is rigorous at every round, only less tight)."""
    return region_cells(profile, law, a, b, tol, max_rounds)[2]


def _best_points(
    a: FloatArray,
    b: FloatArray,
    top: FloatArray,
    bottom: FloatArray,
    fresh_and_best: tuple[IntArray, FloatArray | None] | None,
) -> FloatArray:
    """Per row, the best grid point a*top - b*bottom (nan read as -inf). Without
    `fresh_and_best` (`running`): the best at w <= w_(i+1), per cell. With (fresh, best): the
    max over all points, the larger of the previous rounds' max `best` (None at first) and the
    max over the new columns `fresh` (max is exact in any order)."""
    if fresh_and_best is None:
        with np.errstate(invalid="ignore"):
            point = a * top[None, :] - b * bottom[None, :]
        point = np.where(np.isnan(point), -np.inf, point)
        return np.maximum.accumulate(point, axis=1)[:, 1:]
    fresh, best = fresh_and_best
    with np.errstate(invalid="ignore"):
        point = a * top[None, fresh] - b * bottom[None, fresh]
    best_new = np.fmax.reduce(point, axis=1, keepdims=True, initial=-np.inf)
    return best_new if best is None else np.fmax(best, best_new)


def _worst_cells(cell: FloatArray, idx: IntArray, best_point: FloatArray) -> IntArray:
    """The 800 cells of `idx` farthest above the best point (a nan cell reads as inf), in grid
    order: the refinement's work stays bounded."""
    picked = cell[:, idx]
    picked[np.isnan(picked)] = np.inf
    worst = np.argsort(np.max(picked - best_point, axis=0))[::-1][:800]
    return idx[np.sort(worst)]


def region_cells(
    profile: BaseProfile,
    law: RoundsLaw,
    a: ArrayLike = 1.0,
    b: ArrayLike = 1.0,
    tol: ArrayLike = 1e-6,
    max_rounds: int = 12,
    *,
    running: bool = False,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """`region_sup` with its final grid: (w, cells, bound), w the grid of w = 1 - q (increasing
    from 0 to 1), cells[r, i] a rigorous upper bound of row r's function over the region's
    points with w in [w_i, w_(i+1)], bound[r] >= max_i cells[r, i] (equal unless the rounds
    ran out). `running`: refine until every cell is within `tol` of the best grid point at
    w <= w_(i+1) (the running max `layers` reads), not only of the best point overall."""
    a = np.atleast_1d(np.asarray(a, dtype=float))[:, None]
    b = np.atleast_1d(np.asarray(b, dtype=float))[:, None]
    tol = np.broadcast_to(np.asarray(tol, dtype=float), (max(len(a), len(b)),))[:, None]
    w, q = region_grid()
    top, bottom = _region_values(profile, law, w, q)
    best = None  # (not `running`) the best point per row over the grid's columns `fresh`
    fresh = np.arange(len(w))
    for _ in range(max_rounds):
        best_point = _best_points(a, b, top, bottom, None if running else (fresh, best))
        best = None if running else best_point
        # a nan cell reads as inf (no bound there), applied only where it shows: a nan in a row
        # makes its max inf, and a nan or inf cell is never refined
        with np.errstate(invalid="ignore"):
            cell = a * top[None, :-1]
            cell -= b * bottom[None, 1:]
            bound = np.max(cell, axis=1)
        bound[np.isnan(bound)] = np.inf
        with np.errstate(invalid="ignore"):
            open_cells = cell > best_point + tol
            open_cells &= cell < np.inf
        sel = np.any(open_cells, axis=0)
        if not np.any(sel):
            cell[np.isnan(cell)] = np.inf
            break
        idx = np.nonzero(sel)[0]
        if len(idx) > 800:  # keep the work bounded: refine the worst cells first
            idx = _worst_cells(cell, idx, best_point[:, idx] if running else best_point)
        sub_w, sub_q = _refine_cells(w[idx], w[idx + 1], q[idx], q[idx + 1])
        # the region and log G' of the new points only (both are point by point)
        sub_top, sub_bottom = _region_values(profile, law, sub_w, sub_q)
        n_old = len(w)
        w, keep = np.unique(np.concatenate([w, sub_w]), return_index=True)
        if np.count_nonzero(keep < n_old) < n_old:  # an old point dropped: the max over all
            best, fresh = None, np.arange(len(w))
        else:  # the new points' places on the merged grid
            fresh = np.flatnonzero(keep >= n_old)
        q = np.concatenate([q, sub_q])[keep]
        top = np.concatenate([top, sub_top])[keep]
        bottom = np.concatenate([bottom, sub_bottom])[keep]
    else:  # the cells of the last refinement's grid (`bound`: the round before, as it was)
        with np.errstate(invalid="ignore"):
            cell = a * top[None, :-1] - b * bottom[None, 1:]
        cell = np.where(np.isnan(cell), np.inf, cell)
    return w, cell, np.maximum(bound, -np.inf)


def _profile_tilde(profile: BaseProfile, e: np.ndarray) -> np.ndarray:
    """sup_T Q(T) - e^e P(T) for every real e from the profile (max over directions): delta(e)
    for e >= 0; 1 - e^e + e^e delta(-e) for e < 0 (the complement of T)."""
    e = np.asarray(e, dtype=float)
    pos = np.asarray(profile.delta(np.abs(e)), dtype=float)
    with np.errstate(over="ignore"):
        neg = -np.expm1(e) + np.exp(np.minimum(e, 0.0)) * pos
    return np.clip(np.where(e >= 0, pos, neg), 0.0, 1.0)


#: at most this many layers in `layered_delta` (merged: a valid, slightly larger bound)
_LAYERS = 400
#: the cells `layers` reads are refined until each is within LAYER_TOL nats of the region's
#: best grid point at smaller w (the running max c(s) is read per layer, so every cell's slack
#: reaches the bound, not only the largest cell's), for at most LAYER_ROUNDS rounds
LAYER_TOL = 1e-3
LAYER_ROUNDS = 12


@dataclass(frozen=True)
class Layers:
    """The layers of `layered_delta` for one law: G'(0), the increments of G' over the
    layers and each layer's shift c and Q-mass cap (see `layered_delta`)."""

    g0: float
    rise: np.ndarray
    shift: np.ndarray
    cap: np.ndarray


def layers(profile: BaseProfile, law: RoundsLaw) -> Layers:
    """The layers of `layered_delta` from the Theorem 4.1 recipe's cells (`region_cells`):
    on the layer s in [q_(i+1), q_i] (q = 1 - w on the cells' grid), the shift c(s) is at most
    the largest cell bound over w <= w_(i+1) (a running max) and the cap 1 - s at most
    w_(i+1); G'(q_i) - G'(q_(i+1)) rounded up (`score_search.LAW_REL`)."""
    w, cells, _ = region_cells(profile, law, tol=LAYER_TOL, max_rounds=LAYER_ROUNDS, running=True)
    cmax = np.maximum.accumulate(np.maximum(cells[0], 0.0))  # c(s) for w <= w_(i+1)
    q = 1.0 - w
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g = np.asarray(law.pgf_derivative(q, w), dtype=float)
    rel = 4096 * float(np.finfo(float).eps)  # the pgf derivative's relative error, with margin
    hi, lo = g[:-1] * (1 + rel), g[1:] * (1 - rel)
    rise = np.where(np.isfinite(hi), np.maximum(hi - lo, 0.0), np.inf)
    g0 = float(law.pgf_derivative(np.array([0.0]), np.array([1.0]))[0]) * (1 + rel)
    # merged into at most _LAYERS groups of about equal rise: a group takes its members' largest
    # shift and cap (the last member's: both are non-decreasing along w) and their summed rise,
    # which only enlarges the bound
    total = float(np.sum(rise))
    if not math.isfinite(total) or total <= 0 or len(rise) <= _LAYERS:
        return Layers(g0, rise, cmax, w[1:].copy())
    before = np.concatenate([[0.0], np.cumsum(rise)[:-1]])
    group = np.minimum((before / total * _LAYERS).astype(np.int64), _LAYERS - 1)
    first = np.flatnonzero(np.diff(np.concatenate([[-1], group])))
    last = np.concatenate([first[1:] - 1, [len(rise) - 1]])
    summed = np.add.reduceat(rise, first) * (1 + len(rise) * rel)
    return Layers(g0, summed, cmax[last], w[1:][last])


def layered_delta(profile: BaseProfile, lay: Layers, eps: float) -> float:
    """A rigorous upper bound on the tuning run's delta(eps) for any score (the layered profile
    bound, docs/explanation/bounds.md)::

        delta_A(eps) <= G'(0) Psi(0) + integral_0^1 G''(s) Psi(s) ds,
        Psi(s) = min(1 - s, dt(eps - c(s))),   dt(e) = sup_T Q(T) - e^e P(T),

    c(s) the Theorem 4.1 recipe's shift over the region's points with q >= s; each layer takes
    its largest c and cap (Psi is non-increasing in s)."""
    return layered_sum(lay, lambda e: _profile_tilde(profile, e), eps)


def layered_sum(lay: Layers, tilde: Callable[[np.ndarray], np.ndarray], eps: float) -> float:
    """`layered_delta` with dt = `tilde` (`two_sided`: each direction's own)."""
    psi = np.minimum(lay.cap, tilde(eps - lay.shift))
    psi0 = min(1.0, float(tilde(np.array([eps - lay.shift[-1]]))[0]))
    with np.errstate(invalid="ignore"):
        total = lay.g0 * psi0 + float(np.sum(np.where(psi > 0, lay.rise * psi, 0.0)))
    return total * (1 + 1e-12)


def layered_epsilon(
    base: AccountedPair,
    law: RoundsLaw,
    delta: ArrayLike,
    profile: BaseProfile | None = None,
    *,
    start: ArrayLike | None = None,
) -> FloatArray:
    """The smallest eps (bisection to 1e-6 relative, the upper end kept) with `layered_delta`
    <= delta, at each delta; inf at delta = 0 and where no eps up to `start` (an eps known to
    satisfy it, default [KRW24]'s `profile_epsilon`, or 1e3) or a little above it gets there.
    One set of layers serves every delta."""
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    if not np.any(deltas > 0):
        return out
    profile = profile or base_profile(base)
    lay = layers(profile, law)
    tops = np.broadcast_to(
        np.asarray(profile_epsilon(base, law, deltas, profile) if start is None else start),
        deltas.shape,
    )
    for i, d in enumerate(deltas.tolist()):
        if d <= 0:
            continue
        top = float(tops[i]) if math.isfinite(float(tops[i])) else 1e3
        lo, hi = 0.0, top
        for k in range(40):  # above `start` where the layers' rounding puts it a little higher
            if layered_delta(profile, lay, hi) <= d:
                out[i] = smallest_eps(lambda e: layered_delta(profile, lay, e), d, lo, hi)
                break
            lo, hi = hi, top + 1e-6 * 2.0**k * max(1.0, top)
    return out


def smallest_eps(f: Callable[[float], float], d: float, lo: float, hi: float) -> float:
    """The smallest eps in [lo, hi] with f(eps) <= d (f non-increasing, f(hi) <= d) by bisection
    to 1e-6 relative, the upper end kept; 0 where lo = 0 and f(0) <= d."""
    if lo == 0.0 and f(0.0) <= d:
        return 0.0
    while hi - lo > 1e-6 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if f(mid) <= d:
            hi = mid
        else:
            lo = mid
    return hi


def general_shift(profile: BaseProfile, law: RoundsLaw) -> float:
    """Theorem 4.1 recipe: sup of log G'(q) - log G'(q') over the post-processing region."""
    return max(float(region_sup(profile, law)[0]), 0.0)


def profile_shift(profile: BaseProfile, law: RoundsLaw) -> float:
    """The shift c for this law: the smaller of Theorem 5.2 and the Theorem 4.1 recipe (TNB),
    Corollary 5.8 (Poisson), Theorem 5.7 (binomial, when some eps1 is feasible), else the
    Theorem 4.1 recipe.

    TNB: both shifts are valid, so their minimum is (module docstring). Theorem 5.2 bounds
    log(G'(q)/G'(q')) = (eta + 1) log((nu + (1-nu) w') / (nu + (1-nu) w)) on the region by
    (eta + 1) log(e^eps1 + (1-nu)/nu delta(eps1)), relaxing nu <= e^eps1 nu and w >= 0 (its
    proof, [KRW24] Appendix C.1); the recipe bounds the same supremum directly, cell by cell,
    and is often much smaller. For Poisson and binomial laws the recipe gives the theorems'
    shifts, so it is not asked."""
    if isinstance(law, TruncatedNegativeBinomial):
        return min(tnb_shift(profile, law.eta, law.nu), general_shift(profile, law))
    if isinstance(law, Poisson):
        return poisson_shift(profile, law.mean)
    if isinstance(law, Binomial):
        c = binomial_shift(profile, law.n, law.p)
        if math.isfinite(c):
            return c
    return general_shift(profile, law)


@overload
def profile_epsilon(
    base: AccountedPair,
    law: RoundsLaw,
    delta: float,
    profile: BaseProfile | None = None,
    *,
    shift: Callable[[BaseProfile, RoundsLaw], float] | None = None,
) -> float: ...
@overload
def profile_epsilon(
    base: AccountedPair,
    law: RoundsLaw,
    delta: np.ndarray | Sequence[float],
    profile: BaseProfile | None = None,
    *,
    shift: Callable[[BaseProfile, RoundsLaw], float] | None = None,
) -> FloatArray: ...
def profile_epsilon(
    base: AccountedPair,
    law: RoundsLaw,
    delta: ArrayLike,
    profile: BaseProfile | None = None,
    *,
    shift: Callable[[BaseProfile, RoundsLaw], float] | None = None,
) -> FloatArray | float:
    """eps_A(delta) = eps_Q(delta/m) + c  ([KRW24], see the module docstring), for one delta
    (a float) or an array of deltas (an array; the shift c is computed once). inf at delta = 0
    (a profile bound needs delta > 0); a delta outside [0, 1) is a ConfigError. `shift`: the
    function giving c (default `profile_shift`; e.g. Theorem 5.2 alone for a TNB law:
    `lambda prof, law: tnb_shift(prof, law.eta, law.nu)`)."""
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    if np.any(deltas > 0):
        profile = profile or base_profile(base)
        c = (shift or profile_shift)(profile, law)
        m = law.mean
        for i, dl in enumerate(deltas):
            if dl <= 0:
                continue
            d = dl / m
            out[i] = (
                (max(c, 0.0) if c > 0 else 0.0)
                if d >= 1
                else max(float(profile.epsilon(d)) + c, 0.0)
            )
    return out if np.ndim(delta) else float(out[0])


# --- Report Noisy Max (bonus) ----------------------------------------------------------------


def rnm_epsilon(noise_profile_epsilon: Callable[[float], float], m: int, delta: float) -> float:
    """Theorem 3.2: eps_RNM(delta) = eps_noise(delta / m) (noise profile at sensitivity 2, or 1
    for monotone queries)."""
    delta = float(check_deltas(delta)[0])
    return float(noise_profile_epsilon(delta / m))


def rnm_gaussian_closed_form(sigma: float, m: int, delta: float) -> float:
    """Corollary 3.4: 2/sigma^2 + (2/sigma) sqrt(2 log(m/delta)) (sensitivity-2 Gaussian noise);
    inf at delta = 0."""
    delta = float(check_deltas(delta)[0])
    if delta == 0:
        return math.inf
    return 2 / sigma**2 + (2 / sigma) * math.sqrt(2 * math.log(m / delta))


def rnm_gaussian_rdp(sigma: float, m: int, delta: float) -> float:
    """Zhu & Wang RDP baseline 2 alpha/sigma^2 + log(m)/(alpha - 1), converted (continuous alpha)."""
    return float(
        rdp_to_epsilon_continuous(lambda a: 2 * a / sigma**2 + math.log(m) / (a - 1), delta)
    )
