"""`auditsel plan CONFIG`: the trade-off curve of a configured game, and the plan for it.

The planning arithmetic (games needed, P(eps_L >= X), E[eps_L]) is `auditsel.auditing.planning`;
this module supplies its input for a config: the pair's trade-off curve, exact for reduced and
finite games (from the winner laws), estimated from pilot games otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from auditsel.accounting.attack import winner_bucket_laws
from auditsel.accounting.exact import tradeoff_curve
from auditsel.auditing.estimators import winner_tradeoff
from auditsel.auditing.planning import (
    Plan,
    PlanCurve,
    curve_epsilon,
    empirical_curve,
    games_needed,
    law_for_games,
    planned_range,
    prob_for_games,
)
from auditsel.executor import ExecutionOptions
from auditsel.experiments.config import ExperimentSpec
from auditsel.experiments.experiment import protocol_and_proxy
from auditsel.games.engine import run_game
from auditsel.games.worst_case import DpsgdWorstCase
from auditsel.selection import (
    BucketScore,
    FiniteWinner,
    GaussianWinner,
    ScoredGaussianWinner,
    statistic_tradeoff,
)


def _bucket_curve(pair, law, score: BucketScore) -> PlanCurve:
    """The trade-off of a bucket score's statistic (its guess per bucket; the K = 0 output at
    0) from the sampling-free laws of the winner's bucket (`accounting.attack.winner_bucket_laws`:
    the run's label bucketed at the attack's label step, so the curve is that of the labelled
    run, within the label step of the game's exact label)."""
    assert score.guess is not None  # a bucket score played by a game carries its statistic
    p0, p1 = winner_bucket_laws(pair, law, score)
    fp, fn = statistic_tradeoff(
        np.append(np.asarray(score.guess, dtype=float), 0.0),
        np.append(p0, law.p_zero),
        np.append(p1, law.p_zero),
    )
    return PlanCurve(fp, fn, "exact (the labelled run's bucket laws)")


def curve_for_spec(spec: ExperimentSpec, pilot: int = 4000, seed: int = 1) -> PlanCurve:
    """The spec's trade-off curve: exact for reduced and finite games and for the worst-case
    DP-SGD game under a bucket score, by quadrature for a farthest score, simulated
    otherwise."""
    g = spec.game
    assert g is not None  # a spec with a game (the plan's callers check it)
    protocol, proxy = protocol_and_proxy(spec)
    proxy_name = g.proxy
    if isinstance(protocol, ScoredGaussianWinner) and proxy_name in ("score", "likelihood_ratio"):
        if proxy_name == "score" or not isinstance(protocol.score, BucketScore):
            # the adversary's statistic under the tuner's score (a bucket guess or the LLR)
            fp, fn = protocol.tradeoff()
            return PlanCurve(np.asarray(fp), np.asarray(fn), protocol.tradeoff_source)
    if (
        isinstance(protocol, DpsgdWorstCase)
        and isinstance(protocol.score, BucketScore)
        and proxy_name == "score"
    ):
        return _bucket_curve(spec.base, spec.rounds, protocol.score)
    if isinstance(protocol, (GaussianWinner, FiniteWinner)):
        if proxy_name == "sample" and isinstance(protocol, GaussianWinner):
            lo, hi = protocol.quantile_range(1e-12)  # thresholds on the released value
            t = np.linspace(lo, hi, 4000)
            fp, fn = 1 - protocol.cdf(t, 0), protocol.cdf(t, 1)
        elif isinstance(protocol, GaussianWinner):
            fp, fn = winner_tradeoff(protocol.mu, protocol.law)
        else:
            fp, fn = tradeoff_curve(protocol)
        return PlanCurve(np.asarray(fp), np.asarray(fn), "exact")

    rec = run_game(
        protocol, proxy, pilot, seed, execution=ExecutionOptions(chunk_size=g.chunk_size)
    )
    assert rec.scores is not None and rec.member is not None  # played in memory
    return empirical_curve(rec.scores, rec.member, f"simulated ({pilot:,} pilot games)")


def plan_spec(
    spec: ExperimentSpec,
    target_eps: float | None,
    games: int | None = None,
    power: float = 0.9,
    pilot: int = 4000,
    exact_eps: float | None = None,
) -> Plan:
    g = spec.game
    assert g is not None  # a spec with a game (the plan's callers check it)
    curve = curve_for_spec(spec, pilot=pilot)
    design: dict[str, Any] = dict(
        split_fraction=g.split_fraction, thresholds=g.thresholds, spec_grid=g.kind != "dpsgd"
    )
    test = (g.threshold, g.confidence, spec.delta)  # the audit's rule, confidence and delta
    need = None
    if target_eps is not None:
        need = games_needed(curve, target_eps, *test, power, **design)
    expected = prob = low = high = None
    if games is not None:
        expected, law = law_for_games(curve, games, *test, **design)
        low, high, _ = planned_range(law, expected)
        if target_eps is not None:
            prob = prob_for_games(curve, target_eps, games, *test, **design)
    game_eps = None if curve.source.startswith("simulated") else curve_epsilon(curve, spec.delta)
    asked = (target_eps, need, power, g.threshold, g.confidence, exact_eps, curve.source, games)
    return Plan(*asked, expected, prob, game_eps=game_eps, eps_low=low, eps_high=high)
