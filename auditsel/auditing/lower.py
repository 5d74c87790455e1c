"""Epsilon lower bounds from the scores of a distinguishing game ([XWW24] eq. 4, App. A.3).

Scores in, epsilons out; the threshold rule (`auditsel.auditing.rules`) is an explicit argument.

A test "guess member = 1 when score > t" (direction '>') or "when score <= t" (direction '<=')
has false-positive rate FP (guess 1 when b = 0) and false-negative rate FN (guess 0 when
b = 1). Any (eps, delta)-DP protocol satisfies FP + e^eps FN >= 1 - delta and
FN + e^eps FP >= 1 - delta, hence (eq. 4) ::

    eps_L = max{ log((1 - delta - FP)/FN), log((1 - delta - FN)/FP), 0 }.

FP and FN are replaced by Clopper-Pearson upper limits (statsmodels' method="beta") taken as
two-sided intervals at level a each, so the two one-sided limits fail jointly with probability
<= a (union bound). With alpha = 1 - confidence, the rules (`THRESHOLD_RULES`, all valid at
confidence 1 - alpha on every path, conditionally on the coins) are:

* split (`Split`, the default): choose (t, direction) maximising eps_L on a pilot, a seeded
  uniformly random `split_fraction` of each class, then bound with it (a = alpha) on the rest
  (pilot and rest are independent samples; the answer does not depend on the rows' order).

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
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from auditsel.auditing.clopper_pearson import clopper_pearson_upper
from auditsel.auditing.gdp_fitting import GdpFit, gdp_fit
from auditsel.auditing.rules import (
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
from auditsel.auditing.sorted_scores import Counts, SortedPart, SortedScores, pilot_grid
from auditsel.auditing.threshold_search import (
    ThresholdTest,
    best_on_coins,
    best_on_table,
    best_threshold,
    epsilon_from_rates,
)
from auditsel.errors import ConfigError, number
from auditsel.numerics import check_deltas


class EvaluatedTest(ThresholdTest):
    """A test bounded on `n` games (the evaluated part of a split, or every game)."""

    n: int


class _RuleChoice(EvaluatedTest):
    grid_source: str


class RuleChoice(_RuleChoice, total=False):
    """What `apply_rule` returns: the chosen test bounded on `n` games, `grid_source` ("spec"
    or "pilot" for a Bonferroni grid, "all" for bonferroni_all, "" otherwise) and, for
    multisplit, `splits`: every split's eps, ascending (the reported eps is their lower
    median)."""

    splits: list[float]


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
    threshold_options: dict[str, Any] = field(default_factory=dict)  # the rule's (seed, ...)
    estimators: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        if out["estimators"] is None:
            del out["estimators"]
        return out


def evaluate_at(
    c: Counts, threshold: float, flip: bool, alpha: float, delta: float
) -> EvaluatedTest:
    """eq. 4 with CP limits at one (threshold, direction) on the trials of table `c`."""
    fp, fn = c.at(np.array([threshold]))
    n0, n1 = c.n0, c.n1
    fp, fn = (n0 - fp, n1 - fn) if flip else (fp, fn)
    fp_u = float(clopper_pearson_upper(fp, n0, alpha)[0])
    fn_u = float(clopper_pearson_upper(fn, n1, alpha)[0])
    return EvaluatedTest(
        threshold=threshold,
        flip=flip,
        eps=float(epsilon_from_rates(fp_u, fn_u, delta)),
        fp_u=fp_u,
        fn_u=fn_u,
        fp=float(fp[0]) / max(n0, 1),
        fn=float(fn[0]) / max(n1, 1),
        n=n0 + n1,
    )


def _split(
    ss: SortedScores, pilot: tuple[SortedPart, SortedPart], alpha: float, delta: float
) -> EvaluatedTest:
    """Pick (threshold, direction) on the pilot and bound it on the rest, both at level alpha."""
    p0, p1 = pilot
    pick = best_on_coins(p0, p1, alpha, delta)
    ev = ss.rest_at(pilot, [pick["threshold"]])
    return evaluate_at(ev, pick["threshold"], pick["flip"], alpha, delta)


def check_levels(confidence: object, delta: object) -> tuple[float, float]:
    confidence = number(confidence, "confidence", 0.5, 1, hi_open=True)
    delta = number(delta, "delta", 0, 1, hi_open=True)
    return confidence, delta


def apply_rule(
    sorted_scores: SortedScores, rule: ThresholdRule | str, alpha: float, delta: float
) -> RuleChoice:
    """One threshold rule (or its name) at significance alpha on one sort: a `RuleChoice`."""
    delta = float(check_deltas(delta)[0])
    rule = with_seed(threshold_rule(rule))
    ss = sorted_scores
    return cast(
        RuleChoice, ss.memo(("rule", rule, alpha, delta), lambda: _apply(ss, rule, alpha, delta))
    )


def _choice(test: ThresholdTest, n: int, grid_source: str) -> RuleChoice:
    """The RuleChoice of a test bounded on n games."""
    return cast(RuleChoice, {**test, "n": n, "grid_source": grid_source})


def _apply(ss: SortedScores, rule: ThresholdRule, alpha: float, delta: float) -> RuleChoice:
    n = ss.n
    if isinstance(rule, Split):
        pilot = ss.pilot(rule.split_fraction, rule.seed)
        split = _split(ss, pilot, alpha, delta)
        return _choice(split, split["n"], "")
    if isinstance(rule, BonferroniGrid):  # a pilot's grid, bounded on the rest, or the spec's
        if rule.grid is None:
            pilot = ss.pilot(rule.split_fraction, rule.seed)
            grid = pilot_grid(pilot, rule.grid_size)
            c, grid_source = ss.rest_at(pilot, grid), "pilot"
        else:
            grid = np.unique(np.asarray(rule.grid, dtype=float))
            c, grid_source = ss.counts_at(None, grid), "spec"
        fp, fn = c.at(grid)
        chosen = best_on_table(Counts(grid, fp, fn, c.n0, c.n1), alpha / (2 * len(grid)), delta)
        return _choice(chosen, c.n0 + c.n1, grid_source)
    if isinstance(rule, BonferroniAll):
        return _choice(best_on_coins(*ss.by_coin(), alpha / max(n, 1), delta), n, "all")
    if isinstance(rule, MultiSplit):
        runs = [
            _split(ss, ss.pilot(rule.split_fraction, rule.seed, index=i), alpha / 2, delta)
            for i in range(rule.splits)
        ]
        runs.sort(key=lambda r: r["eps"])
        median = runs[(len(runs) - 1) // 2]  # the lower median: conservative for even counts
        out = _choice(median, median["n"], "")
        out["splits"] = [r["eps"] for r in runs]
        return out
    raise ConfigError("rule", f"must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}")


def lower_bound(
    chosen: EvaluatedTest,
    best: ThresholdTest,
    rule: ThresholdRule,
    confidence: float,
    delta: float,
    trials: int,
    grid_source: str,
    gdp: GdpFit,
) -> LowerBound:
    """The `LowerBound` of the test `chosen` by `rule`, beside the best threshold's `best`."""
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
    )


