"""The best threshold of eq. 4 ([XWW24]) over every candidate, exactly, at the cost of a few
hundred Clopper-Pearson limits.

Contract. `epsilon_from_rates(fp, fn, delta)` is [XWW24] eq. 4,
max{log((1 - delta - FP)/FN), log((1 - delta - FN)/FP), 0}, vectorised. `search_rows` returns
the row maximising a monotone objective of the two limits over candidate rows, exactly (branch
and bound, below); `best_on_coins` / `best_on_table` the best (threshold, direction) by eq. 4
with limits at level a, and `best_threshold` the optimistic maximum over every threshold at
level alpha each (no confidence statement: `eps_best_threshold`).

Searches. `SortedScores` sorts each coin's scores once and every maximum over thresholds reads
counts by binary search in them. The objective (eq. 4, or the GDP mu) decreases in each count,
so in direction '>' the maximum is at t = -inf or at a b = 0 score, in '<=' at -inf or a b = 1
score: those thresholds are the candidates, searched by branch and bound (`search_rows`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from auditsel.auditing.clopper_pearson import CpLimits, cp_limits, pair_limit_bounds
from auditsel.auditing.sorted_scores import Counts, SortedPart, SortedScores
from auditsel.numerics import FloatArray, IntArray, check_deltas

#: the user-facing names (the other functions are building blocks of the audits)


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
    array (`both`: fp and fn together, where they share work)."""

    def __init__(
        self,
        m: int,
        threshold: Callable[[IntArray], FloatArray],
        fp: Callable[[IntArray], NDArray[np.integer]],
        fn: Callable[[IntArray], NDArray[np.integer]],
        both: Callable[[IntArray], tuple[NDArray[np.integer], NDArray[np.integer]]] | None = None,
    ) -> None:
        self.m, self.threshold, self.fp, self.fn = m, threshold, fp, fn
        self._both = both

    def counts(self, i: IntArray) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
        return self._both(i) if self._both is not None else (self.fp(i), self.fn(i))

    @classmethod
    def table(cls, t: ArrayLike, fp: ArrayLike, fn: ArrayLike) -> CandidateRows:
        t, fp, fn = np.asarray(t, dtype=float), np.asarray(fp), np.asarray(fn)
        return cls(len(t), t.__getitem__, fp.__getitem__, fn.__getitem__)

    @classmethod
    def on(cls, rows: SortedPart, p0: SortedPart, p1: SortedPart) -> CandidateRows:
        """Rows t = -inf (everything guessed 1), then the scores of `rows` ascending, counted
        in the sorted scores p0 (b = 0) and p1 (b = 1)."""
        n0 = p0.n

        def threshold(i):
            out = np.full(np.shape(i), -np.inf)
            inner = i > 0
            out[inner] = rows.value(i[inner] - 1)
            return out

        def le(part, i, t):  # part.count_le(threshold(i)) where i > 0
            if part is rows:
                return part.count_le_own(np.maximum(i - 1, 0))
            return part.count_le(threshold(i) if t is None else t)

        def fp(i, t=None):
            return np.where(i == 0, n0, n0 - le(p0, i, t))

        def fn(i, t=None):
            return np.where(i == 0, 0, le(p1, i, t))

        def both(i):
            t = threshold(i)
            return fp(i, t), fn(i, t)

        return cls(rows.n + 1, threshold, fp, fn, both)


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
    counts (at its ends: the counts are monotone along the rows) with the cheap limit bounds
    (`CpLimits.bound`, never below the exact limit); blocks are split `fanout` ways in
    decreasing order of their bound (ties: smaller rows first), and the rows of a block of at
    most `leaf` get exact limits in decreasing order of their own bound, until no bound is
    above the best value found; ties go to the row found first in that order. The walk decides
    one block at a time but computes its numbers ahead in vectorised passes (`_Walk`); every
    number is elementwise, so the result is that of one pass per block."""
    walk = _Walk(rows, n0, n1, lim0, lim1, objective, flip, increasing, fanout, leaf)
    best = (-1, -math.inf, math.nan, math.nan)

    def level() -> float:  # what a bound must exceed to matter
        return max(best[1], floor) if best[0] >= 0 else floor

    m = rows.m
    walk.push(*walk.split([(0, m)], max(fanout, min(ROOT_BLOCKS, m // max(leaf, 1))))[0])
    while walk.heap:
        pruning = best[0] >= 0 or floor > -math.inf
        cut = level() if pruning else -math.inf
        neg, lo, hi, where = walk.pop()
        if pruning and -neg <= cut:
            break
        if best[0] >= 0 and best[1] > stop_above:
            break
        if hi - lo > leaf:
            walk.push(*walk.children(lo, hi, where, cut), above=cut if pruning else None)
            continue
        idx, opt, order, l0, l1, value = walk.leaf_rows(lo, hi, where, cut)
        if pruning:
            order = order[opt[order] > cut]
        if not len(order):
            continue
        k = int(order[int(np.argmax(value[order]))])
        counts_here = value[k] > floor or (floor == -math.inf and best[0] < 0)
        if counts_here and (best[0] < 0 or value[k] > best[1]):
            best = (int(idx[k]), float(value[k]), float(l0[k]), float(l1[k]))
    return best


BATCH = 512  # at most this many blocks split (or leaves evaluated) in one vectorised pass


class _Walk:
    """The state of `search_rows`' walk: the blocks waiting, as sorted arrays (one per split)
    with a heap of each array's next block, and the numbers of blocks computed ahead (splits:
    `children`; leaves: `leaf_rows`), kept until the walk reads them once."""

    def __init__(self, rows, n0, n1, lim0, lim1, objective, flip, increasing, fanout, leaf) -> None:
        self.rows, self.n0, self.n1, self.lim0, self.lim1 = rows, n0, n1, lim0, lim1
        self.objective, self.flip, self.fanout, self.leaf = objective, flip, fanout, leaf
        self.increasing = increasing
        self.heap: list[tuple[float, int, int, int]] = []  # (-bound, lo, hi, array)
        self.arrays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (-bound, lo, hi)
        self.cursor: list[int] = []  # each array's next block
        self.scanned: list[list[int]] = []  # how far ahead splits, leaves were computed
        self.done: dict[tuple[int, int], tuple] = {}  # splits and leaves computed, unread
        # what the next pass may compute: blocks to split, rows of leaves; each doubles
        self.ahead = {True: min(16, BATCH), False: min(2, BATCH) * max(leaf, 1)}

    def push(
        self, neg: np.ndarray, lo: np.ndarray, hi: np.ndarray, above: float | None = None
    ) -> None:
        """Blocks waiting, sorted as the heap pops them (-bound, then lo; `split`'s order);
        with `above`, only those with a bound above it (the others can never be opened)."""
        if above is not None:
            k = int(np.searchsorted(neg, -above, side="left"))  # -neg > above: a prefix
            neg, lo, hi = neg[:k], lo[:k], hi[:k]
        if not len(neg):
            return
        self.arrays.append((neg, lo, hi))
        self.cursor.append(0)
        self.scanned.append([0, 0])
        self._head(len(self.arrays) - 1)

    def _head(self, a: int) -> None:
        neg, lo, hi = self.arrays[a]
        i = self.cursor[a]
        if i < len(neg):
            heapq.heappush(self.heap, (neg[i].item(), lo[i].item(), hi[i].item(), a))

    def pop(self) -> tuple[float, int, int, int]:
        """The waiting block of largest bound (then smallest lo), and its array."""
        neg, lo, hi, a = heapq.heappop(self.heap)
        self.cursor[a] += 1
        self._head(a)
        return neg, lo, hi, a

    def _batch(self, lo: int, hi: int, a: int, cut: float, splits: bool) -> list:
        """[lo, hi) and the next blocks of its kind in array a with a bound above `cut`, not
        yet computed, up to the pass's budget, which then doubles up to `BATCH` blocks."""
        budget = self.ahead[splits]
        self.ahead[splits] = min(2 * budget, BATCH * (1 if splits else max(self.leaf, 1)))
        neg, los, his = self.arrays[a]
        start = max(self.cursor[a], self.scanned[a][splits])
        kind = (his[start:] - los[start:] > self.leaf) == splits
        pick = np.flatnonzero(kind & (-neg[start:] > cut)) + start
        cost = np.ones(len(pick), np.int64) if splits else his[pick] - los[pick]
        pick = pick[np.cumsum(cost) <= budget - (1 if splits else hi - lo)]
        if len(pick):
            self.scanned[a][splits] = int(pick[-1]) + 1
        return sorted([(lo, hi), *zip(los[pick].tolist(), his[pick].tolist())])  # rows ascending

    def children(self, lo: int, hi: int, a: int, cut: float) -> tuple[Any, Any, Any]:
        if (lo, hi) not in self.done:
            blocks = self._batch(lo, hi, a, cut, True)
            self.done.update(zip(blocks, self.split(blocks, self.fanout)))
        return self.done.pop((lo, hi))

    def leaf_rows(self, lo: int, hi: int, a: int, cut: float) -> tuple:
        """(rows, bounds, order, limit0, limit1, value) of the leaf [lo, hi): its rows in
        decreasing order of their bound (stable), and the exact limits and objective of every
        row whose bound is above `cut` (nan elsewhere)."""
        if (lo, hi) not in self.done:
            blocks = self._batch(lo, hi, a, cut, False)
            self.done.update(zip(blocks, self.evaluate(blocks, cut)))
        return self.done.pop((lo, hi))

    def counts(self, i: IntArray) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
        """The counts (c0, c1) of rows i (ascending)."""
        f, g = self.rows.counts(i)
        return (self.n0 - f, self.n1 - g) if self.flip else (f, g)

    def corners(self, starts: IntArray, ends: IntArray) -> tuple[IntArray, IntArray]:
        """The best counts (c0, c1) of the blocks [starts, ends), each at one end of a block
        (fp does not increase along the rows, fn does not decrease)."""
        c0_at_end = (not self.flip) != self.increasing
        last = ends - 1
        f = self.rows.fp(last if c0_at_end else starts)
        g = self.rows.fn(starts if c0_at_end else last)
        return (self.n0 - f, self.n1 - g) if self.flip else (f, g)

    def bounds(self, f, g) -> FloatArray:
        with np.errstate(invalid="ignore"):
            lims = pair_limit_bounds(self.lim0, f, self.lim1, g)
            return np.nan_to_num(self.objective(*lims), nan=np.inf)

    def split(self, blocks: list[tuple[int, int]], ways: int) -> list[tuple]:
        """Each block [lo, hi) split `ways` ways, as arrays (-bound, lo, hi) sorted by -bound,
        then lo (the heap's order; lo is unique), in one pass."""
        lo, hi = (np.array(x, dtype=np.int64).reshape(-1) for x in zip(*blocks))
        size = np.maximum(-(-(hi - lo) // ways), 1)
        k = -(-(hi - lo) // size)
        owner = np.repeat(np.arange(len(lo)), k)
        first = np.cumsum(k) - k
        starts = lo[owner] + size[owner] * (np.arange(int(k.sum())) - first[owner])
        ends = np.minimum(starts + size[owner], hi[owner])
        neg = -self.bounds(*self.corners(starts, ends))
        order = np.lexsort((neg, owner))  # each block's children as the heap pops them
        neg, starts, ends = neg[order], starts[order], ends[order]
        return [
            (neg[a:b], starts[a:b], ends[a:b]) for a, b in zip(first.tolist(), (first + k).tolist())
        ]

    def evaluate(self, blocks: list[tuple[int, int]], cut: float) -> list[tuple]:
        """`leaf_rows` of each block, in one pass."""
        lo, hi = (np.array(x, dtype=np.int64) for x in zip(*blocks))
        k = hi - lo
        owner = np.repeat(np.arange(len(lo)), k)
        first = np.cumsum(k) - k
        idx = lo[owner] + np.arange(int(k.sum())) - first[owner]
        f, g = self.counts(idx)
        opt = self.bounds(f, g)
        order = np.lexsort((-opt, owner))  # by block, then by decreasing bound, stably
        want = opt > cut
        l0, l1, value = (np.full(len(idx), math.nan) for _ in range(3))
        l0[want], l1[want] = self.lim0.exact(f[want]), self.lim1.exact(g[want])
        with np.errstate(invalid="ignore"):
            got = self.objective(l0[want], l1[want])
        value[want] = np.where(np.isnan(got), -np.inf, got)
        return [
            (idx[a:b], opt[a:b], order[a:b] - a, l0[a:b], l1[a:b], value[a:b])
            for a, b in zip(first.tolist(), (first + k).tolist())
        ]


def eq4_objective(delta: float) -> Callable[[FloatArray, FloatArray], FloatArray]:
    return lambda fp_u, fn_u: epsilon_from_rates(fp_u, fn_u, delta)


def search_both(
    above: CandidateRows,
    below: CandidateRows,
    n0: int,
    n1: int,
    limits: tuple[CpLimits, CpLimits],
    objective: Callable[[FloatArray, FloatArray], FloatArray],
) -> tuple[bool, CandidateRows, tuple[int, float, float, float]]:
    """`search_rows` in '>' over `above` and '<=' over `below`: (flip, rows, hit) of the best;
    the second direction counts only where it beats the first ('>' on ties)."""
    found: list = []
    for flip, rows in ((False, above), (True, below)):
        floor = found[0][2][1] if found else -math.inf
        hit = search_rows(rows, n0, n1, *limits, objective, flip=flip, floor=floor)
        if hit[0] >= 0:
            found.append((flip, rows, hit))
    return max(found, key=lambda x: x[2][1])


def _best_rows(
    above: CandidateRows, below: CandidateRows, n0: int, n1: int, a: float, delta: float
) -> ThresholdTest:
    """The best (threshold, direction) by eq. 4 with CP limits at level a: '>' over the rows
    `above`, '<=' over `below`; with the numbers a rule reports."""
    limits = (cp_limits(n0, a), cp_limits(n1, a))
    flip, rows, (i, eps, fp_u, fn_u) = search_both(
        above, below, n0, n1, limits, eq4_objective(delta)
    )
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
    """_best_rows over every threshold of the sorted scores s0 (b = 0) and s1 (b = 1)."""
    p0, p1 = (x if isinstance(x, SortedPart) else SortedPart(x) for x in (s0, s1))
    return _best_rows(
        CandidateRows.on(p0, p0, p1), CandidateRows.on(p1, p0, p1), p0.n, p1.n, a, delta
    )


def best_on_table(c: Counts, a: float, delta: float) -> ThresholdTest:
    rows = CandidateRows.table(c.t, c.fp, c.fn)
    return _best_rows(rows, rows, c.n0, c.n1, a, delta)


def best_threshold(sorted_scores: SortedScores, alpha: float, delta: float) -> ThresholdTest:
    """The optimistic max of eq. 4 over every threshold at level alpha each (no confidence)."""
    ss = sorted_scores
    return ss.memo(("best", alpha, delta), lambda: best_on_coins(*ss.by_coin(), alpha, delta))
