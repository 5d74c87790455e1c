"""`search_rows` as it was before its numbers were computed in batches (commit bd35971):
one vectorised pass per block the best-first walk opens, with the Clopper-Pearson limit bounds
of that commit. Copied from ``auditsel/auditing/threshold_search.py`` and
``auditsel/auditing/clopper_pearson.py`` (``pair_limit_bounds``, ``_limit_bounds``, ``_kl``,
``_kl_root_below``), reformatted by ruff, with one change: ``pair_limit_bounds`` computes a
pair of upper and lower limits with this module's ``_limit_bounds`` instead of calling
today's ``CpLimits.bound`` (the same formula); ``git show
bd35971:auditsel/auditing/threshold_search.py`` shows the original. It reads the limits'
numbers (``nobs``, ``c``, ``edge``, ``upper``, ``exact``) from today's `CpLimits` and the rows
from today's `CandidateRows` (whose counts now skip some binary searches, with the same
numbers), never imported by the package; the baseline of
``benchmarks/bench_threshold_search.py`` and of ``tests/auditing/test_threshold_search.py``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from scipy.special import xlogy

if TYPE_CHECKING:
    from auditsel.auditing.clopper_pearson import CpLimits
    from auditsel.auditing.threshold_search import CandidateRows
    from auditsel.numerics import FloatArray

FANOUT = 64
LEAF = 32
ROOT_BLOCKS = 4096


def search_rows(
    rows: CandidateRows,
    n0: int,
    n1: int,
    lim0: CpLimits,
    lim1: CpLimits,
    objective: Callable[[FloatArray, FloatArray], FloatArray],
    *,
    flip: bool,
    increasing: bool = False,
    stop_above: float = math.inf,
    floor: float = -math.inf,
    fanout: int = FANOUT,
    leaf: int = LEAF,
) -> tuple[int, float, float, float]:
    """The row maximising objective(lim0(c0), lim1(c1)) over `rows` in one direction, where
    (c0, c1) = (fp, fn) for '>' and (n0 - fp, n1 - fn) for '<=' (`flip`), and the objective
    decreases in both limits (`increasing`: increases); returns (row, value, limit0, limit1),
    exact, or the first row found above `stop_above`. Rows at or below `floor` do not count:
    (-1, -inf, nan, nan) when every row is.

    Branch and bound: a block of consecutive rows is bounded by the objective at its best
    counts (the counts are monotone along the rows, so those are at its ends) with the cheap
    limit bounds; blocks are split `fanout` ways in decreasing order of their bound, and the
    rows of a block of at most `leaf` get exact limits in decreasing order of their own bound,
    until no bound is above the best value found."""
    m = rows.m
    corner = np.maximum if increasing else np.minimum  # the best counts of a block

    def counts(i):
        f, g = rows.fp(i), rows.fn(i)
        return (n0 - f, n1 - g) if flip else (f, g)

    def bounds(f, g):
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(objective(*pair_limit_bounds(lim0, f, lim1, g)), nan=np.inf)

    def children(lo: int, hi: int, ways: int = fanout):
        """Blocks splitting rows [lo, hi) `ways` ways, as (-bound, lo, hi) entries."""
        size = max(-(-(hi - lo) // ways), 1)
        starts = np.arange(lo, hi, size)
        ends = np.minimum(starts + size, hi)
        k = len(starts)
        f, g = counts(np.concatenate([starts, ends - 1]))  # both ends in one pass
        b = bounds(corner(f[:k], f[k:]), corner(g[:k], g[k:]))
        return list(zip((-b).tolist(), starts.tolist(), ends.tolist()))

    best = (-1, -math.inf, math.nan, math.nan)

    def level() -> float:  # what a bound must exceed to matter
        return max(best[1], floor) if best[0] >= 0 else floor

    heap = children(0, m, max(fanout, min(ROOT_BLOCKS, m // max(leaf, 1))))
    heapq.heapify(heap)
    while heap:
        neg, lo, hi = heapq.heappop(heap)
        if (best[0] >= 0 or floor > -math.inf) and -neg <= level():
            break
        if best[0] >= 0 and best[1] > stop_above:
            break
        if hi - lo > leaf:
            for entry in children(lo, hi):
                if (best[0] < 0 and floor == -math.inf) or -entry[0] > level():
                    heapq.heappush(heap, entry)
            continue
        idx = np.arange(lo, hi)
        f, g = counts(idx)
        opt = bounds(f, g)
        order = np.argsort(-opt, kind="stable")
        if best[0] >= 0 or floor > -math.inf:
            order = order[opt[order] > level()]
        if not len(order):
            continue
        l0, l1 = lim0.exact(f[order]), lim1.exact(g[order])
        with np.errstate(invalid="ignore"):
            value = objective(l0, l1)
        value = np.where(np.isnan(value), -np.inf, value)
        j = int(np.argmax(value))
        counts_here = value[j] > floor or (floor == -math.inf and best[0] < 0)
        if counts_here and (best[0] < 0 or value[j] > best[1]):
            best = (int(idx[order[j]]), float(value[j]), float(l0[j]), float(l1[j]))
    return best


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


def pair_limit_bounds(lim0, f, lim1, g):
    """(lim0.bound(f), lim1.bound(g)) in one pass (both upper or both lower limits)."""
    f, g = np.asarray(f, dtype=float), np.asarray(g, dtype=float)
    if lim0.upper != lim1.upper:
        return (
            _limit_bounds(lim0.upper, np.asarray(f) / max(lim0.nobs, 1), lim0.c, lim0.edge),
            _limit_bounds(lim1.upper, np.asarray(g) / max(lim1.nobs, 1), lim1.c, lim1.edge),
        )
    k = len(f)
    x = np.concatenate([f / max(lim0.nobs, 1), g / max(lim1.nobs, 1)])
    c = np.repeat([lim0.c, lim1.c], [k, len(g)])
    edge = np.repeat([lim0.edge, lim1.edge], [k, len(g)])
    out = _limit_bounds(lim0.upper, x, c, edge)
    return out[:k], out[k:]


def _kl(x, p):
    """H(x, p) = KL(Bernoulli(x) || Bernoulli(p))."""
    return xlogy(x, x) - xlogy(x, p) + xlogy(1 - x, 1 - x) - xlogy(1 - x, 1 - p)


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
        p = np.where(_kl(x, guess) >= c, guess, safe)
        p = np.where(p > x, p, np.nextafter(x, 2))
        for _ in range(steps):
            h = _kl(x, p) - c
            slope = (p - x) / (p * (1 - p))
            step = np.where((h > 0) & (slope > 0) & np.isfinite(h), h / slope, 0.0)
            p = np.maximum(p - step, x)
        h = _kl(x, p)
        chord = x + c * (p - x) / h
        root = np.where(h > c, chord, p)
        root = x + (root - x) * (1 - 1e-9)  # a margin for rounding in H
    return np.clip(np.where(np.isfinite(root), root, x), x, 1.0)
