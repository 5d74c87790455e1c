"""Epsilon lower bounds from the scores of a distinguishing game ([XWW24] eq. 4, App. A.3).

Scores in, epsilons out; the threshold rule is an explicit argument.

A test "guess member = 1 when score > t" (direction '>') or "when score <= t" (direction '<=')
has false-positive rate FP (guess 1 when b = 0) and false-negative rate FN (guess 0 when
b = 1). Any (eps, delta)-DP protocol satisfies FP + e^eps FN >= 1 - delta and
FN + e^eps FP >= 1 - delta, hence (eq. 4)

    eps_L = max{ log((1 - delta - FP)/FN), log((1 - delta - FN)/FP), 0 }.

FP and FN are replaced by Clopper-Pearson upper limits (statsmodels' method="beta") taken as
two-sided intervals at level a each, so the two one-sided limits fail jointly with probability
<= a (union bound). With alpha = 1 - confidence, the rules (`THRESHOLD_RULES`, all valid at
confidence 1 - alpha on every path, conditionally on the coins) are:

* split (default): choose (t, direction) maximising eps_L on the first `split_fraction` of
  the trials, then bound with it (a = alpha) on the rest.
* bonferroni: a grid of m thresholds, both directions, each pair at a = alpha / (2 m). The grid
  is either fixed by the spec before any score is seen (`threshold_grid`, grid_source "spec"),
  or it is `grid_size` quantiles of a *pilot*, the first `split_fraction` of the trials, which
  is then excluded from evaluation (grid_source "pilot").
* bonferroni_all: every threshold on the real line and both directions at a = alpha / n
  (n = number of trials; jax_privacy's `Bonferroni()` strategy, with a divisor this module can
  prove). Proof: given the coins, take the n0 scores of class 0 with order statistics
  X_(1..n0) and continuous cdf F0 (a discrete F0 reduces to this through the probability
  integral transform). For t in [X_(k), X_(k+1)) the '>' count is n0 - k and the true FP is at
  most 1 - F0(X_(k)) ~ Beta(n0 - k + 1, k), whose (1 - a/2)-quantile is exactly the CP upper
  limit of count n0 - k: each of the n0 order statistics carries one failure event of
  probability a/2 for *every* t of its interval at once. Direction '<=' adds n0 more, class 1
  2 n1 more: 2 n events of probability a/2, total n a = alpha. So the limits hold
  simultaneously at every threshold, data-chosen ones included (streamed candidates too).
* multisplit: `splits` random splits of the trials (seeded), split's bound at alpha / 2 on
  each, and the lower median reported ([MMB09] Theorem 3.1:
  twice the median p-value is a valid p-value; jax_privacy's `MultiSplit`).

`eps_best_threshold` (the max over all thresholds on all trials at a = alpha each, as the
papers report it) is optimistic: it is always reported under that key, never as `eps`.

One sort serves every rule (issue "one sort"): `SortedScores` sorts each coin's scores once
(two sorts of n/2 values: far cheaper than an argsort of n); the count table of any subset of
trials (the split's two parts, a multisplit's random halves, the pilot) is a merge of its
coins' sorted scores, and counts at a few thresholds (a split's evaluation part) are O(n)
comparisons without a sort; every rule and every estimator of `auditsel.auditing.estimators` reads the
same object (O(n log n) at most once per subset, O(n) per evaluation). The exact
Clopper-Pearson limit is evaluated only where an optimistic bound (the limit is at least the
empirical rate, for confidence >= 1/2) could beat the best value found.

GDP fit ([NHSBTJCT23]; heuristic): mu_L = Phi^-1(1 - FP) - Phi^-1(FN) from the limits
at the rule's threshold, converted to eps at delta with the Gaussian profile.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import betainccinv, betaincinv, ndtri

from auditsel.errors import ConfigError
from auditsel.mechanisms import gaussian_epsilon
from auditsel.numerics import check_deltas

__all__ = [
    "LowerBound",
    "THRESHOLD_RULES",
    "epsilon_from_rates",
    "clopper_pearson_upper",
    "clopper_pearson_lower",
    "audit_chunks",
    "threshold_table",
    "audit_scores",
    "gdp_mu",
    "SortedScores",
    "Counts",
    "counts_from_coins",
]

THRESHOLD_RULES = ("split", "bonferroni", "bonferroni_all", "multisplit")
OPTIMISTIC_RULES = ("best",)
PRUNE_BLOCK = 2048
FIRST_BLOCK = 16
TABLE_BLOCK = 1024
MULTISPLITS = 21  # odd, so the median is one of the bounds


@dataclass(frozen=True)
class LowerBound:
    eps: float
    eps_gdp: float
    eps_best_threshold: float
    mu_gdp: float
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
    estimators: dict | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        if out["estimators"] is None:
            del out["estimators"]
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
    computes it (called here through scipy.special without its per-call overhead)."""
    count = np.asarray(count)
    if np.size(count) == 0:
        return np.zeros(np.shape(count))
    full = count >= nobs
    c = np.where(full, nobs - 1, count).astype(float)
    upper = betainccinv(c + 1, nobs - c, alpha / 2)
    return np.where(full, 1.0, upper)


