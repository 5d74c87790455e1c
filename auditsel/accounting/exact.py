"""Exact privacy curve of the released winner (rigorous: it is the true curve of the pair).

For the winner laws A (on X) and A' (on X') of `auditsel.selection`, the privacy curve is ::

    delta(eps) = max{ H_{e^eps}(A || A'), H_{e^eps}(A' || A) },
    H_{e^eps}(P || Q) = sum_y [P(y) - e^eps Q(y)]_+        ([KRW24] Definitions; [DGKKM22] eq. 1)

and the exact epsilon at delta is the smallest eps >= 0 with delta(eps) <= delta.

Finite outputs: the sum above, term by term.

Gaussian base (the reduced game): H = P(S) - e^eps Q(S) with S = {x : log p(x) - log q(x) > eps}.
We locate S as a union of intervals (sign changes of the log-likelihood ratio on a fine grid,
found by binary search on the grid's monotone pieces, refined by bisection: both directions
and every level in one bisection) and take log P(S), log Q(S) from the winner's law in log space
(`GaussianWinner.log_mass`: log_ndtr and the laws' log-space pgf forms), so that
log H = log P(S) + log(1 - e^(eps + log Q(S) - log P(S))) keeps full relative precision for every
delta a double holds (1e-300 and below: the two masses there are far below the smallest
double). The root of log H(eps) = log delta is found on log H directly. Since p = e^eps q on
the boundary of S, an error in a boundary point changes H only at second order. The fixed
output of K = 0 carries the same mass on both sides and adds [atom (1 - e^eps)]_+.
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache
from typing import TYPE_CHECKING, cast, overload

import numpy as np
from numpy.typing import ArrayLike

from auditsel.mechanisms import hockey_stick_finite
from auditsel.numerics import FloatArray, bisect, check_deltas
from auditsel.roles import Winner

if TYPE_CHECKING:
    from auditsel.selection import FiniteWinner, GaussianWinner

GRID_STEP = 2e-3
GRID_MARGIN = 40.0
BISECTION_STEPS = 45  # 2e-3 / 2^45 ~ 6e-17: below double precision of the roots
EPS_CAP = 1e4  # exact_epsilon answers inf above this
NEWTON_STEPS = 200
LEVEL_BLOCK = 1 << 24  # grid points x levels compared at once (16 MB of booleans)
MAX_PIECES = 64  # monotone pieces of a scan searched piece by piece (`_crossings`)


def _llr_grid(winner: GaussianWinner, direction: int) -> tuple[FloatArray, FloatArray]:
    """The log-likelihood ratio log p_dir / p_other on the scan grid (computed once per
    hashable winner: direction 0 is direction 1's negation, exactly; read-only arrays)."""
    try:
        hash(winner)
    except TypeError:  # a law of K that is not hashable (a table): computed afresh
        grid, llr = _llr_scan.__wrapped__(winner)
    else:
        grid, llr = _llr_scan(winner)
    if direction == 1:
        return grid, llr
    negated = -llr
    negated.flags.writeable = False
    return grid, negated


@lru_cache(maxsize=16)
def _llr_scan(winner: GaussianWinner) -> tuple[FloatArray, FloatArray]:
    """(grid, log p_1 / p_0 on it), cached per winner."""
    grid = np.arange(-GRID_MARGIN, winner.mu + GRID_MARGIN + GRID_STEP, GRID_STEP)
    llr = winner.log_likelihood_ratio(grid)
    grid.flags.writeable = False
    llr.flags.writeable = False
    return grid, llr


def _crossings(values: FloatArray, levels: FloatArray) -> tuple[np.ndarray, np.ndarray]:
    """(lev, pos): every pair of neighbours of the scan on either side of a level, i.e. with
    (values[pos] > c) != (values[pos + 1] > c), c = levels[lev], sorted by level, then by
    position (np.nonzero's order over the levels x grid comparisons).

    The scan splits into pieces on which it is monotone (a few for a winner's ratio); a
    monotone piece crosses a level at most once, found by binary search, so the levels cost
    O(pieces x log(grid)) each instead of a comparison with every grid point. A scan with more
    than MAX_PIECES pieces or with non-finite values is compared point by point (the same
    pairs either way: they are integers)."""
    step = np.sign(np.diff(values))
    moving = np.nonzero(step)[0]  # flat pairs never cross a level
    turns = moving[1:][step[moving[1:]] != step[moving[:-1]]]
    if len(turns) >= MAX_PIECES or not np.all(np.isfinite(values)):
        return _crossings_dense(values, levels)
    bounds = [0, *turns.tolist(), len(values) - 1]  # piece k: values[bounds[k] .. bounds[k+1]]
    lev_parts, pos_parts = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        up = step[moving[np.searchsorted(moving, lo)]] > 0 if len(moving) else True
        piece = values[lo : hi + 1]
        size = len(piece)
        # on a non-decreasing piece the points above c are a suffix, on a non-increasing piece
        # a prefix: the crossing is the pair at its edge, if both sides are non-empty
        at_or_below = np.searchsorted(piece if up else piece[::-1], levels, side="right")
        before = at_or_below if up else size - at_or_below  # points on the first side
        hit = np.nonzero((before > 0) & (before < size))[0]
        lev_parts.append(hit)
        pos_parts.append(lo + before[hit] - 1)
    lev, pos = np.concatenate(lev_parts), np.concatenate(pos_parts)
    order = np.lexsort((pos, lev))
    return lev[order], pos[order]


def _crossings_dense(values: FloatArray, levels: FloatArray) -> tuple[np.ndarray, np.ndarray]:
    """`_crossings` by comparing every level with every grid point (LEVEL_BLOCK at a time)."""
    lev_parts, pos_parts = [], []
    block = max(1, LEVEL_BLOCK // len(values))  # bounded memory: levels x grid booleans
    for start in range(0, len(levels), block):
        above = values[None, :] > levels[start : start + block, None]
        lev, pos = np.nonzero(above[:, 1:] != above[:, :-1])
        lev_parts.append(lev + start)
        pos_parts.append(pos)
    return np.concatenate(lev_parts), np.concatenate(pos_parts)


def likelihood_ratio_region_masses(
    winner: GaussianWinner,
    levels: ArrayLike,
    direction: int = 1,
    scan: tuple[FloatArray, FloatArray] | None = None,
    log: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """For each level c: (P_dir(S_c), P_other(S_c)) with S_c = {x : log p_dir(x)/p_other(x) > c}
    (their logs with log=True, exact far below the smallest double).

    Gaussian winner only (real line; the K = 0 atom, where the ratio is 1, is left out).
    S_c is a union of intervals: sign changes of the log-likelihood ratio on a fine grid,
    refined by bisection; masses from the winner's cdf (`GaussianWinner.mass`). All levels are
    refined together (one bisection over every boundary of every level).
    """
    levels = np.atleast_1d(np.asarray(levels, dtype=float))
    if len(levels) == 0:
        return (np.full(0, -np.inf),) * 2 if log else (np.zeros(0), np.zeros(0))
    log_p, log_q = _region_log_masses(winner, [(levels, direction, scan)])[0]
    if log:
        return log_p, log_q
    return np.exp(log_p), np.exp(log_q)


def _region_log_masses(
    winner: GaussianWinner,
    problems: list[tuple[FloatArray, int, tuple[FloatArray, FloatArray] | None]],
) -> list[tuple[FloatArray, FloatArray]]:
    """`likelihood_ratio_region_masses(..., log=True)` of several (levels, direction, scan),
    each non-empty, with one bisection over the boundaries of all of them and one evaluation
    of the winner's masses per member: every number is computed by the same elementwise
    operations as for each problem alone (`tests/accounting/test_same_bits.py`)."""
    found = []
    for levels, direction, scan in problems:
        grid, values = scan if scan is not None else _llr_grid(winner, direction)
        lev, pos = _crossings(values, levels)  # crossings, level by level, left to right
        c = levels[lev]
        found.append((lev, values[0] > levels, c, grid[pos], grid[pos + 1], values[pos] > c))
    sizes = [len(f[0]) for f in found]
    c = np.concatenate([f[2] for f in found])
    lo, hi = np.concatenate([f[3] for f in found]), np.concatenate([f[4] for f in found])
    lo_above = np.concatenate([f[5] for f in found])
    sign = np.repeat([1.0 if p[1] == 1 else -1.0 for p in problems], sizes)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        move_lo = (sign * winner.log_likelihood_ratio(mid) > c) == lo_above
        lo = np.where(move_lo, mid, lo)
        hi = np.where(move_lo, hi, mid)
    roots = np.split(0.5 * (lo + hi), np.cumsum(sizes)[:-1])
    cells = [_region_cells(f[0], f[1], r) for f, r in zip(found, roots)]
    counts = np.cumsum([len(cell[0]) for cell in cells])[:-1]
    a, b = np.concatenate([cell[0] for cell in cells]), np.concatenate([cell[1] for cell in cells])
    mass = [np.split(winner.log_mass(a, b, member), counts) for member in (0, 1)]
    return [
        (
            _segment_logsumexp(mass[direction][k], cell[2], len(levels)),
            _segment_logsumexp(mass[1 - direction][k], cell[2], len(levels)),
        )
        for k, ((levels, direction, _), cell) in enumerate(zip(problems, cells))
    ]


def _region_cells(
    lev: np.ndarray, first: np.ndarray, roots: FloatArray
) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """(a, b, level) of the intervals (a, b] making up each level's region S_c."""
    n = len(first)
    # pieces of each level: (-inf, r_1], (r_1, r_2], ..., (r_m, inf); piece 0 is inside S_c when
    # the grid's first point is above c, and each crossing flips the state
    per_level = np.bincount(lev, minlength=n)
    piece_level = np.repeat(np.arange(n), per_level + 1)
    group_start = np.concatenate([[0], np.cumsum(per_level + 1)[:-1]])
    rank = np.arange(len(piece_level)) - group_start[piece_level]
    a = np.full(len(piece_level), -np.inf)
    b = np.full(len(piece_level), np.inf)
    is_first = rank == 0
    is_last = rank == per_level[piece_level]
    a[~is_first] = roots
    b[~is_last] = roots
    inside = first[piece_level] ^ (rank % 2 == 1)
    return a[inside], b[inside], piece_level[inside]


def _segment_logsumexp(values: FloatArray, segment: np.ndarray, n: int) -> FloatArray:
    """log sum exp of `values` per segment index (0..n-1); -inf for an empty segment."""
    top = np.full(n, -np.inf)
    np.maximum.at(top, segment, values)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.exp(values - safe[segment])
        total = np.bincount(segment, weights=np.where(np.isnan(scaled), 0.0, scaled), minlength=n)
        out = np.log(total) + safe
    return np.where(np.isposinf(top), np.inf, np.where(np.isneginf(top), -np.inf, out))


def _log_h_and_slope(
    eps: FloatArray, log_p: FloatArray, log_q: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(log H, d log H / d eps), H = P(S_eps) - e^eps Q(S_eps) on the real line, from log P(S_eps)
    and log Q(S_eps) (the K = 0 atom left out: it adds nothing for eps >= 0). S_eps maximises
    P - e^eps Q, so dH/d eps = -e^eps Q(S_eps) (only the explicit dependence counts)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = eps + log_q - log_p  # log(e^eps Q / P), < 0 where H > 0 (nan: S empty)
        log_h = np.where(ratio < 0, log_p + np.log(-np.expm1(np.minimum(ratio, 0.0))), -np.inf)
        slope = -np.exp(eps + log_q - log_h)
    return log_h, slope


def _gaussian_log_hockey_sticks(
    winner: GaussianWinner,
    eps: FloatArray,
    scans: tuple[tuple[FloatArray, FloatArray] | None, tuple[FloatArray, FloatArray] | None],
) -> list[tuple[FloatArray, FloatArray]]:
    """`_log_h_and_slope` of directions 0 and 1 (one bisection for both)."""
    eps = np.atleast_1d(np.asarray(eps, dtype=float))
    problems = [(eps, k, scans[k]) for k in (0, 1)]
    masses = _region_log_masses(winner, problems) if len(eps) else [(eps, eps)] * 2
    return [_log_h_and_slope(eps, log_p, log_q) for log_p, log_q in masses]


def _with_atom(winner: GaussianWinner, eps: FloatArray, log_h: FloatArray) -> FloatArray:
    """H_{e^eps} on the real line (exp(log_h)) plus the K = 0 atom's [atom (1 - e^eps)]_+
    (positive for eps < 0 only)."""
    # clip eps so that expm1 cannot overflow (atom = 0 times -inf was nan)
    return np.exp(log_h) + np.maximum(winner.atom * -np.expm1(np.minimum(eps, 0.0)), 0.0)


def tradeoff_curve(winner: Winner, points: int = 200) -> tuple[FloatArray, FloatArray]:
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
    gaussian = cast("GaussianWinner", winner)  # a winner without `pmf`: on the real line
    lo, hi = gaussian.quantile_range(1e-9)
    values = winner.log_likelihood_ratio(np.linspace(lo, hi, 2001))
    levels = np.linspace(values.min(), values.max(), points)
    p1, p0 = likelihood_ratio_region_masses(gaussian, levels, direction=1)
    return np.clip(p0, 0, 1), np.clip(1 - p1, 0, 1)  # the K = 0 output is guessed X


def hockey_stick(
    winner: Winner,
    eps: ArrayLike,
    direction: int = 0,
    scan: tuple[FloatArray, FloatArray] | None = None,
) -> FloatArray | float:
    """H_{e^eps}(A || A') (direction 0) or H_{e^eps}(A' || A) (direction 1), vectorised in eps.

    `scan`: a precomputed `_llr_grid(winner, direction)`, to share across calls."""
    eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
    if hasattr(winner, "pmf"):
        a, b = winner.pmf(direction), winner.pmf(1 - direction)
        atom = winner.atom
        out = hockey_stick_finite(np.append(a, atom), np.append(b, atom), eps_arr)
    else:
        gaussian = cast("GaussianWinner", winner)
        masses = likelihood_ratio_region_masses(gaussian, eps_arr, direction, scan, log=True)
        out = _with_atom(gaussian, eps_arr, _log_h_and_slope(eps_arr, *masses)[0])
    return out if np.ndim(eps) else float(out[0])


def privacy_curve(
    winner: Winner,
    eps: ArrayLike,
    *,
    scans: tuple[tuple[FloatArray, FloatArray] | None, tuple[FloatArray, FloatArray] | None] = (
        None,
        None,
    ),
) -> FloatArray:
    """delta(eps) = max over both directions (vectorised in eps)."""
    if not hasattr(winner, "pmf"):  # a Gaussian winner: both directions' bisections as one
        gaussian = cast("GaussianWinner", winner)
        eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
        (h0, _), (h1, _) = _gaussian_log_hockey_sticks(gaussian, eps_arr, scans)
        out = np.maximum(_with_atom(gaussian, eps_arr, h0), _with_atom(gaussian, eps_arr, h1))
        return out if np.ndim(eps) else out[0]
    return np.maximum(
        hockey_stick(winner, eps, 0, scans[0]), hockey_stick(winner, eps, 1, scans[1])
    )


@overload
def exact_epsilon(winner: Winner, delta: float, *, tol: float = 1e-9) -> float: ...
@overload
def exact_epsilon(winner: Winner, delta: np.ndarray, *, tol: float = 1e-9) -> np.ndarray: ...
def exact_epsilon(
    winner: Winner, delta: float | np.ndarray, *, tol: float = 1e-9
) -> float | np.ndarray:
    """Smallest eps >= 0 with privacy_curve(winner, eps) <= delta (inf if none, or above 1e4).

    Every delta > 0 a double holds is answered in log space (1e-300 included).

    Args:
        winner: an exact winner law (`selection.winner_law`: `GaussianWinner`, `FiniteWinner`).
        delta: a float, or an array (one root search for all: a Gaussian winner's deltas
            share one scan and one batched Newton iteration), in [0, 1). At delta = 0: the
            pure eps of a finite winner (inf when the supports differ); inf for a Gaussian
            winner, whose privacy loss is unbounded.
        tol: the root's tolerance.

    Returns:
        A float for a float `delta`, an array for an array.

    Raises:
        auditsel.errors.ConfigError: a delta outside [0, 1).
    """
    deltas = check_deltas(delta)
    out = np.full(len(deltas), math.inf)
    if hasattr(winner, "pmf"):
        for i, d in enumerate(deltas):
            out[i] = _finite_epsilon(cast("FiniteWinner", winner), float(d), tol)
    else:
        ok = deltas > 0
        if ok.any():
            out[ok] = _gaussian_epsilons_once(cast("GaussianWinner", winner), deltas[ok], tol)
    return out if np.ndim(delta) else float(out[0])


_EPSILONS: dict[tuple[object, ...], FloatArray] = {}
_EPSILONS_LOCK = threading.Lock()


def _gaussian_epsilons_once(winner: GaussianWinner, deltas: FloatArray, tol: float) -> FloatArray:
    """`_gaussian_epsilons`, remembered per (winner, deltas, tol) (the panel's exact bound and
    the attack ask for the same numbers from two threads; each gets a copy). Unhashable
    winners are computed afresh."""
    try:
        key: tuple[object, ...] = (winner, tuple(deltas.tolist()), tol)
        hash(key)
    except TypeError:
        return _gaussian_epsilons(winner, deltas, tol)
    with _EPSILONS_LOCK:
        if key not in _EPSILONS:
            if len(_EPSILONS) >= 32:
                _EPSILONS.clear()
            _EPSILONS[key] = _gaussian_epsilons(winner, deltas, tol)
        kept: FloatArray = _EPSILONS[key]
        return np.array(kept, dtype=float)


def _finite_epsilon(winner: FiniteWinner, delta: float, tol: float) -> float:
    """One delta of a finite winner by bisection on log delta(eps); the pure eps at 0."""
    # privacy_curve's two hockey sticks, the winner's laws computed once (not at every eps)
    p, q = (np.append(winner.pmf(k), winner.atom) for k in (0, 1))

    def curve(e: float) -> float:
        at = np.array([e])
        return float(np.maximum(hockey_stick_finite(p, q, at), hockey_stick_finite(q, p, at))[0])

    if curve(0.0) <= delta:
        return 0.0
    if delta == 0:
        return _pure_epsilon(winner)
    hi = 1.0
    while curve(hi) > delta:
        hi *= 2
        if hi > EPS_CAP:
            return math.inf

    def f(e: float) -> float:
        value = curve(e)
        return (math.log(value) if value > 0 else -math.inf) - math.log(delta)

    return bisect(f, 0.0, hi, xtol=tol, rtol=1e-12)


def _log_curve_and_slope(
    winner: GaussianWinner,
    eps: FloatArray,
    scans: tuple[tuple[FloatArray, FloatArray], tuple[FloatArray, FloatArray]],
) -> tuple[FloatArray, FloatArray]:
    """log delta(eps) (the larger direction's hockey stick) and its derivative, for eps >= 0."""
    (v0, d0), (v1, d1) = _gaussian_log_hockey_sticks(winner, eps, scans)
    return np.maximum(v0, v1), np.where(v1 > v0, d1, d0)


def _gaussian_epsilons(winner: GaussianWinner, deltas: FloatArray, tol: float) -> FloatArray:
    """exact_epsilon at several deltas > 0 for a Gaussian winner, all at once.

    Bracket: eps = 0 and the doubling points 1, 2, 4, ..., 8192 (above 1e4 the answer is inf).
    Root of log delta(eps) - log delta in each bracket by Newton's method with the exact slope
    (all in log space), falling back to bisection whenever a step leaves the bracket; stops when
    the Newton step is below tol (the error left is of order tol^2).
    """
    scans = (_llr_grid(winner, 0), _llr_grid(winner, 1))
    doubling = 2.0 ** np.arange(0, int(math.log2(EPS_CAP)) + 1)
    points = np.concatenate([[0.0], doubling])
    at, _ = _log_curve_and_slope(winner, points, scans)
    out = np.full(len(deltas), math.inf)
    below = at[None, :] <= np.log(deltas)[:, None]  # delta(point) <= delta
    found = below.any(axis=1)
    first = np.argmax(below, axis=1)
    out[found & (first == 0)] = 0.0
    todo = np.nonzero(found & (first > 0))[0]
    if not len(todo):
        return out
    lo = points[np.maximum(first[todo] - 1, 0)]
    hi = points[first[todo]]
    target = np.log(deltas[todo])
    eps = 0.5 * (lo + hi)
    active = np.ones(len(todo), bool)
    for _ in range(NEWTON_STEPS):
        idx = np.nonzero(active)[0]
        e = eps[idx]
        log_value, slope = _log_curve_and_slope(winner, e, scans)
        f = log_value - target[idx]
        lo[idx] = np.where(f > 0, e, lo[idx])
        hi[idx] = np.where(f < 0, e, hi[idx])
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = e - f / slope  # slope = d log delta / d eps
        inside = np.isfinite(newton) & (newton >= lo[idx]) & (newton <= hi[idx])
        step = np.where(inside, newton, 0.5 * (lo[idx] + hi[idx]))
        # a Newton step below tol leaves an error of order tol^2 (quadratic convergence); the
        # noise of log delta(eps) near tiny deltas (~1e-10) would make a tighter stop bounce
        converged = (f == 0) | (inside & (np.abs(newton - e) <= tol)) | (hi[idx] - lo[idx] <= tol)
        eps[idx] = np.where(f == 0, e, step)
        active[idx[converged]] = False
        if not active.any():
            break
    else:
        raise RuntimeError(
            f"exact_epsilon: no convergence in {NEWTON_STEPS} steps at deltas {deltas[todo]}"
        )
    out[todo] = eps
    return out


def _pure_epsilon(winner: FiniteWinner) -> float:
    """max |log A(y)/A'(y)| for a finite winner (inf when the supports differ)."""
    a, b = winner.pmf(0), winner.pmf(1)
    both = (a > 0) & (b > 0)
    if np.any((a > 0) != (b > 0)):
        return math.inf
    return float(np.max(np.abs(np.log(a[both]) - np.log(b[both]))))
