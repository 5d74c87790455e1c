"""Regression tests for accountants: assert that a claimed epsilon is not refuted by an audit.

    from auditsel.testing import assert_not_refuted, worst_case_tuning
    game = worst_case_tuning(base_epsilon=1.0, delta=1e-5, rounds=TruncatedNegativeBinomial(1, 1e-3))
    assert_not_refuted(my_accountant_epsilon, 1e-5, game, trials=200_000)

    # DP-SGD with Poisson subsampling: the worst-case run ([XWW24] Sec. 5, any tau; add/remove)
    from auditsel.testing import worst_case_dpsgd
    game = worst_case_dpsgd(noise_multiplier=0.8, steps=3, sample_rate=0.2)   # K = 1: one run
    assert_not_refuted(opacus_epsilon, 1e-5, game, trials=1_000_000)

    # your own tuning pipeline (auditsel.pipelines): trials are games of your code
    from auditsel import Pipeline, GradientCanary
    pipeline = Pipeline(tune, data=data, canary=GradientCanary(coordinate=0))
    assert_not_refuted(claimed_epsilon, 1e-5, pipeline, trials=2_000, jobs=2)

The audit plays the distinguishing game ([XWW24] Algorithm 1) and computes eps_L with the
valid `split` rule (Clopper-Pearson, [XWW24] eq. 4). If eps_L > claimed epsilon, the claim is
false with probability at least `confidence`: a correct accountant fails this assertion with
probability at most 1 - confidence (fix the seed to make the test deterministic).
"""

from __future__ import annotations

from attacks.proxies import make_proxy
from auditsel.auditing.lower import LowerBound, audit_scores
from auditsel.auditing.rules import ThresholdRule, threshold_rule
from auditsel.errors import ConfigError
from auditsel.games.engine import run_game
from auditsel.games.worst_case import DpsgdWorstCase
from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.pipeline import Pipeline
from auditsel.rounds import Point
from auditsel.selection import GaussianWinner

__all__ = ["assert_not_refuted", "audit", "worst_case_tuning", "worst_case_dpsgd", "RefutedClaim"]


class RefutedClaim(AssertionError):
    """The audited lower bound exceeds the claimed epsilon."""

    def __init__(self, message: str, bound: LowerBound):
        super().__init__(message)
        self.bound = bound


def worst_case_tuning(base_epsilon: float, delta: float, rounds) -> GaussianWinner:
    """The reduced game of [XWW24] Sec. 5: the worst case of tuning a Gaussian-DP base
    (eps_B at delta), with the number of runs K ~ rounds."""
    return GaussianWinner(GaussianBase.from_epsilon(base_epsilon, delta), rounds)


def worst_case_dpsgd(noise_multiplier: float, steps: int, sample_rate: float, rounds=None):
    """The worst-case DP-SGD game with Poisson subsampling (`auditsel.games.worst_case`): one run
    (rounds None) or K ~ rounds runs with the highest-LLR run released; add/remove neighbours."""
    return DpsgdWorstCase(
        float(noise_multiplier),
        int(steps),
        float(sample_rate),
        rounds if rounds is not None else Point(1),
    )


def _default_proxy(protocol):
    return make_proxy(
        "likelihood_ratio" if hasattr(protocol, "log_likelihood_ratio") else "sample", protocol
    )


def audit(
    protocol,
    delta: float,
    proxy=None,
    *,
    trials: int = 200_000,
    confidence: float = 0.95,
    seed: int = 0,
    rule: ThresholdRule | str = "split",
    jobs: int = 1,
) -> LowerBound:
    """Play the game on `protocol` (anything with release(member, rng), or a `Pipeline` of
    yours) and bound eps from below."""
    if isinstance(protocol, Pipeline):
        if proxy is not None:
            raise ConfigError("proxy", "a Pipeline brings its own score: set Pipeline(score=...)")
        played = protocol.audit(
            games=trials, delta=delta, confidence=confidence, seed=seed, rule=rule, jobs=jobs
        )
        return played.bound
    if not hasattr(protocol, "release"):
        raise ConfigError(
            "protocol",
            f"must be a game with release(member, rng) (e.g. worst_case_tuning(...)) or an "
            f"auditsel.Pipeline(tune, score, data=..., canary=...); got "
            f"{type(protocol).__name__}: wrap your tuning function in a Pipeline",
        )
    proxy = proxy if proxy is not None else _default_proxy(protocol)
    record = run_game(protocol, proxy, trials, seed, jobs=jobs, progress=False)
    if isinstance(rule, str):  # the split's seed: the game's (independent streams of it)
        rule = threshold_rule(rule, seed=seed)
    assert record.scores is not None and record.member is not None  # played in memory
    return audit_scores(record.scores, record.member, delta, confidence=confidence, rule=rule)


def assert_not_refuted(
    claimed_epsilon: float,
    delta: float,
    protocol,
    proxy=None,
    *,
    trials: int = 200_000,
    confidence: float = 0.95,
    seed: int = 0,
    rule: ThresholdRule | str = "split",
    jobs: int = 1,
) -> LowerBound:
    """Fail (RefutedClaim, an AssertionError) when the audited eps_L exceeds the claim."""
    bound = audit(
        protocol,
        delta,
        proxy,
        trials=trials,
        confidence=confidence,
        seed=seed,
        rule=rule,
        jobs=jobs,
    )
    if bound.eps > claimed_epsilon:
        raise RefutedClaim(
            f"claimed epsilon {claimed_epsilon:.4f} at delta {delta:g} is refuted: audited "
            f"eps_L = {bound.eps:.4f} > claim with {confidence:.0%} confidence "
            f"({bound.threshold_rule} rule, {bound.evaluated_trials:,} of {bound.trials:,} games; FP <= "
            f"{bound.fp_upper:.3g}, FN <= {bound.fn_upper:.3g}; optimistic best-threshold "
            f"eps = {bound.eps_best_threshold:.4f})",
            bound,
        )
    return bound
