"""Epsilon lower bounds from the scores of a distinguishing game ([XWW24] eq. 4, App. A.3).

Scores in, epsilons out; the threshold rule (`auditsel.auditing.rules`) is an explicit argument.

A test "guess member = 1 when score > t" (direction '>') or "when score <= t" (direction '<=')
has false-positive rate FP (guess 1 when b = 0) and false-negative rate FN (guess 0 when
b = 1). Any (eps, delta)-DP protocol satisfies FP + e^eps FN >= 1 - delta and
FN + e^eps FP >= 1 - delta, hence (eq. 4)

    eps_L = max{ log((1 - delta - FP)/FN), log((1 - delta - FN)/FP), 0 }.

FP and FN are replaced by Clopper-Pearson upper limits (statsmodels' method="beta") taken as
two-sided intervals at level a each, so the two one-sided limits fail jointly with probability
<= a (union bound). With alpha = 1 - confidence, the rules (`THRESHOLD_RULES`, all valid at
confidence 1 - alpha on every path, conditionally on the coins) are:

* split (`Split`, the default): choose (t, direction) maximising eps_L on a pilot, a seeded
  uniformly random `split_fraction` of each class, then bound with it (a = alpha) on the rest.
  The pilot is drawn from positions in each class's sorted scores: a uniform random subset
  chosen independently of the scores is a uniform random subset of the games whatever the
  bijection between games and sorted positions, so pilot and rest are independent samples
  (as a split of the rows would give), and the answer depends on the scores, not their order.
* bonferroni (`BonferroniGrid`): a grid of m thresholds, both directions, each pair at
  a = alpha / (2 m). The grid is either fixed before any score is seen (`grid`, grid_source
  "spec"), or it is `grid_size` quantiles of a pilot drawn as split draws it, which is then
  excluded from evaluation (grid_source "pilot").
* bonferroni_all (`BonferroniAll`): every threshold on the real line and both directions at
  a = alpha / n (n = number of trials; jax_privacy's `Bonferroni()` strategy, with a divisor
  this module can prove). Proof: given the coins, take the n0 scores of class 0 with order
  statistics X_(1..n0) and continuous cdf F0 (a discrete F0 reduces to this through the
  probability integral transform). For t in [X_(k), X_(k+1)) the '>' count is n0 - k and the
  true FP is at most 1 - F0(X_(k)) ~ Beta(n0 - k + 1, k), whose (1 - a/2)-quantile is exactly
  the CP upper limit of count n0 - k: each of the n0 order statistics carries one failure event
  of probability a/2 for *every* t of its interval at once. Direction '<=' adds n0 more, class 1
  2 n1 more: 2 n events of probability a/2, total n a = alpha. So the limits hold
  simultaneously at every threshold, data-chosen ones included (streamed candidates too).
* multisplit (`MultiSplit`): `splits` independent seeded splits, split's bound at alpha / 2 on
  each, and the lower median reported ([MMB09] Theorem 3.1: twice the median p-value is a valid
  p-value; jax_privacy's `MultiSplit`).

`eps_best_threshold` (the max over all thresholds on all trials at a = alpha each, as the
papers report it) is optimistic: it is always reported under that key, never as `eps`.

GDP fit ([NHSBTJCT23]; heuristic, `gdp_fit`): mu_L = max over every threshold and both
directions of Phi^-1(1 - FP_u(t)) - Phi^-1(FN_u(t)), with limits at two-sided level
alpha / (2 n) (with the lower limits of the goodness-of-fit check, 4 n one-sided events of the
order-statistic argument above, so they hold at every threshold at once), converted to eps at
delta with the Gaussian profile ([DRS22] Corollary 2.13). It holds if the Gaussian trade-off
model does; `gdp_fit_ok` is false when the data reject the model at level alpha: some
threshold's interval [mu_lo(t), mu_hi(t)] (mu_hi from the lower limits) lies wholly below
mu_L. It is the one GDP number of an audit: the table, report.md, result.json (`lower.gdp_fit`,
`gdp_fit_mu`, `gdp_fit_ok`) and the estimator panel (`gdp_fit`) all show it.

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
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import betainccinv, betaincinv, ndtri, xlogy

from auditsel.auditing.rules import (
    MULTISPLITS,
    OPTIMISTIC_RULES,
    THRESHOLD_RULES,
    BonferroniAll,
    BonferroniGrid,
    MultiSplit,
    Split,
    ThresholdRule,
    threshold_rule,
    with_seed,
)
from auditsel.auditing.scores import check_scores
from auditsel.errors import ConfigError, number
from auditsel.mechanisms import gaussian_epsilon
from auditsel.numerics import check_deltas

__all__ = [
    "LowerBound",
    "THRESHOLD_RULES",
    "MULTISPLITS",  # the old home of these names (auditsel.auditing.rules holds them)
    "OPTIMISTIC_RULES",
    "epsilon_from_rates",
    "clopper_pearson_upper",
    "clopper_pearson_lower",
    "audit_chunks",
    "threshold_table",
    "audit_scores",
    "apply_rule",
    "gdp_mu",
    "gdp_fit",
    "GdpFit",
    "SortedScores",
    "Counts",
    "counts_from_coins",
]

FANOUT = 64  # the search splits a block of candidates this many ways
LEAF = 32  # and evaluates the candidates of a block of at most this many
ROOT_BLOCKS = 4096  # blocks bounded at once at the start (one vectorised pass)
LEGACY_OPTIONS = {"split_fraction", "grid_size", "threshold_grid", "splits", "seed"}


@dataclass(frozen=True)
class LowerBound:
    """One audit's eps lower bound and what it rests on (result.json's `lower`)."""

    eps: float
    eps_best_threshold: float
    gdp_fit: float  # heuristic: eps of the GDP fit over every threshold ([NHSBTJCT23])
    gdp_fit_mu: float
    gdp_fit_ok: bool
    confidence: float
    threshold_rule: str
    threshold: float
    direction: str
    fp: float
    fn: float
    fp_upper: float
    fn_upper: float
    trials: int
    evaluated_trials: int
    eps_point: float = math.nan  # eq. 4 with the empirical FP, FN at the same threshold (no CI)
    method: str = "clopper_pearson"
    valid: bool = True  # eps holds at `confidence` (every rule of THRESHOLD_RULES)
    grid_source: str = ""  # bonferroni: "spec" (fixed in advance) or "pilot" (excluded)
    eps_point_best: float = math.nan  # eq. 4 at the empirical rates of the best threshold
    threshold_options: dict = field(default_factory=dict)  # the rule's options (seed, ...)
    estimators: dict | None = field(default=None, compare=False)

    @property
    def eps_gdp(self) -> float:
        """Deprecated alias of `gdp_fit` (kept for one release)."""
        return self.gdp_fit

    @property
    def mu_gdp(self) -> float:
        """Deprecated alias of `gdp_fit_mu` (kept for one release)."""
        return self.gdp_fit_mu

    def to_dict(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        if out["estimators"] is None:
            del out["estimators"]
        # the keys of earlier releases, as aliases of the same numbers (kept for one release)
        out["eps_gdp"], out["mu_gdp"] = out["gdp_fit"], out["gdp_fit_mu"]
        return out


def epsilon_from_rates(fp, fn, delta: float):
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


def clopper_pearson_upper(count, nobs, alpha: float):
    """Upper limit of the two-sided Clopper-Pearson interval at level alpha: the (1 - alpha/2)
    quantile of Beta(count + 1, nobs - count), as statsmodels' `proportion_confint(method="beta")`
    computes it (called here through scipy.special without its per-call overhead); vectorised."""
    count = np.asarray(count)
    if np.size(count) == 0:
        return np.zeros(np.shape(count))
    full = count >= nobs
    c = np.where(full, nobs - 1, count).astype(float)
    upper = betainccinv(c + 1, nobs - c, alpha / 2)
    return np.where(full, 1.0, upper)


def clopper_pearson_lower(count, nobs, alpha: float):
    """Lower limit of the two-sided Clopper-Pearson interval at level alpha: the alpha/2
    quantile of Beta(count, nobs - count + 1); vectorised."""
    count = np.asarray(count)
    if np.size(count) == 0:
        return np.zeros(np.shape(count))
    empty = count <= 0
    c = np.where(empty, 1, count).astype(float)
    lower = betaincinv(c, nobs - c + 1, alpha / 2)
    return np.where(empty, 0.0, lower)


class _Limits:
    """Clopper-Pearson limits of counts out of `nobs` at two-sided level `a`: exact on demand
    (`exact`), and a cheap bound that is never better for a search (`bound`: at most the upper
    limit, at least the lower limit) and within one count of it.

    The bound is Zubkov and Serov's (2013) universal inequality for the binomial cdf F (from
    Alfers and Dinges 1984): F(k - 1) <= Phi(sign(k - n p) sqrt(2 n H(k/n, p))) <= F(k), with H
    the Kullback-Leibler divergence of Bernoulli(k/n) from Bernoulli(p). At the upper limit
    p = u, F(k) = a/2, so H(k/n, u) >= z^2 / (2 n) with z = Phi^-1(1 - a/2): u is at least the
    root above k/n of H(k/n, .) = z^2 / (2 n); likewise the lower limit is at most the root below
    k/n. The roots are bracketed from the safe side (`_kl_root_below`)."""

    def __init__(self, nobs: int, a: float, upper: bool):
        self.nobs, self.a, self.upper = nobs, a, upper
        z = -float(ndtri(a / 2))  # Phi^-1(1 - a/2), accurate for tiny a
        self.c = z * z / (2 * max(nobs, 1))
        self.edge = -math.expm1(math.log(a / 2) / max(nobs, 1))  # exact limit at count 0

    def exact(self, count):
        if self.upper:
            return clopper_pearson_upper(count, self.nobs, self.a)
        return clopper_pearson_lower(count, self.nobs, self.a)

    def bound(self, count):
        """A limit never better than the exact one at `count`: lower for upper limits, higher
        for lower limits."""
        x = np.asarray(count, dtype=float) / max(self.nobs, 1)
        return _limit_bounds(self.upper, x, self.c, self.edge)


def _limit_bounds(upper: bool, x, c, edge):
    """`_Limits.bound` at rates x (c and edge: scalars or arrays like x)."""
    if upper:  # exact at 0 (1 - (a/2)^(1/n)) and at nobs (1)
        return np.where(x >= 1, 1.0, np.where(x <= 0, edge, _kl_root_below(x, c)))
    below = 1 - _kl_root_below(1 - x, c) + 1e-15  # a margin for 1 - (1 - p)
    return np.where(x <= 0, 0.0, np.where(x >= 1, 1 - edge + 1e-15, np.minimum(below, x + 1e-15)))


def _pair_bounds(lim0: _Limits, f, lim1: _Limits, g):
    """(lim0.bound(f), lim1.bound(g)) in one pass (both upper or both lower limits)."""
    f, g = np.asarray(f, dtype=float), np.asarray(g, dtype=float)
    if lim0.upper != lim1.upper:
        return lim0.bound(f), lim1.bound(g)
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


@lru_cache(maxsize=64)
def _limits(nobs: int, a: float, upper: bool = True) -> _Limits:
    return _Limits(int(nobs), float(a), upper)


class _Rows:
    """Candidate thresholds in ascending order and their '>' counts fp (b = 0, score > t,
    non-increasing) and fn (b = 1, score <= t, non-decreasing), each a function of an index
    array, so that a table of n rows is never built when few rows are read."""

    def __init__(self, m: int, threshold, fp, fn):
        self.m, self.threshold, self.fp, self.fn = m, threshold, fp, fn

    @classmethod
    def table(cls, t, fp, fn) -> _Rows:
        t, fp, fn = np.asarray(t, dtype=float), np.asarray(fp), np.asarray(fn)
        return cls(len(t), t.__getitem__, fp.__getitem__, fn.__getitem__)

    @classmethod
    def on(cls, rows: _Part, p0: _Part, p1: _Part) -> _Rows:
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


_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


class _Part:
    """The sorted scores of one class (`s`), or the subset of them at the positions set in
    `members` (a boolean mask over s), kept as a bitset with per-word prefix counts: the i-th
    smallest member and the number of members <= t cost a binary search each, and a subset is
    never copied out of s."""

    def __init__(self, s: np.ndarray, members: np.ndarray | None = None):
        self.s = s
        self.words: np.ndarray | None = None
        if members is None:
            self.n = len(s)
            return
        packed = np.packbits(members, bitorder="little")
        packed = np.concatenate([packed, np.zeros(-len(packed) % 8, np.uint8)])
        self.words = packed.view("<u8")
        per_word = _POPCOUNT[packed].reshape(-1, 8).sum(axis=1)
        self.prefix = np.concatenate([[0], np.cumsum(per_word)])
        self.n = int(self.prefix[-1])

    def rank(self, pos) -> np.ndarray:
        """Members among the first `pos` positions of s."""
        pos = np.asarray(pos, dtype=np.int64)
        if self.words is None:
            return pos
        flat = pos.reshape(-1)
        w, b = flat >> 6, (flat & 63).astype(np.uint64)
        word = self.words[np.minimum(w, len(self.words) - 1)]
        low = word & ((np.uint64(1) << b) - np.uint64(1))
        partial = _POPCOUNT[low.view(np.uint8).reshape(-1, 8)].sum(axis=-1)
        return (self.prefix[w] + np.where(w < len(self.words), partial, 0)).reshape(pos.shape)

    def count_le(self, t) -> np.ndarray:
        """Members <= each t."""
        return self.rank(np.searchsorted(self.s, t, side="right"))

    def count_lt(self, t) -> np.ndarray:
        return self.rank(np.searchsorted(self.s, t, side="left"))

    def value(self, i) -> np.ndarray:
        """The i-th smallest member (0-based)."""
        i = np.asarray(i, dtype=np.int64)
        if self.words is None:
            return self.s[i]
        flat = i.reshape(-1)
        w = np.searchsorted(self.prefix, flat, side="right") - 1  # prefix[w] <= i < prefix[w+1]
        bits = np.unpackbits(
            self.words[w].view(np.uint8).reshape(-1, 8), axis=-1, bitorder="little"
        )
        at = np.argmax(np.cumsum(bits, axis=-1) > (flat - self.prefix[w])[:, None], axis=-1)
        return self.s[w * 64 + at].reshape(i.shape)


def _search(
    rows: _Rows,
    n0: int,
    n1: int,
    lim0: _Limits,
    lim1: _Limits,
    objective: Callable,
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
            return np.nan_to_num(objective(*_pair_bounds(lim0, f, lim1, g)), nan=np.inf)

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


def _eq4(delta: float) -> Callable:
    return lambda fp_u, fn_u: epsilon_from_rates(fp_u, fn_u, delta)


def _mu(fp_u, fn_u):
    """Phi^-1(1 - FP) - Phi^-1(FN): decreasing in both (-inf where FP = 1)."""
    with np.errstate(invalid="ignore"):
        mu = ndtri(1 - np.asarray(fp_u, dtype=float)) - ndtri(np.asarray(fn_u, dtype=float))
    return np.where(np.isnan(mu), -np.inf, mu)


def _minus_mu(fp_l, fn_l):
    """-(Phi^-1(1 - FP) - Phi^-1(FN)) at lower limits: increasing in both (no information,
    -inf, where the interval is unbounded)."""
    with np.errstate(invalid="ignore"):
        mu = ndtri(1 - np.asarray(fp_l, dtype=float)) - ndtri(np.asarray(fn_l, dtype=float))
    return np.where(np.isnan(mu), -np.inf, -mu)


def _best(
    above: _Rows, below: _Rows, n0: int, n1: int, a: float, delta: float, directions=(True, True)
) -> dict:
    """The best (threshold, direction) by eq. 4 with CP limits at level a: '>' over the rows
    `above`, '<=' over `below`; with the numbers a rule reports."""
    lim0, lim1 = _limits(n0, a), _limits(n1, a)
    found: list = []
    for flip, rows, on in ((False, above, directions[0]), (True, below, directions[1])):
        if on:  # the second direction only counts where it beats the first ('>' on ties)
            floor = found[0][2][1] if found else -math.inf
            hit = _search(rows, n0, n1, lim0, lim1, _eq4(delta), flip=flip, floor=floor)
            if hit[0] >= 0:
                found.append((flip, rows, hit))
    flip, rows, (i, eps, fp_u, fn_u) = max(found, key=lambda x: x[2][1])
    idx = np.array([i])
    f, g = int(rows.fp(idx)[0]), int(rows.fn(idx)[0])
    f, g = (n0 - f, n1 - g) if flip else (f, g)
    return dict(
        threshold=float(rows.threshold(idx)[0]),
        flip=bool(flip),
        eps=eps,
        fp_u=fp_u,
        fn_u=fn_u,
        fp=f / max(n0, 1),
        fn=g / max(n1, 1),
    )


def _best_coins(s0, s1, a: float, delta: float) -> dict:
    """_best over every threshold of the trials whose sorted scores are s0 (b = 0) and s1
    (b = 1), arrays or `_Part`s: '>' at -inf or a b = 0 score, '<=' at -inf or a b = 1 score
    (module docstring)."""
    p0, p1 = (x if isinstance(x, _Part) else _Part(x) for x in (s0, s1))
    return _best(_Rows.on(p0, p0, p1), _Rows.on(p1, p0, p1), p0.n, p1.n, a, delta)


def _best_table(c: Counts, a: float, delta: float) -> dict:
    rows = _Rows.table(c.t, c.fp, c.fn)
    return _best(rows, rows, c.n0, c.n1, a, delta)


@dataclass(frozen=True)
class Counts:
    """Counts at thresholds t of a set of trials, direction '>':
    fp[i] = #{b = 0, score > t[i]}, fn[i] = #{b = 1, score <= t[i]}; t[0] = -inf."""

    t: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    n0: int
    n1: int

    @classmethod
    def from_sorted(cls, s, b) -> Counts:
        """From scores already sorted ascending and their coins (no sort here)."""
        b = np.asarray(b, dtype=bool)
        n = len(b)
        cum1 = np.cumsum(b, dtype=np.int64)
        n1 = int(cum1[-1]) if n else 0
        n0 = n - n1
        distinct = s[1:] != s[:-1]
        if distinct.all():  # continuous scores: every position ends a run (no gathers)
            m, top, ones, rank = n, s, cum1, np.arange(1, n + 1)
        else:
            last = np.nonzero(np.append(distinct, True))[0]
            m, top, ones, rank = len(last), s[last], cum1[last], last + 1
        t = np.empty(m + 1)
        fn = np.empty(m + 1, dtype=np.int64)
        fp = np.empty(m + 1, dtype=np.int64)
        t[0], fn[0], fp[0] = -np.inf, 0, n0
        t[1:] = top
        fn[1:] = ones
        np.subtract(n0 - rank, -ones, out=fp[1:])  # n0 - #(b = 0 among the first rank)
        return cls(t, fp, fn, n0, n1)

    def at(self, thresholds):
        """(fp, fn) counts at arbitrary thresholds (largest table threshold <= each one)."""
        idx = np.searchsorted(self.t, np.asarray(thresholds, dtype=float), side="right") - 1
        return self.fp[idx], self.fn[idx]


