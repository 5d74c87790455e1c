"""Audit planning: how many games a valid audit needs, and what n games can certify.

Contract. A valid rule of `auditsel.auditing.lower` ends with a threshold test whose false-positive and
false-negative counts on its evaluation games are binomial, FP count ~ Bin(n0, FP(t)) and FN
count ~ Bin(n1, FN(t)) (n0 = n1 = half the evaluation games), and certifies eps_L = eq. 4 of
[XWW24] with Clopper-Pearson upper limits at the rule's level. The planner takes the pair's
trade-off curve (FP(t), FN(t)) over the thresholds the proxy can use:

* exact, where the winner laws are known (reduced and finite games; `likelihood_ratio` proxy
  and finite games: the Neyman-Pearson tests of the exact winner laws; `sample` proxy of a
  Gaussian winner: thresholds on the released value, from the winner's cdfs);
* estimated from `pilot` simulated games otherwise (real DP-SGD games): the empirical curve;

and the threshold on that curve that a rule could at best find (an oracle), with the rule's
evaluation games and level:

    split:          n (1 - split_fraction) games at alpha
    multisplit:     n (1 - split_fraction) games at alpha / 2 (one split at the median's level)
    bonferroni:     n games at alpha / (2 m)   (m = game.thresholds; the pilot variant: like split)
    bonferroni_all: n games at alpha / n

P(eps_L >= X) is summed exactly over the binomial counts (eps_L >= X iff the FN count is at
most a bound that depends on the FP count); the expectation E[eps_L] sums over both counts
(binned when a count's range exceeds BINS). `games_needed` is the least n (bisection over n)
with P(eps_L >= X) >= power. For a threshold fixed in advance at the oracle point, the numbers
are exact; rules that must find the threshold from the data (split, multisplit) do somewhat
worse, so for them the planner is an optimistic estimate (the tests check both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from auditsel.auditing.clopper_pearson import clopper_pearson_upper
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.errors import ConfigError
from auditsel.numerics import check_deltas

__all__ = [
    "Curve",
    "Plan",
    "empirical_curve",
    "rule_design",
    "prob_at_least",
    "expected_eps",
    "games_needed",
    "curve_epsilon",
]

BINS = 600
CANDIDATES = 48
MAX_GAMES = 10**12


@dataclass(frozen=True)
class Curve:
    """A trade-off curve as candidate tests (FP, FN), and how it was obtained."""

    fp: np.ndarray
    fn: np.ndarray
    source: str  # "exact" or "simulated (N pilot games)"

    def candidates(self, k: int = CANDIDATES):
        """k tests spread over the curve (log-spaced in FP and FN), both eq. 4 directions kept."""
        fp, fn = np.asarray(self.fp, float), np.asarray(self.fn, float)
        ok = (fp < 1) & (fn < 1) & (fp + fn < 1)
        fp, fn = fp[ok], fn[ok]
        if len(fp) <= k:
            return fp, fn
        keys = np.concatenate([np.log(np.maximum(fp, 1e-300)), np.log(np.maximum(fn, 1e-300))])
        order = np.argsort(keys)
        pick = order[np.round(np.linspace(0, len(order) - 1, k)).astype(int)] % len(fp)
        pick = np.unique(pick)
        return fp[pick], fn[pick]


def empirical_curve(scores, member, source: str, shrink: float = 0.0) -> Curve:
    """The trade-off curve of pilot games: (FP, FN) of every threshold test, both directions.

    With shrink = a > 0 each rate is (count + a) / (n + 2a), so that no test of a small pilot
    looks perfect (an empirical FP or FN of 0 would promise any eps)."""
    c = SortedScores(scores, member).counts()
    fp = (c.fp + shrink) / (c.n0 + 2 * shrink)
    fn = (c.fn + shrink) / (c.n1 + 2 * shrink)
    return Curve(np.concatenate([fp, 1 - fp]), np.concatenate([fn, 1 - fn]), source)


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

    def to_dict(self) -> dict:
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

    Supports wider than BINS counts are coarsened conservatively: the FP count's mass is moved
    to the top of its bin, and the largest admissible FN count is looked up on a grid (rounded
    down), so the probability is never over-stated."""
    delta = float(check_deltas(delta)[0])
    if target <= 0:
        return 1.0
    n0 = evaluated // 2
    n1 = evaluated - n0
    c0, c1 = _support(n0, fp), _support(n1, fn)
    w0 = stats.binom.pmf(c0, n0, fp)
    if len(c0) > BINS:
        edges = np.linspace(0, len(c0), BINS + 1).astype(int)
        w0 = np.add.reduceat(w0, edges[:-1])
        c0 = c0[edges[1:] - 1]
    if len(c1) > BINS:
        c1 = np.unique(np.round(np.linspace(c1[0], c1[-1], BINS)).astype(int))
    u0 = clopper_pearson_upper(c0, n0, level)
    u1 = clopper_pearson_upper(c1, n1, level)
    e = math.exp(target)
    # term A: log(1 - d - U0) - log(U1) >= X  <=>  U1 <= (1 - d - U0) e^-X
    # term B: log(1 - d - U1) - log(U0) >= X  <=>  U1 <= 1 - d - U0 e^X
    bound = np.maximum((1 - delta - u0) / e, 1 - delta - u0 * e)
    kmax = np.searchsorted(u1, bound, side="right") - 1  # largest grid index with U1 <= bound
    cdf1 = stats.binom.cdf(c1, n1, fn)
    p1 = np.where(kmax >= 0, cdf1[np.clip(kmax, 0, len(c1) - 1)], 0.0)
    return float(np.sum(w0 * p1))


