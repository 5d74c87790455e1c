"""Audit planning: how many games a valid audit needs, and what n games can certify.

Contract. A valid rule of `auditsel.auditing.lower` ends with a threshold test whose false-positive and
false-negative counts on its evaluation games are binomial, FP count ~ Bin(n0, FP(t)) and FN
count ~ Bin(n1, FN(t)) (n0 = n1 = half the evaluation games), and certifies eps_L = eq. 4 of
[XWW24] with Clopper-Pearson upper limits at the rule's level. The planner takes the pair's
trade-off curve (FP(t), FN(t)) over the thresholds the proxy can use:

* exact, where the winner laws are known (reduced and finite games; `likelihood_ratio` proxy
  and finite games: the Neyman-Pearson tests of the exact winner laws; `sample` proxy of a
  Gaussian winner: thresholds on the released value, from the winner's cdfs);

* estimated from `pilot` simulated games otherwise (real DP-SGD games): the empirical curve,
  or (`PilotTests.pessimistic`, what the pipeline planner uses) a curve that the true one
  dominates with probability >= a stated confidence; or, where the pilot's held-out games
  reject a claim (`claim_pvalue`), that test at the medians of its rates (`PilotTests.reading`:
  a reading of the pilot, not a bound);

and the threshold on that curve that a rule could at best find (an oracle), with the rule's
evaluation games and level::

    split:          n (1 - split_fraction) games at alpha
    multisplit:     n (1 - split_fraction) games at alpha / 2 (one split at the median's level)
    bonferroni:     n games at alpha / (2 m)   (m = game.thresholds; the pilot variant: like split)
    bonferroni_all: n games at alpha / n

P(eps_L >= X) is summed exactly over the binomial counts (the counts' laws of a few test
sets kept in memory for the next target: the same numbers, computed once); E[eps_L] and the whole law of eps_L
(`eps_law`, `EpsLaw`) sum over both counts (binned when a count's range exceeds BINS).
`games_needed` is the least n with P(eps_L >= X) >= power. For a threshold fixed in advance at
the oracle point, the numbers are exact; for rules that must find the threshold from the data
(split, multisplit) the planner is an optimistic estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from auditsel.auditing.clopper_pearson import clopper_pearson_upper
from auditsel.auditing.sorted_scores import SortedScores, sort_parts
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.errors import ConfigError
from auditsel.numerics import FloatArray, check_deltas

RANGE_LOW, RANGE_HIGH = 0.05, 0.95  # the quantiles of a planned eps_L range (planned_range)

BINS = 600
PVALUE_GRID = 1024  # claim_pvalue: cells of the claim's boundary (each bounded from above)
MAX_PVALUE_GAMES = 2000  # claim_pvalue: the largest held-out count of a coin it tests
ROBUST = 2  # pilot_tests: tests chosen by their eps at the limits
CANDIDATES = 48
MAX_GAMES = 10**12


@dataclass(frozen=True)
class PlanCurve:
    """A trade-off curve as candidate tests (FP, FN), and how it was obtained."""

    fp: np.ndarray
    fn: np.ndarray
    source: str  # "exact" or "simulated (N pilot games)"

    def candidates(self, k: int = CANDIDATES) -> tuple[FloatArray, FloatArray]:
        """k tests spread over the curve (log-spaced in FP and FN), both eq. 4 directions kept."""
        fp, fn = np.asarray(self.fp, float), np.asarray(self.fn, float)
        pick = _spread(fp, fn, k)
        return fp[pick], fn[pick]


def _spread(fp: np.ndarray, fn: np.ndarray, k: int) -> np.ndarray:
    """Indices of up to k informative tests (FP + FN < 1) spread over the curve (log-spaced in
    FP and FN)."""
    ok = np.flatnonzero((fp < 1) & (fn < 1) & (fp + fn < 1))
    if len(ok) <= k:
        return ok
    a, b = fp[ok], fn[ok]
    keys = np.concatenate([np.log(np.maximum(a, 1e-300)), np.log(np.maximum(b, 1e-300))])
    order = np.argsort(keys)
    pick = order[np.round(np.linspace(0, len(order) - 1, k)).astype(int)] % len(ok)
    return ok[np.unique(pick)]


def empirical_curve(
    scores: ArrayLike, member: ArrayLike, source: str, shrink: float = 0.0
) -> PlanCurve:
    """The trade-off curve of pilot games: (FP, FN) of every threshold test, both directions.

    With shrink = a > 0 each rate is (count + a) / (n + 2a), so that no test of a small pilot
    looks perfect (an empirical FP or FN of 0 would promise any eps)."""
    c = SortedScores(scores, member).counts()
    fp = (c.fp + shrink) / (c.n0 + 2 * shrink)
    fn = (c.fn + shrink) / (c.n1 + 2 * shrink)
    return PlanCurve(np.concatenate([fp, 1 - fp]), np.concatenate([fn, 1 - fn]), source)


@dataclass(frozen=True)
class PilotTests:
    """A few threshold tests chosen on one half of a pilot and counted on the other half: the
    pilot's evidence about the pipeline's curve, free of the choice (`pilot_tests`)."""

    fp: np.ndarray  # FP counts of the tests among the second half's n0 coin-0 games
    fn: np.ndarray
    n0: int
    n1: int
    source: str
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # each test's threshold
    up: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # "in" iff score > t
    first: int | None = None  # the test the first half ranked best (fixed before the second
    #                          half is counted): the one `claim_pvalue` and `reading` read

    def _upper(self, i: np.ndarray, alpha: float) -> PlanCurve:
        """Tests i at the Clopper-Pearson upper limits (two-sided level alpha) of their rates."""
        if len(self.fp) == 0:
            return PlanCurve(np.ones(0), np.ones(0), self.source)
        fp = clopper_pearson_upper(self.fp[i], self.n0, alpha)
        return PlanCurve(fp, clopper_pearson_upper(self.fn[i], self.n1, alpha), self.source)

    def pessimistic(self, confidence: float) -> PlanCurve:
        """The tests at the one-sided Clopper-Pearson upper limits of their FP and FN rates,
        Bonferroni-corrected over all of them: with probability >= confidence every test's true
        rates are below them at once."""
        alpha = 2 * (1 - confidence) / (2 * max(len(self.fp), 1))  # one-sided, per limit
        return self._upper(np.arange(len(self.fp)), alpha)

    def _read(self) -> np.ndarray:
        """The tests read: the first half's best alone where it is known, else all."""
        return np.arange(len(self.fp)) if self.first is None else np.array([self.first])

    def reading(self) -> PlanCurve:
        """The test(s) read (`first`, else all) at the medians of their rates (the one-sided
        50% Clopper-Pearson upper limits): a reading of the pilot, not a guarantee."""
        return self._upper(self._read(), 1.0)

    def claim_pvalue(self, eps: float, delta: float) -> float:
        """The p-value of the hypothesis "the pipeline keeps (eps, delta)" on these counts: the
        `claim_pvalue` of the test `first`, fixed before these games were counted, else the
        least of all the tests times their number (Bonferroni); 1 without tests."""
        if len(self.fp) == 0:
            return 1.0
        i = self._read()
        each = [
            claim_pvalue(int(a), self.n0, int(b), self.n1, eps, delta)
            for a, b in zip(self.fp[i], self.fn[i])
        ]
        return float(min(1.0, min(each) * len(each)))