def _search_counts(s0: np.ndarray, s1: np.ndarray, t):
    """'>' counts at thresholds t from each coin's sorted scores: fp = #(b = 0, score > t),
    fn = #(b = 1, score <= t), by binary search."""
    return len(s0) - np.searchsorted(s0, t, side="right"), np.searchsorted(s1, t, side="right")


def _counts_at(s0, s1, thresholds) -> Counts:
    """A table of the trials with sorted scores s0, s1 (arrays or `_Part`s) at the given
    thresholds only (with the row t = -inf first), whose `at` answers exactly there."""
    t = np.unique(np.asarray(thresholds, dtype=float))
    p0, p1 = (x if isinstance(x, _Part) else _Part(x) for x in (s0, s1))
    return Counts(
        np.concatenate([[-np.inf], t]),
        np.concatenate([[p0.n], p0.n - p0.count_le(t)]),
        np.concatenate([[0], p1.count_le(t)]),
        p0.n,
        p1.n,
    )


def _uniform_subset(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask with exactly k of n entries set, uniform over the k-subsets: independent
    draws (one random byte each, set with probability about k / n), then a uniform choice of
    the surplus (or deficit) flipped back. The law of the result is invariant under
    permutations and has k entries, hence uniform."""
    mask = rng.integers(0, 256, n, dtype=np.uint8) < round(256 * k / max(n, 1))
    surplus = int(np.count_nonzero(mask)) - k
    flip = surplus < 0  # deficit: add entries instead
    left = abs(surplus)
    while left:  # uniform distinct positions on the wrong side, by rejection
        pos = np.unique(rng.integers(0, n, 2 * left + 16))
        pos = pos[mask[pos] != flip]
        pos = rng.permutation(pos)[:left]
        mask[pos] = flip
        left -= len(pos)
    return mask


SPLIT_STREAM = 0x7370  # the seed's spawn key of a split (rule split, bonferroni's pilot)
MULTISPLIT_STREAM = 0x6D73  # of multisplit's splits (with the split's index)


class SortedScores:
    """The one sort: each coin's scores sorted ascending (two sorts of n/2, no argsort), from
    which every count and every split is read. Results computed on it (a rule's bound, a split's
    pilot) are kept, so that the CLI's rules and the estimator panel share them."""

    def __init__(self, scores, member):
        self.scores = np.asarray(scores, dtype=float)
        self.member = np.asarray(member).astype(bool)
        self.n = len(self.scores)
        self._all: Counts | None = None
        self._coins: tuple[np.ndarray, np.ndarray] | None = None
        self._memo: dict = {}

    def by_coin(self, mask=None) -> tuple[np.ndarray, np.ndarray]:
        """(sorted scores of the b = 0 trials, of the b = 1 trials) among `mask` (all if None)."""
        if mask is None and self._coins is not None:
            return self._coins
        s, b = (
            (self.scores, self.member) if mask is None else (self.scores[mask], self.member[mask])
        )
        coins = _sorted_parts(s, (~b, b))
        if mask is None:
            self._coins = coins
        return coins

    def counts(self, mask=None) -> Counts:
        """Counts at every distinct threshold of the trials selected by `mask`; all when None."""
        if mask is None:
            if self._all is None:
                self._all = counts_from_coins(*self.by_coin())
            return self._all
        return counts_from_coins(*self.by_coin(mask))

    def counts_at(self, mask, thresholds) -> Counts:
        """Counts of the trials selected by `mask` (None: all) at the given thresholds only, as
        a table whose `at` answers exactly at those thresholds."""
        return _counts_at(*self.by_coin(mask), thresholds)

    def memo(self, key, compute: Callable[[], Any]):
        """compute(), once per key on this sort."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def pilot(
        self, split_fraction: float, seed: int | None, index: int | None = None
    ) -> tuple[_Part, _Part]:
        """The scores of each class in the pilot of a split (as `_Part`s of the sorted scores): `int(n_c * split_fraction)`
        of the n_c games of class c, a uniform random subset drawn from `seed` (`index`: the
        index-th split of a multisplit); the rest of each class is the evaluation part."""
        if seed is None:  # apply_rule gives every rule a seed first
            raise ValueError("a split needs a seed")
        s0, s1 = self.by_coin()
        sizes = [int(len(s) * split_fraction) for s in (s0, s1)]
        for c, (s, k) in enumerate(zip((s0, s1), sizes)):
            if not 0 < k < len(s):
                part = "pilot" if k == 0 else "evaluation part"
                raise ConfigError(
                    "split_fraction",
                    f"{split_fraction:g} leaves no game with member = {c} in the {part} "
                    f"({len(s)} such games); each part needs both coins: use more games or "
                    f"another split_fraction",
                )

        def draw():
            key = (SPLIT_STREAM,) if index is None else (MULTISPLIT_STREAM, index)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))
            return tuple(_Part(s, _uniform_subset(len(s), k, rng)) for s, k in zip((s0, s1), sizes))

        if index is not None:
            return draw()
        return self.memo(("pilot", split_fraction, seed), draw)

    def rest_at(self, pilot, thresholds) -> Counts:
        """Counts of the evaluation part (all games but the `pilot`'s) at the thresholds: the
        counts of all games less the pilot's (no second split of the arrays)."""
        every = self.counts_at(None, thresholds)
        p0, p1 = pilot
        part = _counts_at(p0, p1, thresholds)
        return Counts(
            every.t, every.fp - part.fp, every.fn - part.fn, every.n0 - part.n0, every.n1 - part.n1
        )


THREADED_SORT_ABOVE = 1 << 20  # each coin's sort in its own thread from here (numpy frees the GIL)
_SORT_POOL: ThreadPoolExecutor | None = None


def _sorted_parts(s: np.ndarray, masks) -> tuple:
    """np.sort(s[m]) for each mask; the parts in parallel threads when s is large."""
    global _SORT_POOL
    if len(s) < THREADED_SORT_ABOVE:
        return tuple(np.sort(s[m]) for m in masks)
    if _SORT_POOL is None:
        _SORT_POOL = ThreadPoolExecutor(2, thread_name_prefix="auditsel-sort")
    return tuple(_SORT_POOL.map(lambda m: np.sort(s[m]), masks))


def counts_from_coins(s0: np.ndarray, s1: np.ndarray) -> Counts:
    """The count table of the trials whose sorted scores are s0 (b = 0) and s1 (b = 1): the two
    are merged in O(n) after one binary search of s1 in s0 (no sort)."""
    n0, n1 = len(s0), len(s1)
    pos1 = np.searchsorted(s0, s1, side="right") + np.arange(n1)
    is1 = np.zeros(n0 + n1, dtype=bool)
    is1[pos1] = True
    merged = np.empty(n0 + n1)
    merged[pos1] = s1
    merged[~is1] = s0
    return Counts.from_sorted(merged, is1)


def threshold_table(scores, member):
    """All distinct thresholds with counts for direction '>' (guess 1 when score > t).

    Returns (t, fp_count, fn_count, n0, n1); t[0] = -inf (everything guessed 1).
    Direction '<=' has counts n0 - fp_count and n1 - fn_count.
    """
    c = SortedScores(scores, member).counts()
    return c.t, c.fp, c.fn, c.n0, c.n1


def gdp_mu(fp_upper: float, fn_upper: float) -> float:
    """mu_L = Phi^-1(1 - FP) - Phi^-1(FN), clipped at 0 ([NHSBTJCT23])."""
    return max(float(ndtri(1 - fp_upper) - ndtri(fn_upper)), 0.0)


def _gdp_epsilon(mu: float, delta: float) -> float:
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    return gaussian_epsilon(mu, delta) if delta > 0 else math.inf


@dataclass(frozen=True)
class GdpFit:
    """The GDP fit over every threshold (module docstring): eps at delta, mu_L (and
    `mu_interval_max_low`, the same before clipping at 0), the goodness of fit (`ok`; when the
    model is rejected, `mu_interval_min_high` is a threshold's mu_hi below mu_L, else +inf),
    and the threshold where mu_L is reached."""

    eps: float
    mu: float
    ok: bool
    mu_interval_max_low: float
    mu_interval_min_high: float
    threshold: float | None
    direction: str


def _gdp(above: _Rows, below: _Rows, up: _Rows, down: _Rows, n0, n1, n, alpha, delta) -> GdpFit:
    """gdp_fit over candidate rows: mu_L's maximum in '>' over `above` and '<=' over `below`;
    the goodness-of-fit minimum of mu_hi (increasing in the counts) over `up` ('>') or `down`
    ('<='), in the direction of the maximum."""
    a = alpha / (2 * n)
    u0, u1 = _limits(n0, a), _limits(n1, a)
    fits: list = []
    for flip, rows in ((False, above), (True, below)):  # '<=' counts where it beats '>'
        floor = fits[0][2][1] if fits else -math.inf
        hit = _search(rows, n0, n1, u0, u1, _mu, flip=flip, floor=floor)
        if hit[0] >= 0:
            fits.append((flip, rows, hit))
    flip, rows, (i, lo, _, _) = max(fits, key=lambda x: x[2][1])
    l0, l1 = _limits(n0, a, upper=False), _limits(n1, a, upper=False)
    gof = _search(
        down if flip else up,
        n0,
        n1,
        l0,
        l1,
        _minus_mu,
        flip=flip,
        increasing=True,
        stop_above=-lo if math.isfinite(lo) else math.inf,
        floor=-lo if math.isfinite(lo) else -math.inf,
    )
    hi = -gof[1]  # +inf when no threshold's interval lies below mu_L
    mu = max(lo, 0.0)
    return GdpFit(
        eps=_gdp_epsilon(mu, delta),
        mu=mu,
        ok=bool(hi >= lo),
        mu_interval_max_low=lo,
        mu_interval_min_high=hi,
        threshold=float(rows.threshold(np.array([i]))[0]) if i >= 0 else None,
        direction="<=" if flip else ">",
    )


def gdp_fit(sorted_scores: SortedScores, alpha: float, delta: float) -> GdpFit:
    """The GDP fit of the games of `sorted_scores` over every threshold, at significance
    `alpha` (module docstring); heuristic: it holds if the Gaussian trade-off model does."""
    delta = float(check_deltas(delta)[0])
    ss = sorted_scores

    def compute():
        s0, s1 = ss.by_coin()
        p0, p1 = _Part(s0), _Part(s1)
        at0, at1 = _Rows.on(p0, p0, p1), _Rows.on(p1, p0, p1)
        # mu_L decreases in the counts: '>' at b = 0 scores, '<=' at b = 1 scores; mu_hi
        # increases: the other way round
        return _gdp(at0, at1, at1, at0, len(s0), len(s1), ss.n, alpha, delta)

    return ss.memo(("gdp", alpha, delta), compute)


def _evaluate(c: Counts, threshold, flip, alpha, delta):
    """eq. 4 with CP limits at one (threshold, direction) on the trials of table `c`."""
    fp, fn = c.at(np.array([threshold]))
    n0, n1 = c.n0, c.n1
    fp, fn = (n0 - fp, n1 - fn) if flip else (fp, fn)
    fp_u = float(clopper_pearson_upper(fp, n0, alpha)[0])
    fn_u = float(clopper_pearson_upper(fn, n1, alpha)[0])
    return dict(
        threshold=threshold,
        flip=flip,
        eps=float(epsilon_from_rates(fp_u, fn_u, delta)),
        fp_u=fp_u,
        fn_u=fn_u,
        fp=float(fp[0]) / max(n0, 1),
        fn=float(fn[0]) / max(n1, 1),
        n=n0 + n1,
    )


def _split(ss: SortedScores, pilot, alpha, delta) -> dict:
    """Pick (threshold, direction) on the pilot (each coin's sorted scores) and bound it by
    eq. 4 with CP limits on the rest, both at level alpha."""
    p0, p1 = pilot
    pick = _best_coins(p0, p1, alpha, delta)
    ev = ss.rest_at(pilot, [pick["threshold"]])
    return _evaluate(ev, pick["threshold"], pick["flip"], alpha, delta)


def _kth_smallest(parts: list[_Part], ks: np.ndarray) -> np.ndarray:
    """The ks-th smallest (0-based) finite scores among the members of two parts, by binary
    search for the first finite member of each whose rank in the union exceeds k (no merge)."""
    ranges = []
    for p in parts:  # the members at finite scores: member indices [first, first + count)
        lo, hi = (
            np.searchsorted(p.s, [-np.inf, np.inf], side="right")[0],
            np.searchsorted(p.s, np.inf, side="left"),
        )
        first = int(p.rank(lo))
        ranges.append((first, int(p.rank(hi)) - first))

    def first_reaching(x: _Part, xr, other: _Part, orr):
        lo, hi = np.zeros(len(ks), np.int64), np.full(len(ks), xr[1], np.int64)
        while np.any(lo < hi):
            active = lo < hi
            mid = np.where(active, (lo + hi) // 2, 0)
            rank = mid + 1 + other.count_le(x.value(xr[0] + mid)) - orr[0]
            reach = rank >= ks + 1
            hi = np.where(active & reach, mid, hi)
            lo = np.where(active & ~reach, mid + 1, lo)
        out = np.full(len(ks), np.inf)
        found = lo < xr[1]
        out[found] = x.value(xr[0] + lo[found])
        return out

    (a, b), (ar, br) = parts, ranges
    return np.minimum(first_reaching(a, ar, b, br), first_reaching(b, br, a, ar))


def _pilot_grid(pilot, grid_size: int) -> np.ndarray:
    """`grid_size` quantiles of the pilot's finite scores (the pilot being excluded from
    evaluation afterwards): the values at ranks round(linspace(0, N - 1, grid_size))."""
    parts = [x if isinstance(x, _Part) else _Part(x) for x in pilot]
    finite = [int(p.count_lt(np.inf)) - int(p.count_le(-np.inf)) for p in parts]
    total = sum(finite)
    if not total:
        return np.zeros(1)
    ranks = np.unique(np.round(np.linspace(0, total - 1, grid_size)).astype(np.int64))
    return np.unique(_kth_smallest(parts, ranks))


def _legacy_rule(rule, options: Mapping[str, Any], caller: str, warn: bool = True) -> ThresholdRule:
    """The rule object of the old call forms (a name and keyword options) for one release."""
    unknown = set(options) - LEGACY_OPTIONS
    if unknown:
        raise TypeError(
            f"{caller}() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
        )
    if options and isinstance(rule, ThresholdRule):
        raise TypeError(
            f"{caller}(): give the options on the rule object, not beside it: "
            f"{', '.join(sorted(options))}"
        )
    if options and warn:
        name = rule if isinstance(rule, str) else "split"
        cls = threshold_rule(name).__class__.__name__
        warnings.warn(
            f"{caller}({', '.join(f'{k}=...' for k in sorted(options))}) is deprecated; pass "
            f"rule={cls}(...) with the options on the rule (auditsel.auditing.rules); the old "
            f"keywords are accepted for one release",
            DeprecationWarning,
            stacklevel=3,
        )
    opts = dict(options)
    if "threshold_grid" in opts:
        opts["grid"] = opts.pop("threshold_grid")
    try:
        return threshold_rule(rule, **opts)
    except ConfigError as err:
        if err.field == "grid" and "threshold_grid" in options:
            raise ConfigError("threshold_grid", err.message) from None
        raise


def _check_levels(confidence, delta) -> tuple[float, float]:
    confidence = number(confidence, "confidence", 0.5, 1, hi_open=True)
    delta = number(delta, "delta", 0, 1, hi_open=True)
    return confidence, delta


def apply_rule(
    sorted_scores: SortedScores,
    rule: ThresholdRule | str,
    alpha: float,
    delta: float,
    **options: Any,
) -> dict:
    """One threshold rule at significance alpha on one sort; returns the chosen threshold's
    numbers (threshold, flip, eps, fp_u, fn_u, fp, fn, n evaluated, grid_source). A rule's name
    with keyword options is the old call form (no warning: this is the engine's entry)."""
    delta = float(check_deltas(delta)[0])
    rule = with_seed(_legacy_rule(rule, options, "apply_rule", warn=False))
    ss = sorted_scores
    return ss.memo(("rule", rule, alpha, delta), lambda: _apply(ss, rule, alpha, delta))


def _apply(ss: SortedScores, rule: ThresholdRule, alpha: float, delta: float) -> dict:
    n = ss.n
    if isinstance(rule, Split):
        pilot = ss.pilot(rule.split_fraction, rule.seed)
        return {**_split(ss, pilot, alpha, delta), "grid_source": ""}
    if isinstance(rule, BonferroniGrid) and rule.grid is None:
        pilot = ss.pilot(rule.split_fraction, rule.seed)
        grid = _pilot_grid(pilot, rule.grid_size)
        ev = ss.rest_at(pilot, grid)
        fp, fn = ev.at(grid)
        chosen = _best_table(Counts(grid, fp, fn, ev.n0, ev.n1), alpha / (2 * len(grid)), delta)
        return {**chosen, "n": ev.n0 + ev.n1, "grid_source": "pilot"}
    if isinstance(rule, BonferroniGrid):
        grid = np.unique(np.asarray(rule.grid, dtype=float))
        c = ss.counts_at(None, grid)
        fp, fn = c.at(grid)
        chosen = _best_table(Counts(grid, fp, fn, c.n0, c.n1), alpha / (2 * len(grid)), delta)
        return {**chosen, "n": n, "grid_source": "spec"}
    if isinstance(rule, BonferroniAll):
        return {
            **_best_coins(*ss.by_coin(), alpha / max(n, 1), delta),
            "n": n,
            "grid_source": "all",
        }
    if isinstance(rule, MultiSplit):
        runs = [
            _split(ss, ss.pilot(rule.split_fraction, rule.seed, index=i), alpha / 2, delta)
            for i in range(rule.splits)
        ]
        runs.sort(key=lambda r: r["eps"])
        median = runs[(len(runs) - 1) // 2]  # the lower median: conservative for even counts
        return {**median, "grid_source": "", "splits": [r["eps"] for r in runs]}
    raise ConfigError("rule", f"must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}")


def _bound(
    chosen, best, rule, confidence, delta, trials, grid_source, gdp: GdpFit, estimators=None
):
    return LowerBound(
        eps=chosen["eps"],
        eps_best_threshold=best["eps"],
        gdp_fit=gdp.eps,
        gdp_fit_mu=gdp.mu,
        gdp_fit_ok=gdp.ok,
        confidence=confidence,
        threshold_rule=rule.name,
        threshold=chosen["threshold"],
        direction="<=" if chosen["flip"] else ">",
        fp=float(chosen["fp"]),
        fn=float(chosen["fn"]),
        fp_upper=chosen["fp_u"],
        fn_upper=chosen["fn_u"],
        trials=int(trials),
        evaluated_trials=int(chosen["n"]),
        eps_point=float(epsilon_from_rates(chosen["fp"], chosen["fn"], delta)),
        valid=True,
        grid_source=grid_source,
        eps_point_best=float(epsilon_from_rates(best["fp"], best["fn"], delta)),
        threshold_options=rule.options(),
        estimators=estimators,
    )


def best_threshold(sorted_scores: SortedScores, alpha: float, delta: float) -> dict:
    """The optimistic max of eq. 4 over every threshold at level alpha each (no confidence)."""
    ss = sorted_scores
    return ss.memo(("best", alpha, delta), lambda: _best_coins(*ss.by_coin(), alpha, delta))


def audit_scores(
    scores,
    member,
    delta: float,
    *,
    confidence: float = 0.95,
    rule: ThresholdRule | str = "split",
    sorted_scores: SortedScores | None = None,
    **old_options: Any,
) -> LowerBound:
    """eps lower bound from game scores (higher = guess member) under a threshold rule.

    `member` holds the true coins b (0 or 1). `rule` is a rule of `auditsel.auditing.rules`
    (`Split()`, `BonferroniGrid(...)`, `BonferroniAll()`, `MultiSplit(...)`) or its name; every
    rule is valid at `confidence`. The answer depends on the scores of each class and the
    rule's seed, never on the order of the rows; a rule without a seed gets a fresh one, which
    the result records in `threshold_options`. Pass `sorted_scores` (a `SortedScores` of the same scores) to reuse a
    sort. The old keyword options (`split_fraction`, `grid_size`, `threshold_grid`, `splits`,
    `seed`) are accepted for one release with a DeprecationWarning.
    """
    rule = with_seed(_legacy_rule(rule, old_options, "audit_scores"))
    confidence, delta = _check_levels(confidence, delta)
    scores, member = check_scores(scores, member)
    alpha = 1 - confidence
    ss = sorted_scores if sorted_scores is not None else SortedScores(scores, member)
    chosen = apply_rule(ss, rule, alpha, delta)
    best = best_threshold(ss, alpha, delta)
    gdp = gdp_fit(ss, alpha, delta)
    return _bound(chosen, best, rule, confidence, delta, len(scores), chosen["grid_source"], gdp)


# --- streamed audits: bounded memory for any number of trials --------------------------------

STREAM_CANDIDATES = 4096


def _chunk_counts(scores, member, thresholds):
    """fp (b = 0, score > t) and fn (b = 1, score <= t) counts of one chunk at each threshold."""
    s0, s1 = SortedScores(scores, member).by_coin()
    return (*_search_counts(s0, s1, thresholds), len(s0), len(s1))


def _stream_counts(source, indices, thresholds):
    fp = np.zeros(len(thresholds), dtype=np.int64)
    fn = np.zeros(len(thresholds), dtype=np.int64)
    n0 = n1 = 0
    for i in indices:
        scores, member = source.load(i)
        a, b, c0, c1 = _chunk_counts(scores, member, thresholds)
        fp += a
        fn += b
        n0 += c0
        n1 += c1
    return Counts(np.asarray(thresholds, dtype=float), fp, fn, n0, n1)


def audit_chunks(
    source,
    delta: float,
    *,
    confidence: float = 0.95,
    rule: ThresholdRule | str = "split",
    candidates: int = STREAM_CANDIDATES,
    **old_options: Any,
) -> LowerBound:
    """audit_scores for trials streamed chunk by chunk from `source`
    (auditsel.games.engine.ChunkSource).

    Memory is bounded by one chunk plus the threshold counts. Chunks [0, cut) with
    cut = round(chunks * split_fraction) are the selection part (the pilot), the others the
    evaluation part: the games are independent draws in chunk order, so the chunks themselves
    are the seeded split (a rule's `seed` is not used here). Candidate thresholds are
    `candidates` quantiles of chunk 0's scores, a part of the pilot, so:
    * split picks (t, direction) on the pilot chunks and bounds on the others (valid);
    * bonferroni uses the rule's grid on all chunks, or `grid_size` quantiles of chunk 0 (the
      pilot) on the evaluation chunks only (valid);
    * bonferroni_all takes the max over the candidates on all chunks at alpha / n: valid
      whatever the candidates, since its limits hold at every threshold at once;
    * multisplit needs the trials in memory (refused here);
    * eps_best_threshold is the max over the candidates at alpha (optimistic), and the GDP fit
      is taken over the candidates (its limits hold at every threshold at once).
    """
    rule = _legacy_rule(rule, old_options, "audit_chunks")
    confidence, delta = _check_levels(confidence, delta)
    if isinstance(rule, MultiSplit):
        raise ConfigError(
            "rule",
            "multisplit needs the scores in memory; a streamed audit "
            "offers split, bonferroni and bonferroni_all (or set game.stream: false)",
        )
    alpha = 1 - confidence
    n_chunks = len(source)
    fraction = getattr(rule, "split_fraction", 0.5)
    cut = int(round(n_chunks * fraction))
    spec_grid = isinstance(rule, BonferroniGrid) and rule.grid is not None
    if isinstance(rule, (Split, BonferroniGrid)) and not 0 < cut < n_chunks and not spec_grid:
        raise ConfigError(
            "split_fraction",
            f"with {n_chunks} chunks the split leaves a part "
            f"empty; use more trials or a smaller game.chunk_size",
        )
    first, _ = source.load(0)
    finite = np.sort(first[np.isfinite(first)])
    quantiles = _pilot_grid((finite, finite[:0]), candidates)
    grid = np.unique(np.concatenate([[-np.inf], quantiles]))
    head = _stream_counts(source, range(min(max(cut, 1), n_chunks)), grid)
    tail = _stream_counts(source, range(min(max(cut, 1), n_chunks), n_chunks), grid)
    total = Counts(grid, head.fp + tail.fp, head.fn + tail.fn, head.n0 + tail.n0, head.n1 + tail.n1)
    if total.n0 == 0 or total.n1 == 0:
        raise ConfigError("member", "needs trials with both member = 0 and member = 1")
    n = total.n0 + total.n1
    best = _best_table(total, alpha, delta)
    grid_source = ""
    if isinstance(rule, Split):
        _need_both(head), _need_both(tail)
        pick = _best_table(head, alpha, delta)
        ev = _stream_counts(source, range(cut, n_chunks), np.array([pick["threshold"]]))
        chosen = _evaluate(ev, pick["threshold"], pick["flip"], alpha, delta)
    elif isinstance(rule, BonferroniGrid) and rule.grid is not None:
        fixed = np.unique(np.asarray(rule.grid, dtype=float))
        c = _stream_counts(source, range(n_chunks), fixed)
        chosen = {**_best_table(c, alpha / (2 * len(fixed)), delta), "n": n}
        grid_source = "spec"
    elif isinstance(rule, BonferroniGrid):
        _need_both(tail)
        pilot = _pilot_grid((finite, finite[:0]), rule.grid_size)
        c = _stream_counts(source, range(cut, n_chunks), pilot)
        chosen = {**_best_table(c, alpha / (2 * len(pilot)), delta), "n": c.n0 + c.n1}
        grid_source = "pilot"
    else:  # bonferroni_all
        chosen = {**_best_table(total, alpha / n, delta), "n": n}
        grid_source = "all"
    rows = _Rows.table(total.t, total.fp, total.fn)
    gdp = _gdp(rows, rows, rows, rows, total.n0, total.n1, n, alpha, delta)
    return _bound(chosen, best, rule, confidence, delta, source.trials, grid_source, gdp)


def _need_both(c: Counts):
    if c.n0 == 0 or c.n1 == 0:
        raise ConfigError(
            "split_fraction", "leaves a part of the chunks without both coins; use more trials"
        )
