"""Honest plans (issue 27): the pipeline planner accounts for its pilot's sampling error.

* `pilot_tests(...).pessimistic(c)`: with probability >= c over the pilot, every planned test's
  true FP and FN rates are below the planned ones (checked over 300 pilots of randomised
  response, whose rates are known exactly);
* a pipeline whose claim is exact gets no planned refutation at pilots 50, 100 and 200;
* a planted bug visible in every game is planned refuted from a pilot of 200, and its audit
  of the planned size refutes it;
* the plan says what a pilot cannot see (a leak in fewer than ~3 / pilot of games);
* several canaries (`canary="both"`) are planned as the audit certifies them: each canary's
  plan at the audit's Bonferroni share, the games per canary; an exact claim gets no planned
  refutation with both, and a planted bug's planned refutation is certified by the audit.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from auditsel import GaussianBase, InputCanary, audit_pipeline, plan_pipeline
from auditsel.auditing.planning import blind_rate, pilot_tests
from auditsel.pipelines.audit_options import AuditOptions, ReportOptions
from auditsel.pipelines.default_canaries import default_canaries
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.pipeline_plan import PilotOptions

EMPTY = (np.zeros((4, 1)), np.zeros(4))
CANARY = InputCanary(x=[1.0], y=1)
EPS_RR = 1.0
P_RR = math.exp(EPS_RR) / (1 + math.exp(EPS_RR))
DELTA = 1e-5


def _present(data) -> bool:
    return bool(np.asarray(data[0])[:, 0].sum() >= 1)


def randomized_response(data, seed, canary):
    """exactly EPS_RR-DP (delta = 0): the claim EPS_RR is exact"""
    rng = np.random.default_rng(seed)
    return float(rng.random() < (P_RR if _present(data) else 1 - P_RR))


def gaussian(data, seed, canary):
    """N(1, 1) with the canary, N(0, 1) without: exactly GaussianBase(1)"""
    return float(np.random.default_rng(seed).normal(float(_present(data)), 1.0))


def too_little_noise(data, seed, canary):
    """the bug: N(3, 1) vs N(0, 1), claimed as a smaller mu"""
    return float(np.random.default_rng(seed).normal(3.0 * _present(data), 1.0))


def itself(release, canary):
    return float(release)


def test_pessimistic_tests_are_below_the_true_rates_at_their_confidence():
    """Randomised response: a test "in iff score > t" has FP = 1 - P_RR and FN = 1 - P_RR for
    t in [0, 1), (1, 0) for t < 0 and (0, 1) for t >= 1; the reversed test the complements."""
    rng = np.random.default_rng(5)
    confidence, pilots, held = 0.8, 300, 0
    for k in range(pilots):
        member = rng.integers(0, 2, 100)
        scores = (rng.random(100) < np.where(member == 1, P_RR, 1 - P_RR)).astype(float)
        tests = pilot_tests(scores, member, "pilot", seed=k)
        curve = tests.pessimistic(confidence)
        q = 1 - P_RR
        fp = np.where(tests.t < 0, 1.0, np.where(tests.t < 1, q, 0.0))
        fn = np.where(tests.t < 0, 0.0, np.where(tests.t < 1, q, 1.0))
        fp, fn = np.where(tests.up, fp, 1 - fp), np.where(tests.up, fn, 1 - fn)
        held += bool(np.all(curve.fp >= fp) and np.all(curve.fn >= fn))
    assert held / pilots >= confidence


def _exact_claims() -> list:
    """(tune, claim, delta, pilot) of an exact claim at pilots 50, 100 and 200; the Gaussian
    pipeline's two larger pilots (3 to 4 CPU s each) in the slow tier, its pilot of 50 and
    randomized response's three by default."""
    settings = [
        ("randomized_response", randomized_response, EPS_RR, 0.0),
        ("gaussian", gaussian, GaussianBase(1.0).epsilon(DELTA), DELTA),
    ]
    return [
        pytest.param(
            tune,
            claim,
            delta,
            pilot,
            marks=pytest.mark.slow if name == "gaussian" and pilot > 50 else (),
            id=f"{name}-{pilot}",
        )
        for name, tune, claim, delta in settings
        for pilot in (50, 100, 200)
    ]


EXACT_CLAIMS = _exact_claims()


@pytest.mark.parametrize("tune,claim,delta,pilot", EXACT_CLAIMS)
def test_an_exact_claim_gets_no_planned_refutation(tune, claim, delta, pilot):
    for seed in (1, 2, 3):
        plan = plan_pipeline(
            Pipeline(tune, itself, data=EMPTY, canary=CANARY),
            delta=delta,
            pilot=pilot,
            claimed_epsilon=claim,
            games=2000,
            statistics=AuditOptions(seed=seed),
        )
        assert plan.games_to_refute is None, (pilot, seed, plan.summary())
        assert plan.curve_eps <= claim and plan.prob_refute <= 0.05
        # what the plan promises is at most what the pipeline can give
        assert plan.expected_eps <= claim


def test_a_visible_bug_is_planned_refuted_and_the_planned_audit_refutes_it():
    claim = GaussianBase(0.5).epsilon(1e-2)  # mu = 3 run, claimed as mu = 0.5 (0.96 at 0.01)
    kw_on = dict(data=EMPTY, canary=CANARY)
    kw = dict(delta=1e-2, claimed_epsilon=claim)
    plan = plan_pipeline(
        Pipeline(too_little_noise, itself, **kw_on),
        pilot=200,
        statistics=AuditOptions(seed=1),
        **kw,
    )
    assert plan.games_to_refute is not None, plan.summary()
    audit = audit_pipeline(
        Pipeline(too_little_noise, itself, **kw_on),
        games=plan.games_to_refute,
        statistics=AuditOptions(seed=7),
        report=NO_PANEL,
        **kw,
    )
    assert audit.refuted