def claim_pvalue(fp: int, n0: int, fn: int, n1: int, eps: float, delta: float) -> float:
    """The exact p-value of "this test keeps (eps, delta)" on counts fp of n0 and fn of n1.

    A test of a mechanism that keeps (eps, delta) has rates (FP, FN) with FN >= 1 - delta -
    e^eps FP and FP >= 1 - delta - e^eps FN (eq. 4 of [XWW24] at or below eps). The counts are
    independent binomials; the statistic is eq. 4's eps at the shrunk rates (count + 1/2) /
    (n + 1), which falls as either count grows, and the p-value is the largest probability,
    over the rates the claim allows, of counts whose statistic is at least the observed one.
    That set of counts is a lower set, so the largest probability lies on the region's
    boundary FN = b(FP), scanned in PVALUE_GRID cells, each bounded from above (never
    understated). Held-out halves of more than MAX_PVALUE_GAMES games a coin are not tested
    (p = 1). The tables that depend on the sizes and the claim alone are kept for the next
    counts (a few, in memory: the same numbers)."""
    delta = float(check_deltas(delta)[0])
    if max(n0, n1) > MAX_PVALUE_GAMES or min(n0, n1) == 0:
        return 1.0
    stat = _pvalue_statistic(n0, n1, delta)
    seen = stat[fp, fn] - 1e-12
    # g[k0]: the largest k1 whose statistic is at least the observed one (-1: none)
    g = np.sum(stat >= seen, axis=1) - 1
    pmf0 = _pvalue_pmf0(n0)
    cdf1 = np.where(g[None, :] >= 0, _pvalue_cdf1(n1, float(eps), delta)[:, np.maximum(g, 0)], 0.0)
    return float(min(1.0, np.max(np.sum(pmf0 * cdf1, axis=1))))


