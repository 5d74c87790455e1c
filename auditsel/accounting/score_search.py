"""The worst-score search: the strongest attack over tuning scores whose lower sets are intervals
of the privacy-loss-label order (or their complements), by an exact dynamic program over merged
label buckets, every number a rigorous enclosure.

Contract. Given the law of one run's label on X and on X' (`LabelLaws`: computed laws r*, each
within L1 distance e_r of the true law r, and entry-wise upper bounds on r), a law of K with pgf
G and delta, `ScoreSearch.best(deltas)` returns, for each delta, a score s (a `BucketScore`), a
direction and eps_s with ::

    eps_s <= eps_T(delta),

the epsilon of the tuning run T ([XWW24] Algorithm 2) that plays the score s: eps_s is the exact
epsilon (up to rounding charged in its favour) of one concrete test on the winner's bucket,
and eps_s = max over the scores searched, to the resolution of the merge (below).

Why a score chosen from the pair is a valid attack. The merged buckets, the score (a rank per
bucket) and the adversary's test (a set of buckets of the winner) are functions of the public
pair (p, q), the law of K and delta only, never of the release. The winner's bucket is a
deterministic function of the released run (or the fixed output when K = 0, the same on X and
X'), so its law on (X, X') is a post-processing of (T(X), T(X')) and lower-bounds T's
hockey-stick divergence at every eps. Merging labels is one more post-processing: any merge
keeps the value valid; it only costs tightness.

Winner's law. With buckets processed in increasing score, L the buckets of lower score and F
the run-label cdf on a side (X or X'), the winner falls in bucket j with probability ::

    A_j = G(F(L u {j})) - G(F(L))       ([XWW24] Theorem 2 / eq. 7),

on each side (A on X', B on X for the direction "X' over X"; swapped for "X over X'"). For a
fixed eps, the best test given the winner's law takes the buckets with A_j > e^eps B_j::

    delta_s(eps) = sum_j max(0, A_j - e^eps B_j),                      (*)

a sum along the score's order of terms that depend only on L and j.

Dynamic program. "extremes": every lower set {s <= t} is an interval [a, b] of buckets (the
runs far out on either side win); the next bucket is a - 1 or b + 1. "middle": every lower set
is the complement of an interval [a, b] (the middle wins); the next bucket is a or b. Monotone
orders (the largest or smallest label wins) are special cases of both. By (*)
the best completion from lower set L depends on L alone::

    V[a, b] = max(gain(a - 1 | [a, b]) + V[a - 1, b], gain(b + 1 | [a, b]) + V[a, b + 1])

(extremes; the mirror for middle), V[whole] = 0: O(M^2) per eps for M buckets, vectorised by
diagonals (interval lengths). delta(eps) := max over scores of (*) is non-increasing in eps;
eps(delta) is found by improving the score: start from a score, compute its exact eps_s, run
the DP at eps_s; if it finds a score with (*) > delta there, that score's eps is larger; repeat
(a finite number of scores, each step strictly better). At the end no searched score has
delta_s(eps_s) > delta, so eps_s is the max over the searched scores (the loop stops after
`MAX_ROUNDS` rounds at the latest: the value is then still valid, only perhaps not the max).

Round-off: as in `accounting.attack` (items A3 and "The hockey stick"), with the merged masses
and every lower-set mass F(L) and 1 - F(L) sums of nonnegative longdouble terms (prefix + suffix
sums, or running sums along a diagonal: no cancellation), each within relative error
rho = 2 (n + M + 4) u_ld + 2 u of the r* value (n positions); a winner mass is G(F') - G(F),
or Gc(W) - Gc(W') with W = 1 - F, Gc(w) = 1 - G(1 - w), when F' > 1/2; the true winner's
mass on the denominator side is also bounded by B_j <= r_hi_j G'(F'(1 + rho) + e_r).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting import portable as pm
from auditsel.executor import in_background
from auditsel.numerics import FloatArray, check_deltas
from auditsel.rounds import RoundsLaw
from auditsel.selection import BucketScore

U64 = float(np.finfo(np.float64).eps) / 2
ULD = float(np.finfo(np.longdouble).eps) / 2
#: A3: relative error of a law's pgf, pgf_complement and pgf_derivative in float64
LAW_REL = 4096 * U64
#: the score shapes searched (module docstring)
SHAPES = ("extremes", "middle")
#: the default number of merged buckets M (the attack's resolution)
DEFAULT_RESOLUTION = 256
#: labels beyond the quantiles TAIL (either side) are lumped into the end buckets (the widest
#: range; `delta_tail` narrows it to where the hockey stick at a delta reads the labels)
TAIL = 1e-20
#: `delta_tail`'s quantile is delta / (_TAIL_PER_DELTA E[K]), within [TAIL, TAIL_MAX]
_TAIL_PER_DELTA = 1e4
TAIL_MAX = 1e-9
#: at most this many improvement steps per delta (each strictly improves the score)
MAX_ROUNDS = 30
#: a score replaces the best found only when its eps is larger by more than this (relative and
#: absolute): scores whose values tie to round-off keep the first found, on every vector unit
TIE = 1e-12
#: `split_pieces`: a merged bucket holding more than this share of one run's mass on either side
#: is split into equal pieces (a heavy bucket: an atom of the label, e.g. a Laplace base's +-1/b)
SPLIT_MASS = 1 / 16
#: pieces per unit of mass (a bucket of mass w becomes the power of two >= w _SPLIT_DENSITY
#: pieces, at most SPLIT_MAX), and the most buckets the split adds in all
_SPLIT_DENSITY = 128
SPLIT_MAX = 64
SPLIT_EXTRA = 160


# --- the run's label ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelLaws:
    """One run's label on X (index 0) and X' (index 1), on positions in increasing label order.

    `laws[b]`: the computed law r* (longdouble, normalised); `upper[b]`: entry-wise upper
    bounds on the TRUE law; `error[b]`: ||r* - r||_1; `noise[b]`: the per-entry round-off of the
    FFT (entries below it carry no information); `cuts`: len - 1 cut points in label units
    (position i holds the labels in (cuts[i-1], cuts[i]], -inf allowed for an atom at -inf);
    `output_cuts`: the same cuts in the base's output units where the label is a function of a
    one-dimensional output (Gaussian bases); `count`: how many original label positions each
    position merges."""

    laws: tuple[np.ndarray, np.ndarray]
    upper: tuple[np.ndarray, np.ndarray]
    error: tuple[float, float]
    noise: tuple[float, float]
    cuts: np.ndarray
    output_cuts: np.ndarray | None = None
    count: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.laws[0])

    @property
    def positions(self) -> int:
        """The number of original (unmerged) label positions."""
        return int(np.sum(self.counts()))

    def counts(self) -> np.ndarray:
        return np.ones(len(self), dtype=np.int64) if self.count is None else self.count


def delta_tail(deltas: ArrayLike, law: RoundsLaw) -> float:
    """The quantile beyond which `merge_buckets` lumps the labels for an attack at `deltas`:
    the smallest positive delta / (`_TAIL_PER_DELTA` E[K]), within [`TAIL`, `TAIL_MAX`] (`TAIL`
    when no delta is positive).

    Any cut is valid (a merge is a post-processing): the cut only decides where the
    `resolution` equal-width buckets go. A label range holding less than q of one run on each
    side holds less than E[K] q of the winner, so reading it lumped instead of finely moves the
    hockey stick by less than 1e-4 delta."""
    d = np.asarray(deltas, dtype=float).ravel()
    d = d[d > 0]
    if not len(d):
        return TAIL
    q = float(np.min(d)) / (_TAIL_PER_DELTA * max(float(law.mean), 1.0))
    return min(max(q, TAIL), TAIL_MAX)


def _group(values: np.ndarray, starts: np.ndarray, dtype) -> np.ndarray:
    return np.add.reduceat(np.asarray(values, dtype=dtype), starts)


def informative_masses(laws: LabelLaws) -> tuple[np.ndarray, np.ndarray]:
    """Each law's entries (float64) with those below its FFT round-off (`LabelLaws.noise`) set
    to 0: entries below it are noise whose bits depend on the machine, so decisions (where
    `merge_buckets` cuts the tails, `split_pieces`) read these and are the same on every CPU;
    every mass the attack uses is the computed law itself."""
    out = []
    for b, v in enumerate(laws.laws):
        x = np.asarray(v, dtype=float)
        out.append(np.where(x >= laws.noise[b], x, 0.0) if laws.noise[b] > 0 else x)
    return out[0], out[1]


def merge_buckets(laws: LabelLaws, resolution: int, tail: float = TAIL) -> LabelLaws:
    """Merge consecutive positions into at most `resolution` buckets (a post-processing): atoms
    at -inf / +inf stay apart, labels outside the `tail` quantiles of both laws (read from
    `informative_masses`) are lumped into the end buckets, and the labels in between are cut at
    equal label widths (empty buckets dropped). Masses are summed in longdouble; the upper
    bounds rounded up."""
    n = len(laws)
    if n <= resolution:
        return laws
    cuts = np.asarray(laws.cuts, dtype=float)
    finite = np.isfinite(cuts)
    # position i's label interval is (cuts[i-1], cuts[i]]; atoms: a -inf cut first, +inf never
    lo_atom = int(n > 1 and cuts[0] == -np.inf)
    signal = informative_masses(laws)
    cdf = np.maximum(*[np.cumsum(v) for v in signal])
    sf = np.maximum(*[np.cumsum(v[::-1])[::-1] for v in signal])
    first = max(lo_atom, int(np.searchsorted(cdf, tail, side="left")))
    last = min(n - 1, int(np.nonzero(sf >= tail)[0][-1]) if np.any(sf >= tail) else n - 1)
    last = max(last, first)
    inner = max(resolution - 2 - lo_atom, 1)
    starts: list[int] = [0] if lo_atom else []
    if first > lo_atom:
        starts.append(lo_atom)
    if last > first and finite[first:last].all():
        start = cuts[first - 1] if first > 0 and finite[first - 1] else cuts[first]
        grid = np.linspace(start, cuts[last - 1], inner)
        idx = np.searchsorted(cuts[first:last], grid[1:-1], side="left") + first + 1
        starts += [first, *idx.tolist()]
    else:
        starts.append(first)
    if last + 1 < n:
        starts.append(last + 1)
    first_of = np.unique(np.asarray(starts, dtype=np.int64))
    count = np.diff(np.concatenate([first_of, [n]]))
    merged = tuple(_group(v, first_of, np.longdouble) for v in laws.laws)
    upper = tuple(_group(v, first_of, float) * (1 + (count.max() + 1) * U64) for v in laws.upper)
    ends = first_of[1:] - 1  # the last position of each bucket but the final one
    out = None if laws.output_cuts is None else np.asarray(laws.output_cuts)[ends]
    old = laws.counts()
    return LabelLaws(
        (merged[0], merged[1]),
        (upper[0], upper[1]),
        laws.error,
        laws.noise,
        cuts[ends],
        out,
        np.add.reduceat(old, first_of),
    )


def split_pieces(laws: LabelLaws) -> np.ndarray:
    """How many equal pieces each bucket of `laws` becomes in the split search (1: kept whole):
    a bucket holding more than `SPLIT_MASS` of one run's mass on either side (read from
    `informative_masses`, so the same on every CPU) becomes 2^k pieces, 2^k the power of two
    >= its mass x `_SPLIT_DENSITY`, at most `SPLIT_MAX`; the heaviest bucket's pieces are
    halved until the split adds at most `SPLIT_EXTRA` buckets."""
    mass = np.maximum(*informative_masses(laws))
    pieces = np.ones(len(laws), dtype=np.int64)
    heavy = mass > SPLIT_MASS
    if not np.any(heavy):
        return pieces
    want = np.ceil(np.log2(np.maximum(mass[heavy] * _SPLIT_DENSITY, 2.0)))
    pieces[heavy] = np.minimum(2 ** want.astype(np.int64), SPLIT_MAX)
    while int(np.sum(pieces - 1)) > SPLIT_EXTRA:
        pieces[int(np.argmax(pieces))] //= 2
    return pieces


def split_buckets(laws: LabelLaws, pieces: ArrayLike) -> LabelLaws:
    """The label laws with bucket j replaced by pieces[j] equal pieces, adjacent, in place (a
    power of two each, so each piece's mass and upper bound are the bucket's divided exactly,
    a subnormal quotient of an upper bound rounded up: no new round-off; the L1 error and the
    FFT noise floor are the bucket's).

    Why a split is a score a tuning run can play. Piece i of bucket j takes the share 1/n_j of
    the bucket's mass on X and on X' alike. On a base whose output has no atoms (Gaussian,
    Laplace, DP-SGD), Lyapunov's convexity theorem (the range of the atomless vector measure
    (Q, P) on the bucket's outputs is convex) gives disjoint output sets, one per piece, each
    with the share 1/n_j under both laws: a deterministic score ranks them apart, and the
    module docstring's post-processing argument applies. On a finite base the pieces need a
    released coin (not the base itself), so `attack` splits only atomless bases."""
    n = np.asarray(pieces, dtype=np.int64)
    if n.shape != (len(laws),) or np.any(n < 1) or np.any(n & (n - 1)):
        raise ValueError("pieces: one power of two >= 1 per bucket")
    idx = np.repeat(np.arange(len(laws)), n)
    div = n[idx]
    lw = tuple(
        np.asarray(v, dtype=np.longdouble)[idx] / div.astype(np.longdouble) for v in laws.laws
    )
    up = []
    for v in laws.upper:
        whole = np.asarray(v, dtype=float)[idx]
        piece = whole / div.astype(float)
        # exact unless the quotient is subnormal: then rounded up, an upper bound still
        up.append(np.where(piece * div >= whole, piece, np.nextafter(piece, np.inf)))
    # the pieces of a bucket share its label interval: a piece's cut is its bucket's upper cut
    cuts = np.concatenate([np.asarray(laws.cuts, dtype=float), [np.inf]])[idx][:-1]
    return LabelLaws(
        (lw[0], lw[1]), (up[0], up[1]), laws.error, laws.noise, cuts, None, laws.counts()[idx]
    )


# --- winner masses, enclosed -------------------------------------------------------------------
def enclose_winner(
    x: FloatArray,
    f_prev: FloatArray,
    f_next: FloatArray,
    w_prev: FloatArray,
    w_next: FloatArray,
    rho: float,
    law: RoundsLaw,
) -> tuple[FloatArray, FloatArray]:
    """Entry-wise (lower, upper) bounds on G(F') - G(F) where F = f_prev, F' = f_next = F + x,
    W = 1 - F = w_prev, W' = w_next, every input within relative error `rho` of its r* value
    (module docstring): the difference of G (F' <= 1/2) or of Gc = 1 - G(1 - .) (F' > 1/2)
    plus or minus its error, intersected with the mean-value bracket x [G'(F), G'(F')]."""
    x, f, fp, w, wn = (np.asarray(v, dtype=float) for v in (x, f_next, f_prev, w_prev, w_next))
    lo = np.zeros(np.broadcast(x, f).shape)
    hi = np.zeros_like(lo)
    low_half = f <= 0.5
    # G at (F', F) below 1/2; Gc at (W, W') above (G' at 1 - W: the slopes' ends swap)
    halves = ((low_half, f, fp, law.pgf, False), (~low_half, w, wn, law.pgf_complement, True))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for half, big, small, g, swap in halves:
            if not np.any(half):
                continue
            u, v, xx = big[half], small[half], x[half]
            gu, gv = g(u), g(v)
            diff = gu - gv
            u_top = np.minimum(u * (1 + rho), 1.0)
            v_bot = v * (1 - rho)
            if swap:
                slope_bot = law.pgf_derivative(1.0 - u_top, u_top)
                slope_top = law.pgf_derivative(1.0 - v_bot, v_bot)
            else:
                slope_top = law.pgf_derivative(u_top, 1.0 - u_top)
                slope_bot = law.pgf_derivative(v_bot, 1.0 - v_bot)
            err = LAW_REL * (gu + gv) + slope_top * rho * (u + v) + U64 * np.abs(diff)
            lo[half] = np.maximum(diff - err, xx * (1 - rho) * slope_bot * (1 - LAW_REL))
            hi[half] = np.minimum(diff + err, xx * (1 + rho) * slope_top * (1 + LAW_REL))
    lo = np.where(np.isfinite(lo), np.maximum(lo, 0.0), 0.0)
    hi = np.where(np.isfinite(hi), np.maximum(hi, lo), 1.0)
    return lo, hi


def true_winner_upper(
    r_hi: FloatArray, f_next: FloatArray, w_next: FloatArray, rho: float, l1: float, law: RoundsLaw
) -> FloatArray:
    """Upper bounds on the TRUE winner's mass of a bucket: r_j G'(F(L u {j})) with r_j <= r_hi
    and the true F within l1 of F* (G' non-decreasing; module docstring)."""
    f, wn = np.asarray(f_next, dtype=float), np.asarray(w_next, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w = np.where(f <= 0.5, 1.0 - np.minimum(f * (1 + rho) + l1, 1.0), wn * (1 - rho) - l1)
        w = np.clip(w, 0.0, 1.0)
        slope = law.pgf_derivative(1.0 - w, w) * (1 + LAW_REL)
    out = np.asarray(r_hi, dtype=float) * slope
    return np.where(np.isfinite(out), out, 1.0)


# --- one score's hockey stick -------------------------------------------------------------------
def direction_pieces(
    a_lo: FloatArray,
    b_star: FloatArray,
    b_true: FloatArray,
    c_a: float,
    c_b: float,
    floor: float = 0.0,
    by: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(U_k, V_k) for the direction A over B: prefix sums over the buckets sorted by
    a_lo / b_hi, rounded down / up (`accounting.attack` module docstring, "The hockey stick").
    a_lo bounds the r* winner (its L1 slack c_a is charged); B(S) is bounded by the smaller of
    b_true(S) and min(b_star, b_true)(S) + c_b. Entries with a_lo <= floor are left out."""
    keep = a_lo > floor
    a, bs, bt = a_lo[keep], b_star[keep], b_true[keep]
    b = np.minimum(bs, bt)
    with np.errstate(divide="ignore"):
        ratio = pm.log(a) - pm.log(b if by is None else np.asarray(by)[keep])
    order = np.argsort(-ratio, kind="stable")
    n = len(a) + 1
    up = 1 + n * U64
    U = np.concatenate([[0.0], np.cumsum(a[order])]) * (1 - n * U64) - c_a
    V_true = np.concatenate([[0.0], np.cumsum(bt[order])]) * up
    V_mixed = np.concatenate([[0.0], np.cumsum(b[order])]) * up + c_b
    return U, np.minimum(V_true, V_mixed)


def pieces_epsilons(U: np.ndarray, V: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """max(0, max_k log((U_k - delta) / V_k)) for each delta (inf where U_k > delta, V_k = 0)."""
    out = np.zeros(len(deltas))
    for i, d in enumerate(deltas):
        live = U > d
        if not np.any(live):
            continue
        if np.any(V[live] <= 0):
            out[i] = math.inf
            continue
        out[i] = max(0.0, float(np.max(pm.log(U[live] - d) - pm.log(V[live]))))
    return out


def pieces_deltas(U: np.ndarray, V: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """delta_low(eps) = max(0, max_k (U_k - e^eps V_k))."""
    with np.errstate(over="ignore", invalid="ignore"):
        vals = U[None, :] - pm.exp(np.asarray(eps, dtype=float))[:, None] * V[None, :]
    vals = np.where(np.isnan(vals), -np.inf, vals)
    return np.maximum(np.max(vals, axis=1), 0.0)


def cumulative(x: np.ndarray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(F_j-1, F_j, W_j, W_j+1) of the masses `x` (longdouble) in their order: F the sums up to
    and W the sums from each entry, running sums of nonnegative longdouble terms rounded once
    to float64 (the arguments of `enclose_winner` after the masses)."""
    f, w = np.cumsum(x), np.cumsum(x[::-1])[::-1]
    zero = [np.longdouble(0)]
    return (
        np.concatenate([zero, f[:-1]]).astype(float),
        f.astype(float),
        w.astype(float),
        np.concatenate([w[1:], zero]).astype(float),
    )


def order_winner_laws(
    masses: tuple[FloatArray, ...], order: ArrayLike, law: RoundsLaw
) -> tuple[FloatArray, FloatArray]:
    """The winner's bucket law on X and X' (float64 point values, the K = 0 output left out)
    when the buckets win in `order` (lowest score first): G(F(L u {j})) - G(F(L)) per bucket,
    evaluated as `enclose_winner` does (differences of G below 1/2, of Gc above)."""
    order = np.asarray(order, dtype=np.int64)
    out = []
    for r in masses:
        fp, f, w, wn = cumulative(np.asarray(r, dtype=np.longdouble)[order])
        with np.errstate(invalid="ignore"):
            val = np.where(
                f <= 0.5,
                law.pgf(f) - law.pgf(fp),
                law.pgf_complement(w) - law.pgf_complement(wn),
            )
        pmf = np.zeros(len(order))
        pmf[order] = np.maximum(val, 0.0)
        out.append(pmf)
    return out[0], out[1]


def enclose_order(
    masses: FloatArray,
    upper: FloatArray,
    error: float,
    order: ArrayLike,
    law: RoundsLaw,
    positions: int = 0,
) -> tuple[FloatArray, FloatArray]:
    """(lower, upper) bounds on the TRUE winner's bucket masses on one side when the buckets win
    in `order` (lowest score first; the K = 0 output left out), from the computed bucket masses
    `masses` (r*, within L1 distance `error` of the true ones), entry-wise upper bounds `upper`
    on the true ones, and the law of K (module docstring, "Round-off"): the r* winner enclosed
    by `enclose_winner`, widened by c = E[K] error (the winner of K draws under r* is within L1
    distance c of the true one), the upper end also capped by `true_winner_upper`. An entry
    whose computed mass is FFT noise gets the lower bound 0. `positions`: how many label
    positions each computed bucket mass sums at most (in longdouble, in order)."""
    order = np.asarray(order, dtype=np.int64)
    x = np.asarray(masses, dtype=np.longdouble)[order]
    m = len(x)
    rho = 2.0 * (max(positions, 1) + m + 4) * ULD + 2 * U64
    fp, f, w, wn = cumulative(x)
    lo, hi = enclose_winner(x.astype(float), fp, f, w, wn, rho, law)
    c = float(law.mean) * float(error) * (1 + 4 * U64)
    cap = true_winner_upper(np.asarray(upper, dtype=float)[order], f, wn, rho, float(error), law)
    out_lo, out_hi = np.zeros(m), np.zeros(m)
    out_lo[order] = np.maximum(lo - c, 0.0)
    out_hi[order] = np.minimum(np.minimum(hi + c, cap), 1.0)
    return out_lo, np.maximum(out_hi, out_lo)


# --- the dynamic program -----------------------------------------------------------------------
@dataclass(frozen=True)
class SearchResult:
    """The best score found at one delta: `epsilon` (its exact, certified value), the score's
    `shape` ("extremes", "middle", or "monotone" when the order found is monotone), the
    hockey stick's `direction`, `order` (the buckets from the lowest score to the highest: the
    last one wins over all) and `pieces` (U_k, V_k) of its certified curve."""

    epsilon: float
    shape: str
    direction: str
    order: tuple[int, ...]
    pieces: tuple[np.ndarray, ...] = field(repr=False, compare=False)


DIRECTIONS = ((1, "X' over X"), (0, "X over X'"))
#: (numerator side, mixed bound) of the four DPs of each shape, in the search's order
COMBOS = tuple((num, mixed) for (num, _), mixed in itertools.product(DIRECTIONS, (True, False)))


def _sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """IN[d, a] = x[a] + ... + x[a + d - 1] and OUT[d, a] = the rest (a <= M - d, else 0):
    sums of nonnegative longdouble terms (running sums along d; prefix + suffix), in float64."""
    m = len(x)
    grid_in = np.zeros((m + 1, m + 1), dtype=np.longdouble)
    for d in range(1, m + 1):
        grid_in[d, : m - d + 1] = grid_in[d - 1, : m - d + 1] + x[d - 1 :]
    prefix = np.concatenate([[np.longdouble(0)], np.cumsum(x)])
    suffix = np.concatenate([np.cumsum(x[::-1])[::-1], [np.longdouble(0)]])
    rows, cols = np.indices((m + 1, m + 1))
    live = cols <= m - rows
    grid_out = np.where(live, prefix[np.minimum(cols, m)] + suffix[np.minimum(cols + rows, m)], 0)
    return grid_in.astype(float), grid_out.astype(float)


#: `deltas_at` runs the two shapes' DPs side by side (two threads) from this many numbers per
#: step and state (combos x eps x M^2; the panel's curve: 4 x 60 x 256^2)
SIDE_BY_SIDE_WORK = 1 << 22
#: the DP computes the gains of several steps in one array operation, at most about this many
#: numbers at a time (bounded memory; a step is never split)
GAIN_BLOCK = 1 << 16


def _steps(m: int, shape: str) -> np.ndarray:
    """The DP's interval lengths d in the order it visits them: extremes from M - 1 down to 0
    (V[M] = 0 known), middle from 1 up to M (V[0] = 0 known)."""
    return np.arange(m - 1, -1, -1) if shape == "extremes" else np.arange(1, m + 1)


def _triangle(m: int, shape: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d, a, offsets): the DP's states packed along its steps (`_steps`), step k's states
    a = 0 .. m - d in positions offsets[k] .. offsets[k + 1] - 1."""
    steps = _steps(m, shape)
    n = m - steps + 1
    offsets = np.concatenate([[0], np.cumsum(n)])
    d = np.repeat(steps, n)
    a = np.arange(offsets[-1]) - np.repeat(offsets[:-1], n)
    return d, a, offsets


class ScoreSearch:
    """The exact DP over interval-shaped scores of merged label buckets (module docstring),
    with every winner mass enclosed. Built once per (label laws, law of K): the enclosures do
    not depend on eps; `best(deltas)` and `deltas_at(eps)` run the DP."""

    def __init__(self, laws: LabelLaws, law: RoundsLaw) -> None:
        m = len(laws)
        self.laws, self.law, self.m = laws, law, m
        mean = float(law.mean)
        self.slack = (mean * laws.error[0], mean * laws.error[1])
        self._moves: dict[str, dict[str, dict]] | None = None
        self._rows: dict[object, tuple] = {}

    @property
    def moves(self) -> dict[str, dict[str, dict]]:
        """Per shape and move ("left" / "right"), the allowed states, the bucket added and the
        enclosures (lo, hi, true upper) of its winner mass on each side, over the (d, a) grid
        (computed on first use: O(M^2) law evaluations)."""
        if self._moves is None:
            self._moves = self._enclosures()
        return self._moves

    def _enclosures(self) -> dict[str, dict[str, dict]]:
        laws, law, m = self.laws, self.law, self.m
        mean = float(law.mean)
        rho = 2.0 * (laws.positions + m + 4) * ULD + 2 * U64
        x = [np.asarray(v, dtype=np.longdouble) for v in laws.laws]
        sums = [_sums(v) for v in x]
        floors = [4 * mean * laws.noise[b] * laws.counts() for b in (0, 1)]
        d, a = np.indices((m + 1, m + 1))
        # moves per shape: (valid, bucket j, (d, a) of the state after the move)
        ext = {
            "left": ((a >= 1) & (d >= 1) & (d <= m - 1) & (a <= m - d), a - 1, d + 1, a - 1),
            "right": ((a + d <= m - 1) & (d <= m - 1), a + d, d + 1, a),
        }
        mid = {
            "left": ((d >= 1) & (a <= m - d), a, d - 1, a + 1),
            "right": ((d >= 1) & (a <= m - d), a + d - 1, d - 1, a),
        }
        out: dict[str, dict[str, dict]] = {}
        for shape, moves in (("extremes", ext), ("middle", mid)):
            out[shape] = {}
            for name, (valid, j, d2, a2) in moves.items():
                j = np.where(valid, j, 0)
                # the states (d, a) and those after the move, as places in the flat grids
                here = np.flatnonzero(valid)
                after = np.take(d2, here) * (m + 1) + np.take(a2, here)
                jv = np.take(j, here)
                side = []
                for b in (0, 1):
                    g_in, g_out = sums[b]
                    # extremes: the lower set is IN; middle: the lower set is OUT
                    lower, upper = (g_in, g_out) if shape == "extremes" else (g_out, g_in)
                    fp, wp = np.take(lower, here), np.take(upper, here)
                    fn, wn = np.take(lower, after), np.take(upper, after)
                    mass = x[b][jv].astype(float)
                    lo, hi = enclose_winner(mass, fp, fn, wp, wn, rho, law)
                    tu = true_winner_upper(laws.upper[b][jv], fn, wn, rho, laws.error[b], law)
                    lo = np.where(lo > floors[b][jv], lo, 0.0)
                    full = [np.zeros((m + 1, m + 1)) for _ in range(3)]
                    for grid, v in zip(full, (lo, hi, tu)):
                        np.put(grid, here, v)
                    side.append(tuple(full))
                out[shape][name] = {"valid": valid, "j": j, "side": side}
        return out

    def _gain_rows(
        self, shape: str, combos: tuple[tuple[int, bool], ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The DP's gains packed along its steps, cached: (a_lo, b, floor, offsets), where
        a_lo and b are (2, len(combos), T) (the moves "left" and "right", one row per (num,
        mixed) of `combos`), floor is (2, 1, T), and step k's states a = 0 .. n - 1 (n = m - d
        + 1, d its interval length: `_steps`) are the columns offsets[k] .. offsets[k + 1] - 1.
        The DP's gain max(0, a_lo - e^eps b) is max(a_lo - e^eps b, floor) with floor 0 where
        the move is allowed, and a_lo and floor -inf, b 0 where it is not (the gain is then
        -inf)."""
        key = (shape, combos)
        if key not in self._rows:
            if shape not in self._rows:  # every combo's gains, packed once per shape
                self._rows[shape] = self._pack(shape)
            a_lo, b, floor, offsets = self._rows[shape]
            pick = [COMBOS.index(c) for c in combos]
            self._rows[key] = (a_lo[:, pick], b[:, pick], floor, offsets)
        return self._rows[key]

    def _pack(self, shape: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`_gain_rows` for every (num, mixed) of COMBOS."""
        d, a, offsets = _triangle(self.m, shape)
        at = d * (self.m + 1) + a  # the packed states' places in the (d, a) grids
        a_lo, b, floor = [], [], []
        for name in ("left", "right"):
            mv = self.moves[shape][name]
            valid = np.take(mv["valid"], at)
            lo = [np.take(side[0], at) for side in mv["side"]]
            hi = [np.take(side[1], at) for side in mv["side"]]
            tu = [np.take(side[2], at) for side in mv["side"]]
            a_lo.append([np.where(valid, lo[num], -np.inf) for num, _ in COMBOS])
            b.append(
                [
                    np.where(
                        valid, np.minimum(hi[1 - num], tu[1 - num]) if mixed else tu[1 - num], 0.0
                    )
                    for num, mixed in COMBOS
                ]
            )
            floor.append([np.where(valid, 0.0, -np.inf)])
        return np.array(a_lo), np.array(b), np.array(floor), offsets

    # the DP at a vector of eps --------------------------------------------------------------
    def _dp(
        self,
        shape: str,
        combos: tuple[tuple[int, bool], ...],
        eps: np.ndarray,
        back: bool,
    ):
        """For each (num, mixed) of `combos` and each eps (row c * len(eps) + i: combo c, eps
        i): max over scores of sum_j max(0, a_j - e^eps b_j) (b the mixed bound min(b*, b_t),
        or with `mixed` False the true-law bound b_t alone); with `back`, also the choices (True:
        the "left" move) per state row. The combos and both moves share one recursion (one
        array operation per step for all of them); the gains of many steps are computed in one
        array operation before the recursion reads them (`GAIN_BLOCK` numbers at a time)."""
        m = self.m
        e = pm.exp(np.minimum(np.asarray(eps, dtype=float), 700.0))[None, None, :, None]
        a_lo, b, floor, offsets = self._gain_rows(shape, combos)
        size = len(combos) * e.shape[2]
        # V in buf[:, 1:], -inf around it; the moves read V at offsets (left, right) of a state
        buf = np.full((size, m + 3), -np.inf)
        if shape == "extremes":
            buf[:, 1] = 0.0  # V[M] = 0: the lower set is everything
            o_left, o_right = 0, 1  # from a - 1 and from a
        else:
            buf[:, 1 : m + 2] = 0.0  # V[0] = 0: nothing left to add
            o_left, o_right = 2, 1  # from a + 1 and from a
        steps = _steps(m, shape)
        choices: dict[int, np.ndarray] = {}
        per_block = max(GAIN_BLOCK // (2 * size), m + 1)  # columns of gains per block
        # one workspace for every block (fresh arrays per block cost page faults)
        work = np.empty(2 * size * max(per_block, int(np.max(np.diff(offsets)))))
        # V as the two moves read it, one view: reads[0] = buf[:, o_left:], reads[1] = buf[:,
        # o_right:] (so that one addition serves both moves)
        reads = np.lib.stride_tricks.as_strided(
            buf[:, o_left:],
            shape=(2, size, m + 3 - max(o_left, o_right)),
            strides=((o_right - o_left) * buf.itemsize, *buf.strides),
            writeable=False,
        )
        at, ds = offsets.tolist(), steps.tolist()
        k = 0
        while k < len(ds):
            first = at[k]
            last = int(offsets[np.searchsorted(offsets, first + per_block, side="right") - 1])
            last = max(last, at[k + 1])
            # the gains of the steps in columns [first, last), the same operations as one
            # step at a time: max(a_lo - (e * b), floor)
            gains = work[: 2 * size * (last - first)].reshape(2, len(combos), -1, last - first)
            with np.errstate(over="ignore"):  # e b beyond the float range: the floor holds
                np.multiply(e, b[:, :, None, first:last], out=gains)
            np.subtract(a_lo[:, :, None, first:last], gains, out=gains)
            np.maximum(gains, floor[:, :, None, first:last], out=gains)
            g = gains.reshape(2, size, last - first)
            while k < len(ds) and at[k] < last:
                d = ds[k]
                n = m - d + 1  # states a = 0 .. m - d
                if shape == "extremes":
                    buf[:, n] = -np.inf  # V[d + 1] has n - 1 states
                moves = g[:, :, at[k] - first : at[k] - first + n]
                moves += reads[:, :, :n]  # (left, right): gain + V after the move
                if back:
                    choices[d] = moves[0] > moves[1]
                np.maximum(moves[0], moves[1], out=buf[:, 1 : n + 1])
                k += 1
        if shape == "extremes":
            value = buf[:, 1 : m + 2]
            return np.max(value, axis=1), choices, np.argmax(value, axis=1)
        return buf[:, 1].copy(), choices, np.zeros(size, dtype=np.int64)

    def _path(
        self, shape: str, choices: dict, start: int, row: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The moves of the score chosen by the DP for row `row`, in order: (left, d, a) arrays
        (left: the "left" move; (d, a) the state it leaves)."""
        m = self.m
        left = np.empty(m, dtype=bool)
        ds = np.arange(m) if shape == "extremes" else np.arange(m, 0, -1)
        states = np.empty(m, dtype=np.int64)
        a = int(start) if shape == "extremes" else 0
        step = -1 if shape == "extremes" else 1
        for k, d in enumerate(ds.tolist()):
            go_left = bool(choices[d][row, a])
            left[k], states[k] = go_left, a
            a += step if go_left else 0
        return left, ds, states

    def _evaluate(
        self, shape: str, num: int, path: tuple[np.ndarray, np.ndarray, np.ndarray], deltas
    ):
        """The certified eps of one score (a path of moves) at each delta, and its pieces."""
        den = 1 - num
        left, ds, states = path
        mv_left, mv_right = self.moves[shape]["left"], self.moves[shape]["right"]

        def gather(grid_left: np.ndarray, grid_right: np.ndarray) -> np.ndarray:
            return np.where(left, grid_left[ds, states], grid_right[ds, states])

        a_lo, b_star, b_true = (
            gather(mv_left["side"][b][which], mv_right["side"][b][which])
            for b, which in ((num, 0), (den, 1), (den, 2))
        )
        order = gather(mv_left["j"], mv_right["j"]).tolist()
        best, pieces = np.zeros(len(deltas)), None
        for by in (None, b_true):
            U, V = direction_pieces(a_lo, b_star, b_true, self.slack[num], self.slack[den], 0.0, by)
            eps = pieces_epsilons(U, V, deltas)
            if pieces is None or np.any(eps > best):
                pieces = (U, V)
            best = np.maximum(best, eps)
        return best, tuple(order), pieces

    def best(self, deltas: ArrayLike, start: ArrayLike | None = None) -> list[SearchResult]:
        """The best interval-shaped score at each delta (module docstring: improve the score
        until the DP at its eps finds none better). `start`: eps to start from (a lower bound
        already known, e.g. the monotone attack's)."""
        d = check_deltas(deltas, "deltas")
        cur = np.zeros(len(d)) if start is None else np.array(start, dtype=float)
        found: list[SearchResult | None] = [None] * len(d)
        # the eps at which each (shape, combo)'s DP last ran for each delta: the DP at the same
        # eps finds the same score again, which improved nothing then and improves nothing now
        # (eps only grows), so a DP runs only for the deltas whose eps moved since
        ran = {key: np.full(len(d), np.nan) for key in itertools.product(SHAPES, COMBOS)}
        for _ in range(MAX_ROUNDS):
            improved = False
            live = np.isfinite(cur)
            for shape, ((num, name), mixed) in itertools.product(
                SHAPES, itertools.product(DIRECTIONS, (True, False))
            ):
                last = ran[shape, (num, mixed)]
                idx = np.nonzero(live & (cur != last))[0]
                if len(idx):
                    last[idx] = cur[idx]
                    value, choices, starts = self._dp(shape, ((num, mixed),), cur[idx], True)
                    e = pm.exp(np.minimum(cur[idx], 700.0))
                    need = d[idx] + self.slack[num] + e * (self.slack[1 - num] if mixed else 0.0)
                    for row in np.nonzero(value > need)[0]:
                        i = idx[row]
                        path = self._path(shape, choices, int(starts[row]), int(row))
                        eps, order, pieces = self._evaluate(shape, num, path, d[i : i + 1])
                        better = eps[0] > cur[i] * (1.0 + TIE) + TIE  # not a round-off tie
                        if better or found[i] is None and eps[0] >= cur[i]:
                            improved |= better
                            cur[i] = eps[0]
                            found[i] = SearchResult(
                                float(eps[0]), _shape_of(order, shape), name, order, pieces
                            )
            if not improved:
                break
        return [
            f if f is not None else SearchResult(float(c), "none", "", (), (np.zeros(1),) * 2)
            for f, c in zip(found, cur)
        ]

    def deltas_at(self, eps: ArrayLike) -> FloatArray:
        """delta_low(eps): the largest certified hockey stick over the interval-shaped scores
        (max over shapes, directions and the two bounds on B(S) of the DP value, L1 slacks
        charged), >= 0."""
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        out = np.zeros(len(e))
        runs = [partial(self._dp, shape, COMBOS, e, False) for shape in SHAPES]
        if len(COMBOS) * len(e) * self.m**2 >= SIDE_BY_SIDE_WORK:
            # the two shapes' DPs side by side: NumPy frees the GIL in their array operations
            _ = self.moves  # (the enclosures computed once, before)
            other = in_background(runs[1])
            values = [runs[0](), other.result()]
        else:
            values = [run() for run in runs]
        for value, _, _ in values:  # in SHAPES' order, as one after the other
            for c, ((num, _), mixed) in enumerate(itertools.product(DIRECTIONS, (True, False))):
                c_b = self.slack[1 - num] if mixed else 0.0
                with np.errstate(over="ignore", invalid="ignore"):
                    val = value[c * len(e) : (c + 1) * len(e)] - self.slack[num] - pm.exp(e) * c_b
                out = np.maximum(out, np.where(np.isnan(val), 0.0, val))
        return out

    def score(self, result: SearchResult, unit: str = "label") -> BucketScore:
        """The score of `result` as data: the merged buckets' cuts (label units, or the base's
        output units where `laws.output_cuts` is known), the rank of each bucket (its place in
        the order: the highest wins), the shape, and the adversary's statistic per bucket, the
        log ratio of the winner's bucket masses X' over X (+-inf where one is 0)."""
        cuts = self.laws.cuts if unit == "label" else self.laws.output_cuts
        if cuts is None:
            raise ValueError(f"no {unit} cuts for this base")
        order = result.order or tuple(range(self.m))
        ranks = np.empty(self.m)
        ranks[np.asarray(order)] = np.arange(len(order), dtype=float)
        p0, p1 = order_winner_laws(self.laws.laws, order, self.law)
        with np.errstate(divide="ignore", invalid="ignore"):
            guess = np.where((p0 > 0) | (p1 > 0), pm.log(p1) - pm.log(p0), 0.0)
        shape = result.shape if result.shape in SHAPES or result.shape == "monotone" else "other"
        return BucketScore(
            tuple(float(c) for c in cuts),
            tuple(float(r) for r in ranks),
            unit,  # type: ignore[arg-type]
            shape,  # type: ignore[arg-type]
            tuple(float(g) for g in guess),
        )


def _shape_of(order, shape: str) -> str:
    """ "monotone" when the order is increasing or decreasing, else the DP's shape."""
    steps = np.diff(np.asarray(order))
    return "monotone" if len(steps) and (np.all(steps > 0) or np.all(steps < 0)) else shape
