"""Regression tests for accountants: assert that a claimed epsilon is not refuted by an audit. ::

    from auditsel.testing import assert_not_refuted, worst_case_tuning
    # the worst score the attack finds at delta (score="monotone": [XWW24]'s assumption)
    game = worst_case_tuning(base_epsilon=1.0, delta=1e-5, rounds=TruncatedNegativeBinomial(1, 1e-3))
    assert_not_refuted(my_accountant_epsilon, 1e-5, game, trials=200_000)

    # DP-SGD with Poisson subsampling: the worst-case run ([XWW24] Sec. 5, any tau; add/remove)
    from auditsel.testing import worst_case_dpsgd
    game = worst_case_dpsgd(noise_multiplier=0.8, steps=3, sample_rate=0.2)   # K = 1: one run
    assert_not_refuted(opacus_epsilon, 1e-5, game, trials=1_000_000)

    # tuning: K ~ rounds runs, the tuner plays the worst score the attack finds at delta
    game = worst_case_dpsgd(1.0, 10, 0.1, rounds=Poisson(10))
    assert_not_refuted(tuning_epsilon, 1e-5, game, trials=...)   # `auditsel plan` says how many
    trials = planned_games(config, target_eps=claimed_epsilon)  # the same plan, in Python

    # your own tuning pipeline (auditsel.pipelines): trials are games of your code
    from auditsel import Pipeline, GradientCanary
    pipeline = Pipeline(tune, data=data, canary=GradientCanary(coordinate=0))
    assert_not_refuted(claimed_epsilon, 1e-5, pipeline, trials=2_000, jobs=2)

The tuner's score. An epsilon claimed for a tuning run must hold for every score the tuner may
rank its runs by, so the DP-SGD game plays the worst score by default (`score="worst"`: the
interval-shaped score of the run's privacy-loss label that the worst-score attack of
`accounting.attack` finds for the setting at the audit's delta; the adversary thresholds its
bucket statistic). `score=MonotoneScore("largest", "label")` plays [XWW24]'s monotone-score game
(the run of the largest label wins), which checks a claim only under that assumption.

The audit plays the distinguishing game ([XWW24] Algorithm 1) and computes eps_L with the
valid `split` rule (Clopper-Pearson, [XWW24] eq. 4). If eps_L > claimed epsilon, the claim is
false with probability at least `confidence`: a correct accountant fails this assertion with
probability at most 1 - confidence (fix the seed to make the test deterministic).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from attacks.proxies import make_proxy
from auditsel.auditing.lower import LowerBound, audit_scores, check_levels
from auditsel.auditing.rules import threshold_rule
from auditsel.errors import ConfigError, percent
from auditsel.experiments.config import parse_config
from auditsel.experiments.config_plan import plan_spec
from auditsel.games.engine import run_game
from auditsel.games.played_score import resolve_score, scored_winner
from auditsel.games.worst_case import DpsgdWorstCase
from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, given_options
from auditsel.pipelines.pipeline import Pipeline
from auditsel.roles import GameProtocol, Proxy
from auditsel.rounds import Point, RoundsLaw
from auditsel.selection import GaussianWinner, ScoredGaussianWinner, TuningScore


class RefutedClaim(AssertionError):
    """The audited lower bound exceeds the claimed epsilon."""

    def __init__(self, message: str, bound: LowerBound) -> None:
        super().__init__(message)
        self.bound = bound


def worst_case_tuning(
    base_epsilon: float,
    delta: float,
    rounds: RoundsLaw,
    *,
    score: TuningScore | Literal["worst", "monotone"] = "worst",
) -> GaussianWinner | ScoredGaussianWinner:
    """The reduced game of [XWW24] Sec. 5 on a Gaussian-DP base (eps_B at delta), K ~ rounds
    runs, the best under `score` released: "worst" (the default: the worst-score attack's
    score at `delta`, the game a claim for the tuning run must survive, since it holds for
    every score; the tuning run's epsilon lies in `auditsel.tuning_epsilon(base, rounds,
    delta).interval`), "monotone" (the largest draw wins, [XWW24]'s assumption: its exact
    epsilon `exact_epsilon(game, delta)` is the tuning run's only under that assumption) or any
    `TuningScore`."""
    base = GaussianBase.from_epsilon(base_epsilon, delta)
    return scored_winner(base, rounds, resolve_score(score, base, rounds, delta))


def worst_case_dpsgd(
    noise_multiplier: float,
    steps: int,
    sample_rate: float,
    rounds: RoundsLaw | None = None,
    *,
    score: TuningScore | Literal["worst"] = "worst",
) -> DpsgdWorstCase:
    """The worst-case DP-SGD game with Poisson subsampling (`auditsel.games.worst_case`): one run
    (rounds None) or K ~ rounds runs, the best run under `score` released (default "worst": the
    worst-score attack's score at the audit's delta, see the module docstring); add/remove
    neighbours."""
    return DpsgdWorstCase(
        float(noise_multiplier),
        int(steps),
        float(sample_rate),
        rounds if rounds is not None else Point(1),
        score=score,
    )


def _default_proxy(protocol: GameProtocol) -> Proxy:
    if hasattr(protocol, "log_likelihood_ratio"):
        name = "likelihood_ratio"
    else:
        name = "score" if hasattr(protocol, "statistic") else "sample"
    return cast(Proxy, make_proxy(name, protocol))


def audit(
    protocol: GameProtocol | Pipeline,
    delta: float,
    proxy: Proxy | None = None,
    *,
    trials: int = 200_000,
    statistics: AuditOptions | None = None,
    jobs: int = 1,
) -> LowerBound:
    """Play `trials` games on `protocol` (anything with release(member, rng), or a `Pipeline`
    of yours) at `statistics`' seed and bound eps from below at its confidence under its
    threshold rule (`AuditOptions`; None: its defaults, 95% and the split rule at seed 0)."""
    stats = given_options(AuditOptions, statistics, "statistics")
    confidence, seed, rule = stats.confidence, stats.seed, stats.rule
    if isinstance(protocol, Pipeline):
        if proxy is not None:
            raise ConfigError("proxy", "a Pipeline brings its own score: set Pipeline(score=...)")
        played = protocol.audit(
            games=trials, delta=delta, statistics=stats, execution=ExecutionOptions(jobs=jobs)
        )
        return played.bound
    if not hasattr(protocol, "release"):
        raise ConfigError(
            "protocol",
            f"must be a game with release(member, rng) (e.g. worst_case_tuning(...)) or an "
            f"auditsel.Pipeline(tune, score, data=..., canary=...); got "
            f"{type(protocol).__name__}: wrap your tuning function in a Pipeline",
        )
    resolve = getattr(protocol, "resolved", None)
    if resolve is not None:  # a score that depends on delta ("worst")
        protocol = resolve(delta)
    game = cast(GameProtocol, protocol)  # not a Pipeline: it has release()
    proxy = proxy if proxy is not None else _default_proxy(game)
    check_levels(confidence, delta)  # a bad delta or confidence is refused before the games
    record = run_game(game, proxy, trials, seed, execution=ExecutionOptions(jobs=jobs))
    if isinstance(rule, str):  # the split's seed: the game's (independent streams of it)
        rule = threshold_rule(rule, seed=seed)
    assert record.scores is not None and record.member is not None  # played in memory
    return audit_scores(record.scores, record.member, delta, confidence=confidence, rule=rule)


def assert_not_refuted(
    claimed_epsilon: float,
    delta: float,
    protocol: GameProtocol | Pipeline,
    proxy: Proxy | None = None,
    *,
    trials: int = 200_000,
    statistics: AuditOptions | None = None,
    jobs: int = 1,
) -> LowerBound:
    """Fail (RefutedClaim, an AssertionError) when the audited eps_L exceeds the claim: the
    audit of `audit` (`statistics`: an `AuditOptions` with the confidence, rule and seed)."""
    stats = given_options(AuditOptions, statistics, "statistics")
    bound = audit(protocol, delta, proxy, trials=trials, statistics=stats, jobs=jobs)
    confidence = stats.confidence
    if bound.eps > claimed_epsilon:
        raise RefutedClaim(
            f"claimed epsilon {claimed_epsilon:.4f} at delta {delta:g} is refuted: audited "
            f"eps_L = {bound.eps:.4f} > claim with {percent(confidence)} confidence "
            f"({bound.threshold_rule} rule, {bound.evaluated_trials:,} of {bound.trials:,} games; FP <= "
            f"{bound.fp_upper:.3g}, FN <= {bound.fn_upper:.3g}; optimistic best-threshold "
            f"eps = {bound.eps_best_threshold:.4f})",
            bound,
        )
    return bound


def planned_games(config: Mapping[str, Any], target_eps: float, *, power: float = 0.9) -> int:
    """The games a valid audit of `config` (a config mapping, as `auditsel run` reads it from
    YAML: its game section's rule and confidence are planned) needs to reach eps_L >=
    `target_eps` with probability `power`: what `auditsel plan CONFIG --target-eps` prints.
    A ConfigError when no number of games reaches it."""
    spec = parse_config(dict(config))
    if spec.game is None:
        raise ConfigError("game", "planned_games plans the game of a config with a game section")
    games = plan_spec(spec, target_eps, power=power).games
    if games is None:
        raise ConfigError(
            "target_eps", f"no number of games reaches eps_L >= {target_eps:g} in this game"
        )
    return int(games)