# claim_pvalue's tables: functions of (n0), (n1, eps, delta) alone, computed once for the many
# count pairs a plan or a pilot tests (elementwise: each number is the one computed per call)


@lru_cache(maxsize=4)
def _pvalue_statistic(n0: int, n1: int, delta: float) -> FloatArray:
    k0, k1 = np.arange(n0 + 1), np.arange(n1 + 1)
    stat = epsilon_from_rates(
        ((k0 + 0.5) / (n0 + 1))[:, None], ((k1 + 0.5) / (n1 + 1))[None, :], delta
    )
    stat.flags.writeable = False
    return stat


@lru_cache(maxsize=4)
def _pvalue_pmf0(n0: int) -> FloatArray:
    """P[FP count = k0] at the left edge a of each cell (rows) for each k0 (columns)."""
    from scipy.stats import binom  # deferred: only when an audit is planned

    a = np.linspace(0.0, 1.0, PVALUE_GRID + 1)[:-1]
    pmf0 = binom.pmf(np.arange(n0 + 1)[None, :], n0, a[:, None])
    pmf0.flags.writeable = False
    return pmf0


@lru_cache(maxsize=4)
def _pvalue_cdf1(n1: int, eps: float, delta: float) -> FloatArray:
    """P[FN count <= k1] at each cell's boundary FN (rows) for each k1 (columns)."""
    from scipy.stats import binom  # deferred: only when an audit is planned

    e = math.exp(eps)
    b = np.linspace(0.0, 1.0, PVALUE_GRID + 1)[1:]
    fn_at_b = np.maximum.reduce([np.zeros_like(b), 1 - delta - e * b, (1 - delta - b) / e])
    cdf1 = binom.cdf(np.arange(n1 + 1)[None, :], n1, fn_at_b[:, None])
    cdf1.flags.writeable = False
    return cdf1


