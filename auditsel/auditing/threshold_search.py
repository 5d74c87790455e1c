"""The best threshold of eq. 4 ([XWW24]) over every candidate, exactly, at the cost of a few
hundred Clopper-Pearson limits.

Contract. `epsilon_from_rates(fp, fn, delta)` is [XWW24] eq. 4,
max{log((1 - delta - FP)/FN), log((1 - delta - FN)/FP), 0}, vectorised. `search_rows` returns
the row maximising a monotone objective of the two limits over candidate rows, exactly (branch
and bound, below); `best_on_coins` / `best_on_table` the best (threshold, direction) by eq. 4
with limits at level a, and `best_threshold` the optimistic maximum over every threshold at
level alpha each (no confidence statement: `eps_best_threshold`).

Searches. One sort serves every rule: `SortedScores` sorts each coin's scores once (two sorts
of n/2 values), and every maximum over thresholds reads counts by binary search in them. The
objective (eq. 4, or the GDP mu) decreases in each count, so in direction '>' the maximum is at
t = -inf or at a b = 0 score, in '<=' at -inf or a b = 1 score: those thresholds are the
candidates, counted on demand. Candidates are bounded in blocks by the objective at the block's
smallest counts with a cheap bound of the Clopper-Pearson limit (the exact limit at the nearest
precomputed count below, `_Limits`: the limit increases with the count), blocks are opened in
decreasing order of that bound, and inside a block exact limits are computed only while a
candidate's bound can beat the best value found: the exact maximum over every threshold at the
cost of a few hundred limits.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from auditsel.auditing.clopper_pearson import CpLimits, cp_limits, pair_limit_bounds
from auditsel.auditing.sorted_scores import Counts, SortedPart, SortedScores
from auditsel.numerics import FloatArray, IntArray, check_deltas

#: the user-facing names (the other functions are building blocks of the audits)
__all__ = ["epsilon_from_rates", "ThresholdTest"]


class ThresholdTest(TypedDict):
    """One test "guess member when score > threshold" (`flip` False) or "<= threshold" (`flip`
    True) and its eq. 4 bound: `eps` from the Clopper-Pearson upper limits `fp_u`, `fn_u` of its
    error rates, whose empirical values are `fp`, `fn`."""

    threshold: float
    flip: bool
    eps: float
    fp_u: float
    fn_u: float
    fp: float
    fn: float


FANOUT = 64  # the search splits a block of candidates this many ways

LEAF = 32  # and evaluates the candidates of a block of at most this many

ROOT_BLOCKS = 4096  # blocks bounded at once at the start (one vectorised pass)


def epsilon_from_rates(fp: ArrayLike, fn: ArrayLike, delta: float) -> NDArray[np.float64]:
    """Eq. 4 of [XWW24], vectorised; rates may be 0 (then that term is +inf unless the other
    rate makes its numerator non-positive)."""
    delta = float(check_deltas(delta)[0])
    fp = np.asarray(fp, dtype=float)
    fn = np.asarray(fn, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1 - delta - fp, 0)) - np.log(fn)
        b = np.log(np.maximum(1 - delta - fn, 0)) - np.log(fp)
    a = np.where(np.isnan(a), -np.inf, a)
    b = np.where(np.isnan(b), -np.inf, b)
    return np.maximum(np.maximum(a, b), 0.0)


class CandidateRows:
    """Candidate thresholds in ascending order and their '>' counts fp (b = 0, score > t,
    non-increasing) and fn (b = 1, score <= t, non-decreasing), each a function of an index
    array, so that a table of n rows is never built when few rows are read."""

    def __init__(
        self,
        m: int,
        threshold: Callable[[IntArray], FloatArray],
        fp: Callable[[IntArray], NDArray[np.integer]],
        fn: Callable[[IntArray], NDArray[np.integer]],
    ) -> None:
        self.m, self.threshold, self.fp, self.fn = m, threshold, fp, fn

    @classmethod
    def table(cls, t: ArrayLike, fp: ArrayLike, fn: ArrayLike) -> CandidateRows:
        t, fp, fn = np.asarray(t, dtype=float), np.asarray(fp), np.asarray(fn)
        return cls(len(t), t.__getitem__, fp.__getitem__, fn.__getitem__)

    @classmethod
    def on(cls, rows: SortedPart, p0: SortedPart, p1: SortedPart) -> CandidateRows:
        """Rows t = -inf (everything guessed 1), then the scores of `rows` ascending, counted
        in the sorted scores p0 (b = 0) and p1 (b = 1) by binary search."""
        n0 = p0.n

        def threshold(i):
            out = np.full(np.shape(i), -np.inf)
            inner = i > 0
            out[inner] = rows.value(i[inner] - 1)
            return out

        def fp(i):
            return np.where(i == 0, n0, n0 - p0.count_le(threshold(i)))

        def fn(i):
            return np.where(i == 0, 0, p1.count_le(threshold(i)))

        return cls(rows.n + 1, threshold, fp, fn)


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


def eq4_objective(delta: float) -> Callable[[FloatArray, FloatArray], FloatArray]:
    return lambda fp_u, fn_u: epsilon_from_rates(fp_u, fn_u, delta)


def best_rows(
    above: CandidateRows,
    below: CandidateRows,
    n0: int,
    n1: int,
    a: float,
    delta: float,
    directions: tuple[bool, bool] = (True, True),
) -> ThresholdTest:
    """The best (threshold, direction) by eq. 4 with CP limits at level a: '>' over the rows
    `above`, '<=' over `below`; with the numbers a rule reports."""
    lim0, lim1 = cp_limits(n0, a), cp_limits(n1, a)
    found: list = []
    for flip, rows, on in ((False, above, directions[0]), (True, below, directions[1])):
        if on:  # the second direction only counts where it beats the first ('>' on ties)
            floor = found[0][2][1] if found else -math.inf
            hit = search_rows(
                rows, n0, n1, lim0, lim1, eq4_objective(delta), flip=flip, floor=floor
            )
            if hit[0] >= 0:
                found.append((flip, rows, hit))
    flip, rows, (i, eps, fp_u, fn_u) = max(found, key=lambda x: x[2][1])
    idx = np.array([i])
    f, g = int(rows.fp(idx)[0]), int(rows.fn(idx)[0])
    f, g = (n0 - f, n1 - g) if flip else (f, g)
    return ThresholdTest(
        threshold=float(rows.threshold(idx)[0]),
        flip=bool(flip),
        eps=eps,
        fp_u=fp_u,
        fn_u=fn_u,
        fp=f / max(n0, 1),
        fn=g / max(n1, 1),
    )


def best_on_coins(
    s0: SortedPart | np.ndarray, s1: SortedPart | np.ndarray, a: float, delta: float
) -> ThresholdTest:
    """best_rows over every threshold of the trials whose sorted scores are s0 (b = 0) and s1
    (b = 1), arrays or `SortedPart` objects: '>' at -inf or a b = 0 score, '<=' at -inf or a b = 1 score
    (module docstring)."""
    p0, p1 = (x if isinstance(x, SortedPart) else SortedPart(x) for x in (s0, s1))
    return best_rows(
        CandidateRows.on(p0, p0, p1), CandidateRows.on(p1, p0, p1), p0.n, p1.n, a, delta
    )


def best_on_table(c: Counts, a: float, delta: float) -> ThresholdTest:
    rows = CandidateRows.table(c.t, c.fp, c.fn)
    return best_rows(rows, rows, c.n0, c.n1, a, delta)


def best_threshold(sorted_scores: SortedScores, alpha: float, delta: float) -> ThresholdTest:
    """The optimistic max of eq. 4 over every threshold at level alpha each (no confidence)."""
    ss = sorted_scores
    return ss.memo(("best", alpha, delta), lambda: best_on_coins(*ss.by_coin(), alpha, delta))