def audit_scores(
    scores: ArrayLike,
    member: ArrayLike,
    delta: float,
    *,
    confidence: float = 0.95,
    rule: ThresholdRule | str = "split",
    sorted_scores: SortedScores | None = None,
) -> LowerBound:
    """eps lower bound from game scores (higher = guess member) under a threshold rule.

    Args:
        scores: one score per game (higher: guess that the canary was in).
        member: the true coins b of the games (0 or 1).
        delta: in [0, 1).
        confidence: in [0.5, 1): the rule's eps_L holds with this probability.
        rule: a rule of `auditsel.auditing.rules` (`Split()`, `BonferroniGrid(...)`,
            `BonferroniAll()`, `MultiSplit(...)`) or its name; a rule without a seed gets a
            fresh one, which the result records in `threshold_options`.
        sorted_scores: a `SortedScores` of the same scores, to reuse a sort.

    Raises:
        auditsel.errors.ConfigError: input that `check_scores` refuses, or `delta` or
            `confidence` out of range.
    """
    rule = with_seed(threshold_rule(rule))
    confidence, delta = check_levels(confidence, delta)
    scores, member = check_scores(scores, member)
    alpha = 1 - confidence
    ss = sorted_scores if sorted_scores is not None else SortedScores(scores, member)
    chosen = apply_rule(ss, rule, alpha, delta)
    best = best_threshold(ss, alpha, delta)
    gdp = gdp_fit(ss, alpha, delta)
    return lower_bound(
        chosen, best, rule, confidence, delta, len(scores), chosen["grid_source"], gdp
    )