def test_the_plan_says_what_a_pilot_cannot_see():
    assert blind_rate(100) == pytest.approx(1 - 0.05 ** (1 / 100))
    assert 2.9 / 100 < blind_rate(100) < 3.1 / 100  # about 3 / pilot
    plan = plan_pipeline(
        Pipeline(gaussian, itself, data=EMPTY, canary=CANARY),
        delta=DELTA,
        pilot=100,
        target_eps=0.5,
    )
    text = plan.summary()
    assert "cannot see" in text and f"{blind_rate(100):.2%}" in text
    assert plan.point_eps > plan.curve_eps  # the pessimistic curve is below the point estimate


@pytest.mark.slow  # 20 audits of the planned size: about 90 s
def test_planned_games_reach_the_target_at_least_as_often_as_stated():
    """Randomised response: the games planned for P(eps_L >= 0.5) >= 0.8 reach 0.5 in at least
    80% of 20 audits, up to two binomial standard deviations (13 of 20)."""
    kw_on = dict(data=EMPTY, canary=CANARY)
    kw = dict(delta=0.0)
    plan = plan_pipeline(
        Pipeline(randomized_response, itself, **kw_on),
        target_eps=0.5,
        pilot=PilotOptions(games=200, power=0.8),
        **kw,
    )
    n = plan.games_for_target
    assert n is not None
    hits = sum(
        audit_pipeline(
            Pipeline(randomized_response, itself, **kw_on),
            games=n,
            statistics=AuditOptions(seed=100 + s),
            report=NO_PANEL,
            **kw,
        ).eps
        >= 0.5
        for s in range(20)
    )
    assert hits >= 13, (n, hits)


NO_PANEL = ReportOptions(panel=False)


# --- several canaries: planned as audit_pipeline audits them (each its games, Bonferroni) -------


@pytest.mark.parametrize("tune,claim,delta,pilot", EXACT_CLAIMS)
def test_an_exact_claim_gets_no_planned_refutation_with_both_canaries(tune, claim, delta, pilot):
    plan = plan_pipeline(
        Pipeline(tune, itself, data=EMPTY, canary="both"),
        delta=delta,
        pilot=pilot,
        claimed_epsilon=claim,
        games=2000,
    )
    assert len(plan.canaries) == 2 and not any(p.canaries for p in plan.canaries)
    assert plan.games_to_refute is None, (pilot, plan.summary())
    assert plan.curve_eps <= claim and plan.prob_refute <= 0.05 and plan.expected_eps <= claim


def test_both_canaries_plan_a_refutation_that_the_audit_of_both_certifies():
    claim = GaussianBase(0.5).epsilon(1e-2)  # mu = 3 run, claimed as mu = 0.5
    kw_on = dict(data=EMPTY, canary="both")
    kw = dict(delta=1e-2, claimed_epsilon=claim)
    plan = plan_pipeline(
        Pipeline(too_little_noise, itself, **kw_on), pilot=200, **kw
    )  # pilot at seed 1
    assert plan.games_to_refute is not None, plan.summary()
    assert plan.games_to_refute == min(p.games_to_refute or math.inf for p in plan.canaries)
    audit = audit_pipeline(
        Pipeline(too_little_noise, itself, **kw_on),
        games=plan.games_to_refute,
        report=NO_PANEL,
        **kw,
    )
    assert audit.refuted and audit.games == 2 * plan.games_to_refute  # doubled, not split
    entries = audit.result["canaries"]
    assert [e["canary"]["kind"] for e in entries] == ["input", "gradient"]
    # the plan's correction is the audit's: each canary at 1 - 0.05 / 2
    for sub, entry in zip(plan.canaries, entries, strict=True):
        assert sub.confidence == entry["confidence"] == pytest.approx(1 - 0.05 / 2)
        assert sub.pilot_confidence == pytest.approx(1 - (1 - 0.8) / 2)
    assert plan.confidence == audit.confidence == 0.95
    text = plan.summary()
    assert "2 canaries" in text and "1 - 0.05/2" in text and "games per canary" in text


def test_each_canarys_plan_is_the_single_canary_plan_at_its_bonferroni_share():
    input_canary, gradient = default_canaries(too_little_noise, EMPTY)
    kw = dict(delta=1e-2, claimed_epsilon=1.0, games=500)
    both = plan_pipeline(
        Pipeline(too_little_noise, itself, data=EMPTY, canary=(input_canary, gradient)), **kw
    )
    alone = plan_pipeline(
        Pipeline(too_little_noise, itself, data=EMPTY, canary=input_canary),
        statistics=AuditOptions(confidence=1 - 0.05 / 2),
        pilot=PilotOptions(games=200, confidence=1 - 0.2 / 2),
        **kw,
    )
    timeless = lambda plan: replace(plan, cpu_seconds_per_game=0.0)
    assert timeless(both.canaries[0]) == timeless(alone)
    assert both.prob_refute == max(p.prob_refute for p in both.canaries)
    assert both.expected_eps == max(p.expected_eps for p in both.canaries)
    assert both.cpu_seconds_per_game == pytest.approx(
        sum(p.cpu_seconds_per_game for p in both.canaries)
    )