def pilot_tests(
    scores: ArrayLike,
    member: ArrayLike,
    source: str,
    seed: int = 0,
    tests: int = 4,
    confidence: float = 0.8,
) -> PilotTests:
    """Threshold tests of a pilot, chosen on a seeded half of each coin and counted on the rest.

    On the first half, up to `tests` + ROBUST threshold tests (both directions) are chosen:
    `tests` spread over its (shrunk) curve, and the ROBUST of largest eq. 4 eps at their
    Clopper-Pearson upper limits at `confidence`. The second half, independent of that choice,
    counts each test's errors, so the pilot's luckiest threshold does not look better than it
    is."""
    scores = np.asarray(scores, dtype=float)
    member = np.asarray(member).astype(bool)
    rng = np.random.default_rng(seed)
    first = np.zeros(len(scores), dtype=bool)
    for coin in (False, True):
        where = np.flatnonzero(member == coin)
        first[rng.permutation(where)[: len(where) // 2]] = True
    s0, s1 = sort_parts(scores, (~first & ~member, ~first & member))
    none = PilotTests(np.zeros(0, int), np.zeros(0, int), len(s0), len(s1), source)
    if min(np.sum(first & member), np.sum(first & ~member), len(s0), len(s1)) == 0:
        return none
    c = SortedScores(scores[first], member[first]).counts()
    t = np.concatenate([c.t, c.t])
    up = np.repeat([True, False], len(c.t))  # '>' tests (score > t: in), then '<=' tests
    a0, a1 = np.concatenate([c.fp, c.n0 - c.fp]), np.concatenate([c.fn, c.n1 - c.fn])
    pick = _spread((a0 + 0.5) / (c.n0 + 1), (a1 + 0.5) / (c.n1 + 1), tests)
    if len(pick) == 0:
        return none
    # and the tests that stay best at the limits the second half will put on them
    level = 2 * (1 - confidence) / (2 * (tests + ROBUST))
    robust = epsilon_from_rates(
        clopper_pearson_upper(a0, c.n0, level), clopper_pearson_upper(a1, c.n1, level), 0.0
    )
    top = np.argsort(-robust)[:ROBUST]
    pick = np.unique(np.concatenate([pick, top]))
    chosen = int(np.searchsorted(pick, top[0]))  # the first half's best at its limits
    above0 = len(s0) - np.searchsorted(s0, t[pick], side="right")  # coin 0, score > t
    above1 = len(s1) - np.searchsorted(s1, t[pick], side="right")
    return PilotTests(
        np.where(up[pick], above0, len(s0) - above0),
        np.where(up[pick], len(s1) - above1, above1),
        len(s0),
        len(s1),
        source,
        t[pick],
        up[pick],
        chosen,
    )


def blind_rate(games: int, confidence: float = 0.95) -> float:
    """The smallest rate of an event that `games` pilot games see at least once with
    probability >= confidence: 1 - (1 - confidence)^(1/games)."""
    return float(-math.expm1(math.log1p(-confidence) / games))


@dataclass(frozen=True)
class Plan:
    target_eps: float | None
    games: int | None
    power: float
    rule: str
    confidence: float
    exact_eps: float | None
    curve: str
    games_given: int | None = None
    expected_eps: float | None = None
    prob_at_games: float | None = None
    #: the eps of the curve's best threshold test at delta: the most a valid audit of this
    #: game can certify (exact where the curve is)
    game_eps: float | None = None
    #: with games_given: the 5% and 95% quantiles of eps_L's law at the test E[eps_L] reads
    #: (`law_for_games`): a prediction on the curve, not a bound
    eps_low: float | None = None
    eps_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in self.__dict__.items()
        }


def rule_design(
    rule: str,
    games: int,
    confidence: float,
    split_fraction: float = 0.5,
    thresholds: int = 100,
    spec_grid: bool = True,
) -> tuple[int, float]:
    """(evaluation games, per-limit two-sided level) of a rule on `games` games."""
    alpha = 1 - confidence
    held_out = max(int(games - int(games * split_fraction)), 2)
    if rule == "split" or (rule == "bonferroni" and not spec_grid):
        return held_out, alpha if rule == "split" else alpha / (2 * thresholds)
    if rule == "multisplit":
        return held_out, alpha / 2
    if rule == "bonferroni":
        return games, alpha / (2 * thresholds)
    if rule == "bonferroni_all":
        return games, alpha / games
    raise ConfigError(
        "game.threshold",
        f"must be one of split, bonferroni, bonferroni_all, multisplit, got {rule!r}",
    )


def _support(n, p, width=7.0):
    sd = math.sqrt(max(n * p * (1 - p), 1e-12))
    lo, hi = (
        max(int(math.floor(n * p - width * sd)) - 2, 0),
        min(int(math.ceil(n * p + width * sd)) + 2, n),
    )
    return np.arange(lo, hi + 1)


def prob_at_least(
    target: float, fp: float, fn: float, evaluated: int, level: float, delta: float
) -> float:
    """P(eps_L >= target) for one test (FP, FN) audited on `evaluated` games at `level`.

    Supports wider than BINS counts are coarsened conservatively (never over-stated)."""
    return float(
        _probs_at_least(target, np.array([fp]), np.array([fn]), evaluated, level, delta)[0]
    )


def _probs_at_least(
    target: float,
    fps: ArrayLike,
    fns: ArrayLike,
    evaluated: int,
    level: float,
    delta: float,
) -> FloatArray:
    """`prob_at_least` of each test (fps[i], fns[i]), to the last digit: the laws of the counts
    (`_count_laws`, the same for every target) computed once for all tests and kept for the
    next target."""
    delta = float(check_deltas(delta)[0])
    fps, fns = np.asarray(fps, dtype=float), np.asarray(fns, dtype=float)
    if target <= 0:
        return np.ones(len(fps))
    laws = _count_laws(fps.tobytes(), fns.tobytes(), int(evaluated), float(level))
    e = math.exp(target)
    out = np.empty(len(laws))
    for i, (w0, u0, u1, cdf1) in enumerate(laws):
        # term A: log(1 - d - U0) - log(U1) >= X  <=>  U1 <= (1 - d - U0) e^-X
        # term B: log(1 - d - U1) - log(U0) >= X  <=>  U1 <= 1 - d - U0 e^X
        bound = np.maximum((1 - delta - u0) / e, 1 - delta - u0 * e)
        kmax = np.searchsorted(u1, bound, side="right") - 1  # largest grid index with U1 <= bound
        p1 = np.where(kmax >= 0, cdf1[np.clip(kmax, 0, len(u1) - 1)], 0.0)
        out[i] = float(np.sum(w0 * p1))
    return out


@lru_cache(maxsize=16)
def _count_laws(
    fps_bytes: bytes, fns_bytes: bytes, evaluated: int, level: float
) -> tuple[tuple[FloatArray, FloatArray, FloatArray, FloatArray], ...]:
    """Per test: (w0, u0, u1, cdf1), the FP count's (binned) pmf, the Clopper-Pearson upper
    limits at its (binned) counts and at the FN counts, and the FN count's cdf there (scipy
    called once for all the tests). Kept for the next target (the planner bisects on targets
    at a fixed number of games)."""
    from scipy.stats import binom  # deferred: only when an audit is planned

    fps, fns = np.frombuffer(fps_bytes), np.frombuffer(fns_bytes)
    n0 = evaluated // 2
    n1 = evaluated - n0
    full0 = [_support(n0, fp) for fp in fps]
    edges0 = [
        np.linspace(0, len(c), BINS + 1).astype(int) if len(c) > BINS else None for c in full0
    ]
    c0s = [c if edges is None else c[edges[1:] - 1] for c, edges in zip(full0, edges0)]
    c1s = [_support(n1, fn) for fn in fns]
    c1s = [
        np.unique(np.round(np.linspace(c[0], c[-1], BINS)).astype(int)) if len(c) > BINS else c
        for c in c1s
    ]
    w0s = _each_rate(binom.pmf, n0, full0, fps)
    w0s = [w if edges is None else np.add.reduceat(w, edges[:-1]) for w, edges in zip(w0s, edges0)]
    u0s, u1s = _limits_of(c0s, n0, level), _limits_of(c1s, n1, level)
    return tuple(zip(w0s, u0s, u1s, _each_rate(binom.cdf, n1, c1s, fns)))


def _each_rate(
    f: Callable[..., FloatArray], n: int, parts: list[np.ndarray], rates: FloatArray
) -> list[FloatArray]:
    """f(counts, n, rate) of each part's counts at its rate, in one call split back into the
    parts (f elementwise: each number is the one a call per part gives)."""
    values = f(np.concatenate(parts), n, np.repeat(rates, [len(c) for c in parts]))
    return np.split(values, np.cumsum([len(c) for c in parts])[:-1])


def _limits_of(parts: list[np.ndarray], nobs: int, level: float) -> list[FloatArray]:
    """clopper_pearson_upper(counts, nobs, level) of each part's counts, each distinct count
    computed once."""
    distinct, inverse = np.unique(np.concatenate(parts), return_inverse=True)
    values = clopper_pearson_upper(distinct, nobs, level)[inverse]
    return np.split(values, np.cumsum([len(c) for c in parts])[:-1])


def _binned_limits(n: int, rates: FloatArray, level: float) -> tuple[list, list]:
    """Per rate p: the Clopper-Pearson upper limits at the counts of Bin(n, p) and the counts'
    probabilities, binned where the support is wider than BINS (each bin at its middle count,
    with its summed mass)."""
    from scipy.stats import binom  # deferred: only when an audit is planned

    supports = [_support(n, p) for p in rates]
    reps, masses = [], []
    for c, w in zip(supports, _each_rate(binom.pmf, n, supports, rates)):
        if len(c) > BINS:
            edges = np.linspace(0, len(c), BINS + 1).astype(int)
            c = np.array([c[(a + b - 1) // 2] for a, b in zip(edges[:-1], edges[1:])])
            w = np.add.reduceat(w, edges[:-1])
        reps.append(c)
        masses.append(w)
    return _limits_of(reps, n, level), masses


def _eps_grids(
    fps: FloatArray, fns: FloatArray, evaluated: int, level: float, delta: float
) -> Iterator[tuple[FloatArray, FloatArray, FloatArray]]:
    """Per test (fps[i], fns[i]): eps_L at each pair of (binned) counts, and the counts'
    probabilities."""
    n0 = evaluated // 2
    n1 = evaluated - n0
    limits0, limits1 = _binned_limits(n0, fps, level), _binned_limits(n1, fns, level)
    for u0, w0, u1, w1 in zip(*limits0, *limits1):
        eps = np.minimum(epsilon_from_rates(u0[:, None], u1[None, :], delta), 1e3)
        yield eps, w0 / w0.sum(), w1 / w1.sum()


def expected_eps(fp: float, fn: float, evaluated: int, level: float, delta: float) -> float:
    """E[eps_L] for one test (FP, FN) audited on `evaluated` games at `level`."""
    return float(_expected_all([fp], [fn], evaluated, level, delta)[0])


def _expected_all(
    fps: ArrayLike, fns: ArrayLike, evaluated: int, level: float, delta: float
) -> FloatArray:
    """`expected_eps` of each test (fps[i], fns[i]), to the last digit (`_expected_of`)."""
    delta = float(check_deltas(delta)[0])
    fps, fns = np.asarray(fps, dtype=float), np.asarray(fns, dtype=float)
    return _expected_of(fps.tobytes(), fns.tobytes(), int(evaluated), float(level), delta)


@lru_cache(maxsize=64)
def _expected_of(
    fps_bytes: bytes, fns_bytes: bytes, evaluated: int, level: float, delta: float
) -> FloatArray:
    """`expected_eps` of each test (`_eps_grids`); kept, for the planner asks again (E[eps_L]
    and then its law at the same games)."""
    fps, fns = np.frombuffer(fps_bytes), np.frombuffer(fns_bytes)
    grids = _eps_grids(fps, fns, evaluated, level, delta)
    out = np.array([float(w0 @ eps @ w1) for eps, w0, w1 in grids])
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class EpsLaw:
    """The law of a certified eps_L: its values (ascending) and P(eps_L <= value) at each."""

    values: FloatArray
    cdf: FloatArray

    def quantile(self, q: float) -> float:
        """The least value v with P(eps_L <= v) >= q."""
        i = int(np.searchsorted(self.cdf, q - 1e-12, side="left"))
        return float(self.values[min(i, len(self.values) - 1)])

    def at(self, x: ArrayLike) -> FloatArray:
        """P(eps_L <= x) at each x."""
        i = np.searchsorted(self.values, np.asarray(x, float), side="right") - 1
        return np.where(i >= 0, self.cdf[np.clip(i, 0, None)], 0.0)

    def mean(self) -> float:
        return float(self.values @ np.diff(self.cdf, prepend=0.0))

    @staticmethod
    def largest(laws: list[EpsLaw]) -> EpsLaw:
        """The law of the largest of independent eps_L's: the product of their cdfs."""
        values = np.unique(np.concatenate([law.values for law in laws]))
        cdf = np.prod([law.at(values) for law in laws], axis=0)
        return EpsLaw(values, cdf)


def eps_law(fp: float, fn: float, evaluated: int, level: float, delta: float) -> EpsLaw:
    """The exact law of eps_L for one test (FP, FN) audited on `evaluated` games at `level`
    (the counts binomial, as `expected_eps` sums them: its mean is `expected_eps`)."""
    delta = float(check_deltas(delta)[0])
    grids = _eps_grids(np.array([fp], float), np.array([fn], float), evaluated, level, delta)
    eps, w0, w1 = next(grids)
    values, inverse = np.unique(eps.ravel(), return_inverse=True)
    mass = np.bincount(inverse, weights=(w0[:, None] * w1[None, :]).ravel(), minlength=len(values))
    return EpsLaw(values, np.minimum(np.cumsum(mass), 1.0))


def curve_epsilon(curve: PlanCurve, delta: float) -> float:
    """max over the curve's tests of eq. 4 with the true rates (no sampling error)."""
    fp, fn = np.asarray(curve.fp, float), np.asarray(curve.fn, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = epsilon_from_rates(fp, fn, delta)
    return float(np.max(eps, initial=0.0))


def _best(
    curve: PlanCurve,
    fn_of: Callable[[float, float], float],
    points: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[float, tuple[float, float], FloatArray]:
    fps, fns = curve.candidates() if points is None else points
    if len(fps) == 0:  # no informative test (FP + FN >= 1 everywhere): eps_L = 0 surely
        return 0.0, (1.0, 1.0), np.zeros(0)
    values = [fn_of(a, b) for a, b in zip(fps, fns)]
    i = int(np.argmax(values))
    return values[i], (float(fps[i]), float(fns[i])), np.asarray(values)


def prob_for_games(
    curve: PlanCurve,
    target: float,
    games: int,
    rule: str,
    confidence: float,
    delta: float,
    points: tuple[FloatArray, FloatArray] | None = None,
    **design: Any,
) -> float:
    evaluated, level = rule_design(rule, games, confidence, **design)
    fps, fns = curve.candidates() if points is None else points
    if len(fps) == 0:  # no informative test (FP + FN >= 1 everywhere): eps_L = 0 surely
        return 0.0
    values = _probs_at_least(target, fps, fns, evaluated, level, delta)
    return float(values[int(np.argmax(values))])


def expected_for_games(
    curve: PlanCurve, games: int, rule: str, confidence: float, delta: float, **design: Any
) -> float:
    evaluated, level = rule_design(rule, games, confidence, **design)
    fps, fns = curve.candidates()
    if len(fps) == 0:  # no informative test (FP + FN >= 1 everywhere): eps_L = 0 surely
        return 0.0
    values = _expected_all(fps, fns, evaluated, level, delta)
    return float(values[int(np.argmax(values))])


def law_for_games(
    curve: PlanCurve, games: int, rule: str, confidence: float, delta: float, **design: Any
) -> tuple[float, EpsLaw]:
    """`expected_for_games` and the law of eps_L at the test that attains it."""
    evaluated, level = rule_design(rule, games, confidence, **design)
    fps, fns = curve.candidates()
    if len(fps) == 0:  # no informative test: eps_L = 0 surely
        return 0.0, eps_law(1.0, 1.0, evaluated, level, delta)
    values = _expected_all(fps, fns, evaluated, level, delta)
    i = int(np.argmax(values))
    return float(values[i]), eps_law(float(fps[i]), float(fns[i]), evaluated, level, delta)


def planned_range(law: EpsLaw, mean: float) -> tuple[float, float, float]:
    """The planned range of a certified eps_L: its law's RANGE_LOW and RANGE_HIGH quantiles,
    widened to hold the plan's E[eps_L] (`mean`), and the law's probability of the range."""
    low, high = min(law.quantile(RANGE_LOW), mean), max(law.quantile(RANGE_HIGH), mean)
    inside = float(law.at(high)) - float(law.at(np.nextafter(low, -np.inf)))
    return low, high, inside


def games_needed(
    curve: PlanCurve,
    target: float,
    rule: str,
    confidence: float,
    delta: float,
    power: float = 0.9,
    **design: Any,
) -> int | None:
    """Least n with P(eps_L >= target) >= power (None when no n up to MAX_GAMES reaches it).

    n grows by factors of 4 until reached, over every candidate test; the bisection then keeps
    the 8 tests that were most likely at the first n that reached it."""
    delta = float(check_deltas(delta)[0])
    fps, fns = curve.candidates()
    if len(fps) == 0:
        return None

    def probs(n, pts):
        evaluated, level = rule_design(rule, n, confidence, **design)
        return _probs_at_least(target, pts[0], pts[1], evaluated, level, delta)

    lo, hi = 2, 100
    while True:
        values = probs(hi, (fps, fns))
        if values.max() >= power:
            break
        lo, hi = hi, hi * 4
        if hi > MAX_GAMES:
            return None
    keep = np.argsort(-values)[:8]
    pts = (fps[keep], fns[keep])
    while hi - lo > max(1, hi // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if probs(mid, pts).max() >= power else (mid, hi)
    return int(hi)