def clopper_pearson_lower(count, nobs, alpha: float):
    """Lower limit of the two-sided Clopper-Pearson interval at level alpha: the alpha/2
    quantile of Beta(count, nobs - count + 1)."""
    count = np.asarray(count)
    if np.size(count) == 0:
        return np.zeros(np.shape(count))
    empty = count <= 0
    c = np.where(empty, 1, count).astype(float)
    lower = betaincinv(c, nobs - c + 1, alpha / 2)
    return np.where(empty, 0.0, lower)


@dataclass(frozen=True)
class Counts:
    """Counts at every distinct threshold of a set of trials, direction '>':
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


class SortedScores:
    """The one sort: each coin's scores sorted ascending (two sorts of n/2, no argsort), from
    which every count table is a merge. Subsets of trials (a split's parts, a multisplit's
    random halves) are boolean masks over the trial index."""

    def __init__(self, scores, member):
        self.scores = np.asarray(scores, dtype=float)
        self.member = np.asarray(member).astype(bool)
        self.n = len(self.scores)
        self._all = self._coins = None

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
        """Counts of the trials selected by `mask` (all: None, from the cached sort) at the given
        thresholds only (O(n) per few thresholds: no sort), as a table whose `at` answers
        exactly at those thresholds."""
        t = np.unique(np.asarray(thresholds, dtype=float))
        if mask is None or len(t) > 8:
            s0, s1 = self.by_coin(mask)
            n0, n1 = len(s0), len(s1)
            fp, fn = _search_counts(s0, s1, t)
        else:
            s, b = self.scores[mask], self.member[mask]
            n1 = int(np.count_nonzero(b))
            n0 = len(b) - n1
            fp = np.array([np.count_nonzero(~b & (s > x)) for x in t], dtype=np.int64)
            fn = np.array([np.count_nonzero(b & (s <= x)) for x in t], dtype=np.int64)
        return Counts(
            np.concatenate([[-np.inf], t]),
            np.concatenate([[n0], fp]),
            np.concatenate([[0], fn]),
            n0,
            n1,
        )

    def first(self, cut: int) -> tuple[slice, slice]:
        """The trials with index < cut (a split's first part) and the others, as slices."""
        return slice(0, cut), slice(cut, None)


THREADED_SORT_ABOVE = 1 << 20  # each coin's sort in its own thread from here (numpy frees the GIL)
_SORT_POOL = None


def _sorted_parts(s: np.ndarray, masks) -> tuple:
    """np.sort(s[m]) for each mask; the parts in parallel threads when s is large."""
    global _SORT_POOL
    if len(s) < THREADED_SORT_ABOVE:
        return tuple(np.sort(s[m]) for m in masks)
    if _SORT_POOL is None:
        _SORT_POOL = ThreadPoolExecutor(2, thread_name_prefix="auditsel-sort")
    return tuple(_SORT_POOL.map(lambda m: np.sort(s[m]), masks))


def _search_counts(s0: np.ndarray, s1: np.ndarray, t):
    """'>' counts at thresholds t from each coin's sorted scores: fp = #(b = 0, score > t),
    fn = #(b = 1, score <= t), by binary search."""
    return len(s0) - np.searchsorted(s0, t, side="right"), np.searchsorted(s1, t, side="right")


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


def _both_directions(fp, fn, n0, n1):
    """Stack counts for '>' and '<=' as (fp, fn, direction_flag)."""
    fp = np.asarray(fp)
    fn = np.asarray(fn)
    return (
        np.concatenate([fp, n0 - fp]),
        np.concatenate([fn, n1 - fn]),
        np.concatenate([np.zeros(len(fp), bool), np.ones(len(fp), bool)]),
    )


def _optimistic_upper(count, nobs, alpha):
    """A value <= the CP upper limit: the empirical rate, and the exact limit at count 0."""
    zero = 1 - (alpha / 2) ** (1 / max(nobs, 1))
    return np.where(count == 0, zero, count / max(nobs, 1))


def _maximise(fp, fn, n0, n1, alpha, delta):
    """argmax over candidates of eq. 4 with CP limits; returns (index, eps, fp_u, fn_u).

    Candidates are visited in decreasing order of an optimistic bound (the empirical rates,
    and the exact limit at count 0; the CP limit is never below them for confidence >= 1/2),
    in blocks of growing size (FIRST_BLOCK doubling up to PRUNE_BLOCK); the exact limit is
    computed only while a candidate's optimistic bound can still beat the best value found.
    """
    bound = epsilon_from_rates(
        _optimistic_upper(fp, n0, alpha), _optimistic_upper(fn, n1, alpha), delta
    )
    best = (-1, -np.inf, 1.0, 1.0)
    done = np.zeros(len(bound), bool)
    size = FIRST_BLOCK
    while True:
        open_ = np.nonzero((bound > best[1]) & ~done)[0] if best[0] >= 0 else np.nonzero(~done)[0]
        if not len(open_):
            break
        k = min(PRUNE_BLOCK, len(open_))
        top = open_[np.argpartition(-bound[open_], k - 1)[:k]] if k < len(open_) else open_
        top = top[np.argsort(-bound[top], kind="stable")]
        start = 0
        while start < len(top):
            block = top[start : start + size]
            start += len(block)
            size = min(2 * size, PRUNE_BLOCK)
            if bound[block[0]] <= best[1]:
                start = len(top)
                break
            block = block[bound[block] > best[1]] if best[0] >= 0 else block
            done[block] = True
            fp_u = clopper_pearson_upper(fp[block], n0, alpha)
            fn_u = clopper_pearson_upper(fn[block], n1, alpha)
            eps = epsilon_from_rates(fp_u, fn_u, delta)
            j = int(np.argmax(eps))
            if eps[j] > best[1] or best[0] < 0:
                best = (int(block[j]), float(eps[j]), float(fp_u[j]), float(fn_u[j]))
        done[top] = True
    return best


def _maximise_table(
    fp, fn, n0, n1, alpha, delta, block: int = TABLE_BLOCK, directions=(True, True)
):
    """_maximise over both directions of a threshold table (fp non-increasing, fn
    non-decreasing along the thresholds), returning an index into the stacked ('>', '<=')
    candidates of `_both_directions`; `directions` leaves out '>' or '<='.

    Blocks of consecutive thresholds are bounded first: eq. 4 with the optimistic limits is
    decreasing in both counts, so a block's value is at most its value at (smallest fp,
    smallest fn) of the block, in each direction. Blocks are opened in decreasing order of
    that bound until no unopened block can beat the best value found: the exact maximum at
    O(n / block) cost for the bounds plus the few blocks near the optimum.
    """
    m = len(fp)
    starts = np.arange(0, m, block)
    ends = np.minimum(starts + block, m) - 1
    opt = lambda a, b: epsilon_from_rates(
        _optimistic_upper(a, n0, alpha), _optimistic_upper(b, n1, alpha), delta
    )
    off = np.full(len(starts), -np.inf)
    bounds = np.concatenate(
        [
            opt(fp[ends], fn[starts]) if directions[0] else off,
            opt(n0 - fp[starts], n1 - fn[ends]) if directions[1] else off,
        ]
    )
    best = (-1, -np.inf, 1.0, 1.0)
    for k in np.argsort(-bounds, kind="stable"):
        if (bounds[k] <= best[1] and best[0] >= 0) or bounds[k] == -np.inf:
            break
        flip, b = divmod(int(k), len(starts))
        lo, hi = starts[b], ends[b] + 1
        f, g = (n0 - fp[lo:hi], n1 - fn[lo:hi]) if flip else (fp[lo:hi], fn[lo:hi])
        i, eps, fp_u, fn_u = _maximise(f, g, n0, n1, alpha, delta)
        if eps > best[1] or best[0] < 0:
            best = (flip * m + lo + i, eps, fp_u, fn_u)
    return best


def gdp_mu(fp_upper: float, fn_upper: float) -> float:
    """mu_L = Phi^-1(1 - FP) - Phi^-1(FN), clipped at 0 ([NHSBTJCT23])."""
    return max(float(ndtri(1 - fp_upper) - ndtri(fn_upper)), 0.0)


def _gdp_epsilon(mu: float, delta: float) -> float:
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    return gaussian_epsilon(mu, delta) if delta > 0 else math.inf


def _pick(thresholds, fp, fn, n0, n1, alpha, delta, directions=(True, True)):
    """The best (threshold, direction) among candidates with '>' counts fp, fn, at level alpha
    (thresholds ascending, so fp is non-increasing and fn non-decreasing); each of the three
    may be an array or an `_OnDemand` column."""
    if not isinstance(fp, _OnDemand):
        fp, fn, thresholds = np.asarray(fp), np.asarray(fn), np.asarray(thresholds)
    m = len(fp)
    i, eps, fp_u, fn_u = _maximise_table(fp, fn, n0, n1, alpha, delta, directions=directions)
    flip, j = divmod(i, m)
    f, g = (n0 - fp[j], n1 - fn[j]) if flip else (fp[j], fn[j])
    return dict(
        threshold=float(thresholds[j]),
        flip=bool(flip),
        eps=eps,
        fp_u=fp_u,
        fn_u=fn_u,
        fp=f / max(n0, 1),
        fn=g / max(n1, 1),
    )


class _OnDemand:
    """A column of a threshold table computed on demand: values(rows) for an int, a slice or an
    index array of rows, so that a table of n rows is never built when few rows are read."""

    def __init__(self, rows: int, values):
        self.rows, self.values = rows, values

    def __len__(self):
        return self.rows

    def __getitem__(self, key):
        idx = np.arange(*key.indices(self.rows)) if isinstance(key, slice) else np.asarray(key)
        out = self.values(np.atleast_1d(idx))
        return out if idx.ndim else out[0]


def _pick_table(c: Counts, alpha, delta):
    return _pick(c.t, c.fp, c.fn, c.n0, c.n1, alpha, delta)


def _pick_coins(s0: np.ndarray, s1: np.ndarray, alpha, delta):
    """_pick_table over every distinct threshold of the trials whose sorted scores are s0
    (b = 0) and s1 (b = 1), without merging them.

    eq. 4 with CP limits decreases in each count. For '>' (guess 1 when score > t), t may rise
    through b = 1 scores only at a cost (fn grows, fp stays), so each direction-'>' optimum is
    at t = -inf or at a b = 0 score; for '<=' likewise at t = -inf or at a b = 1 score. The two
    tables of those candidates hold the maximum of the full table (the same value; the same
    threshold unless two thresholds tie exactly). Their rows are counted on demand by binary
    search in s0 and s1 (`_OnDemand`): the maximisation reads the block boundaries and the few
    blocks near the optimum, so no table of all trials is built.
    """
    n0, n1 = len(s0), len(s1)

    def table(s):  # rows: -inf (everything guessed 1), then the scores s in ascending order
        def value(i):
            out = np.full(i.shape, -np.inf)
            out[i > 0] = s[i[i > 0] - 1]
            return out

        fp = lambda i: np.where(i == 0, n0, n0 - np.searchsorted(s0, value(i), side="right"))
        fn = lambda i: np.where(i == 0, 0, np.searchsorted(s1, value(i), side="right"))
        return _OnDemand(len(s) + 1, value), _OnDemand(len(s) + 1, fp), _OnDemand(len(s) + 1, fn)

    (t0, fp0, fn0), (t1, fp1, fn1) = table(s0), table(s1)
    above = _pick(t0, fp0, fn0, n0, n1, alpha, delta, (True, False))
    below = _pick(t1, fp1, fn1, n0, n1, alpha, delta, (False, True))
    return above if above["eps"] >= below["eps"] else below


def _need_both(n0: int, n1: int, what: str):
    if n0 == 0 or n1 == 0:
        raise ConfigError("game.trials", f"too few trials {what} (each part needs both coins)")


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


def _split(ss: SortedScores, pilot, tail, alpha, delta) -> dict:
    """Pick (threshold, direction) on the pilot trials (each coin's sorted scores) and bound it
    by eq. 4 with CP limits on the `tail` trials, both at level alpha."""
    pilot0, pilot1 = pilot
    pick = _pick_coins(pilot0, pilot1, alpha, delta)
    ev = ss.counts_at(tail, [pick["threshold"]])
    _need_both(ev.n0, ev.n1, "to split")
    return _evaluate(ev, pick["threshold"], pick["flip"], alpha, delta)


def _pilot_grid(s_sorted_pilot, grid_size: int) -> np.ndarray:
    """`grid_size` quantiles of the pilot's finite scores (sorted), the pilot being excluded
    from evaluation afterwards."""
    finite = s_sorted_pilot[np.isfinite(s_sorted_pilot)]
    if not len(finite):
        return np.zeros(1)
    idx = np.unique(np.round(np.linspace(0, len(finite) - 1, grid_size)).astype(int))
    return np.unique(finite[idx])


def _check_common(rule, confidence, delta, split_fraction):
    if rule in OPTIMISTIC_RULES:
        raise ConfigError(
            "game.threshold",
            f"{rule!r} is optimistic (no confidence statement) and is "
            f"reported as eps_best_threshold in every audit; choose one of "
            f"{', '.join(THRESHOLD_RULES)}",
        )
    if rule not in THRESHOLD_RULES:
        raise ConfigError(
            "game.threshold", f"must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}"
        )
    if not 0 < confidence < 1:
        raise ConfigError("confidence", f"must be in (0, 1), got {confidence}")
    if not 0 <= delta < 1:
        raise ConfigError("delta", f"must be in [0, 1), got {delta}")
    if not 0 < split_fraction < 1:
        raise ConfigError("game.split_fraction", f"must be in (0, 1), got {split_fraction}")


def apply_rule(
    sorted_scores: SortedScores,
    rule: str,
    alpha: float,
    delta: float,
    *,
    split_fraction: float = 0.5,
    grid_size: int = 100,
    threshold_grid=None,
    splits: int = MULTISPLITS,
    seed: int = 0,
) -> dict:
    """One threshold rule on one sort; returns the chosen threshold's numbers (+ `n` evaluated,
    `grid_source`)."""
    ss = sorted_scores
    n = ss.n
    cut = int(n * split_fraction)
    if rule == "split" or (rule == "bonferroni" and threshold_grid is None):
        head, tail = ss.first(cut)
        pilot = ss.by_coin(head)
        _need_both(len(pilot[0]), len(pilot[1]), "to split")
        if rule == "split":
            return {**_split(ss, pilot, tail, alpha, delta), "grid_source": ""}
        grid = _pilot_grid(np.sort(np.concatenate(pilot)), grid_size)
        ev = ss.counts_at(tail, grid)
        _need_both(ev.n0, ev.n1, "to split")
        fp, fn = ev.at(grid)
        chosen = _pick(grid, fp, fn, ev.n0, ev.n1, alpha / (2 * len(grid)), delta)
        return {**chosen, "n": ev.n0 + ev.n1, "grid_source": "pilot"}
    if rule == "bonferroni":
        grid = np.unique(np.asarray(threshold_grid, dtype=float))
        c = ss.counts_at(None, grid)
        fp, fn = c.at(grid)
        chosen = _pick(grid, fp, fn, c.n0, c.n1, alpha / (2 * len(grid)), delta)
        return {**chosen, "n": n, "grid_source": "spec"}
    if rule == "bonferroni_all":
        return {
            **_pick_coins(*ss.by_coin(), alpha / max(n, 1), delta),
            "n": n,
            "grid_source": "all",
        }
    if rule == "multisplit":
        if splits < 1:
            raise ConfigError("splits", f"must be an integer >= 1, got {splits}")
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x6D73,)))
        runs = []
        for _ in range(splits):
            rank = np.empty(n, dtype=np.int64)
            rank[rng.permutation(n)] = np.arange(n)
            in_head = rank < cut
            pilot = ss.by_coin(in_head)
            _need_both(len(pilot[0]), len(pilot[1]), "to split")
            runs.append(_split(ss, pilot, ~in_head, alpha / 2, delta))
        runs.sort(key=lambda r: r["eps"])
        median = runs[(len(runs) - 1) // 2]  # the lower median: conservative for even counts
        return {**median, "grid_source": "", "splits": [r["eps"] for r in runs]}
    raise ConfigError(
        "game.threshold", f"must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}"
    )


def _bound(chosen, best, rule, confidence, delta, trials, grid_source, estimators=None):
    mu = gdp_mu(chosen["fp_u"], chosen["fn_u"])
    return LowerBound(
        eps=chosen["eps"],
        eps_gdp=_gdp_epsilon(mu, delta),
        eps_best_threshold=best["eps"],
        mu_gdp=mu,
        confidence=confidence,
        threshold_rule=rule,
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
        estimators=estimators,
    )


def audit_scores(
    scores,
    member,
    delta: float,
    confidence: float = 0.95,
    rule: str = "split",
    split_fraction: float = 0.5,
    grid_size: int = 100,
    threshold_grid=None,
    splits: int = MULTISPLITS,
    seed: int = 0,
    sorted_scores: SortedScores | None = None,
) -> LowerBound:
    """eps lower bound from game scores (higher = guess member) under a threshold rule.

    `member` holds the true coins b. Every rule is valid at `confidence`: `bonferroni` uses
    `threshold_grid` when given (it must be fixed before seeing the scores, e.g. from the
    spec), otherwise a pilot grid of `grid_size` quantiles of the first `split_fraction` of the
    trials, which are then left out of the evaluation. Pass `sorted_scores` to reuse a sort.
    """
    _check_common(rule, confidence, delta, split_fraction)
    scores = np.asarray(scores, dtype=float)
    member = np.asarray(member).astype(np.int8)
    if np.isnan(scores).any():
        raise ConfigError("score", "contains NaN; every score must be a number (+-inf allowed)")
    n1 = int(member.sum())
    if n1 == 0 or n1 == len(member):
        raise ConfigError("member", "needs trials with both member = 0 and member = 1")
    if rule == "bonferroni" and threshold_grid is None and grid_size < 1:
        raise ConfigError("game.thresholds", f"must be an integer >= 1, got {grid_size}")
    alpha = 1 - confidence
    ss = sorted_scores if sorted_scores is not None else SortedScores(scores, member)
    chosen = apply_rule(
        ss,
        rule,
        alpha,
        delta,
        split_fraction=split_fraction,
        grid_size=grid_size,
        threshold_grid=threshold_grid,
        splits=splits,
        seed=seed,
    )
    best = _pick_coins(*ss.by_coin(), alpha, delta)
    return _bound(chosen, best, rule, confidence, delta, len(scores), chosen["grid_source"])


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
    confidence: float = 0.95,
    rule: str = "split",
    split_fraction: float = 0.5,
    threshold_grid=None,
    grid_size: int = 100,
    candidates: int = STREAM_CANDIDATES,
) -> LowerBound:
    """audit_scores for trials streamed chunk by chunk from `source` (auditsel.games.engine.ChunkSource).

    Memory is bounded by one chunk plus the threshold counts. Chunks [0, cut) with
    cut = round(chunks * split_fraction) are the selection part (the pilot), the others the
    evaluation part. Candidate thresholds are `candidates` quantiles of chunk 0's scores, a part
    of the pilot, so:
    * split picks (t, direction) on the pilot chunks and bounds on the others (valid);
    * bonferroni uses the spec's grid on all chunks, or `grid_size` quantiles of chunk 0 (the
      pilot) on the evaluation chunks only (valid);
    * bonferroni_all takes the max over the candidates on all chunks at alpha / n: valid
      whatever the candidates, since its limits hold at every threshold at once;
    * multisplit needs the trials in memory (refused here);
    * eps_best_threshold is the max over the candidates at alpha (optimistic).
    """
    _check_common(rule, confidence, delta, split_fraction)
    if rule == "multisplit":
        raise ConfigError(
            "game.threshold",
            "multisplit needs the scores in memory; a streamed audit "
            "offers split, bonferroni and bonferroni_all (or set game.stream: false)",
        )
    alpha = 1 - confidence
    n_chunks = len(source)
    cut = int(round(n_chunks * split_fraction))
    if (
        rule in ("split", "bonferroni")
        and not 0 < cut < n_chunks
        and not (rule == "bonferroni" and threshold_grid is not None)
    ):
        raise ConfigError(
            "game.split_fraction",
            f"with {n_chunks} chunks the split leaves a part "
            f"empty; use more trials or a smaller game.chunk_size",
        )
    first, _ = source.load(0)
    finite = np.sort(first[np.isfinite(first)])
    quantiles = _pilot_grid(finite, candidates)
    grid = np.unique(np.concatenate([[-np.inf], quantiles]))
    head = _stream_counts(source, range(min(max(cut, 1), n_chunks)), grid)
    tail = _stream_counts(source, range(min(max(cut, 1), n_chunks), n_chunks), grid)
    total = Counts(grid, head.fp + tail.fp, head.fn + tail.fn, head.n0 + tail.n0, head.n1 + tail.n1)
    if total.n0 == 0 or total.n1 == 0:
        raise ConfigError("member", "needs trials with both member = 0 and member = 1")
    n = total.n0 + total.n1
    best = _pick_table(total, alpha, delta)
    grid_source = ""
    if rule == "split":
        _need_both(head.n0, head.n1, "to split"), _need_both(tail.n0, tail.n1, "to split")
        pick = _pick_table(head, alpha, delta)
        ev = _stream_counts(source, range(cut, n_chunks), np.array([pick["threshold"]]))
        chosen = _evaluate(ev, pick["threshold"], pick["flip"], alpha, delta)
    elif rule == "bonferroni" and threshold_grid is not None:
        fixed = np.unique(np.asarray(threshold_grid, dtype=float))
        c = _stream_counts(source, range(n_chunks), fixed)
        chosen = {**_pick(fixed, c.fp, c.fn, c.n0, c.n1, alpha / (2 * len(fixed)), delta), "n": n}
        grid_source = "spec"
    elif rule == "bonferroni":
        _need_both(tail.n0, tail.n1, "to split")
        pilot = _pilot_grid(finite, grid_size)
        c = _stream_counts(source, range(cut, n_chunks), pilot)
        chosen = {
            **_pick(pilot, c.fp, c.fn, c.n0, c.n1, alpha / (2 * len(pilot)), delta),
            "n": c.n0 + c.n1,
        }
        grid_source = "pilot"
    else:  # bonferroni_all
        chosen = {**_pick_table(total, alpha / n, delta), "n": n}
        grid_source = "all"
    return _bound(chosen, best, rule, confidence, delta, source.trials, grid_source)