def _binned(n, p):
    c = _support(n, p)
    w = stats.binom.pmf(c, n, p)
    if len(c) <= BINS:
        return c, w
    edges = np.linspace(0, len(c), BINS + 1).astype(int)
    reps = np.array([c[(a + b - 1) // 2] for a, b in zip(edges[:-1], edges[1:])])
    mass = np.add.reduceat(w, edges[:-1])
    return reps, mass


def expected_eps(fp: float, fn: float, evaluated: int, level: float, delta: float) -> float:
    """E[eps_L] for one test (FP, FN) audited on `evaluated` games at `level`."""
    delta = float(check_deltas(delta)[0])
    n0 = evaluated // 2
    n1 = evaluated - n0
    c0, w0 = _binned(n0, fp)
    c1, w1 = _binned(n1, fn)
    u0 = clopper_pearson_upper(c0, n0, level)
    u1 = clopper_pearson_upper(c1, n1, level)
    eps = epsilon_from_rates(u0[:, None], u1[None, :], delta)
    eps = np.minimum(eps, 1e3)
    return float(w0 @ eps @ w1 / (w0.sum() * w1.sum()))


def curve_epsilon(curve: Curve, delta: float) -> float:
    """max over the curve's tests of eq. 4 with the true rates (no sampling error)."""
    delta = float(check_deltas(delta)[0])
    fp, fn = np.asarray(curve.fp, float), np.asarray(curve.fn, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = epsilon_from_rates(fp, fn, delta)
    return float(np.max(eps, initial=0.0))


def _best(curve: Curve, fn_of, points=None):
    fps, fns = curve.candidates() if points is None else points
    values = [fn_of(a, b) for a, b in zip(fps, fns)]
    i = int(np.argmax(values))
    return values[i], (float(fps[i]), float(fns[i])), np.asarray(values)


def prob_for_games(curve, target, games, rule, confidence, delta, points=None, **design) -> float:
    evaluated, level = rule_design(rule, games, confidence, **design)
    return _best(curve, lambda a, b: prob_at_least(target, a, b, evaluated, level, delta), points)[
        0
    ]


def expected_for_games(curve, games, rule, confidence, delta, **design) -> float:
    evaluated, level = rule_design(rule, games, confidence, **design)
    return _best(curve, lambda a, b: expected_eps(a, b, evaluated, level, delta))[0]


def games_needed(
    curve: Curve,
    target: float,
    rule: str,
    confidence: float,
    delta: float,
    power: float = 0.9,
    **design,
) -> int | None:
    """Least n with P(eps_L >= target) >= power (None when no n up to MAX_GAMES reaches it).

    n grows by factors of 4 until reached, over every candidate test; the bisection then keeps
    the 8 tests that were most likely at the first n that reached it."""
    delta = float(check_deltas(delta)[0])
    fps, fns = curve.candidates()

    def probs(n, pts):
        evaluated, level = rule_design(rule, n, confidence, **design)
        return np.array(
            [prob_at_least(target, a, b, evaluated, level, delta) for a, b in zip(*pts)]
        )

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
