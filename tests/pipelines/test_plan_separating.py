"""Plans that see a separating pilot (issue 36 item 3).

* `claim_pvalue`: the exact p-value of "this test keeps (eps, delta)" on held-out counts; it is
  valid (a test at the claim's boundary rejects at level a in at most a fraction a of pilots)
  and it reads perfect separation of 50 and 50 games as evidence against eps = 2.25, not
  against eps = 6.7;
* a pipeline whose pilot separates (a scaler of the private rows shipped with the model,
  claimed as eps = 3) is planned refuted at the audit's budget, P(refuted) >= 0.5, and the
  seeded audit of the planned games refutes it; the planner before issue 36 item 3 planned no
  refutation there (its pilot's limits cap eps near 2.3);
* a correct pipeline keeps P(refuted) < 0.5 and reads the pessimistic curve.
"""

import math

import numpy as np
import pytest
from scipy import stats
from test_learned_scores import CLAIM, DATA, DELTA, NO_PANEL, PERSON, noisy_model, scaler_leak

from auditsel import AuditOptions, audit_pipeline, plan_pipeline
from auditsel.auditing.planning import claim_pvalue
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.pipelines.pipeline import Pipeline

SEPARATED_CLAIM = 3.0  # above what the old planner's limits could vouch for from 100 games


def test_perfect_separation_rejects_a_small_claim_and_not_a_large_one():
    assert claim_pvalue(0, 50, 0, 50, 2.254, 1e-5) < 1e-3
    assert claim_pvalue(0, 50, 0, 50, 6.7, 1e-5) > 0.5
    # fewer errors are stronger evidence; a larger claim is harder to reject
    assert claim_pvalue(0, 50, 10, 50, 1.4, 1e-5) < claim_pvalue(2, 50, 10, 50, 1.4, 1e-5)
    assert claim_pvalue(0, 50, 10, 50, 1.4, 1e-5) < claim_pvalue(0, 50, 10, 50, 2.0, 1e-5)


@pytest.mark.parametrize(
    "eps,fp",
    [
        (2.254, 0.02),
        (2.254, 0.09),
        # reason: a third boundary point (4 CPU s: the most distinct error counts); two by default
        pytest.param(1.0, 0.2689, marks=pytest.mark.slow),
    ],
)
def test_the_claim_pvalue_is_valid_at_the_claims_boundary(eps, fp):
    """Rates on the boundary of (eps, 1e-5) (the hardest to reject): over 2,000 simulated
    held-out halves of 50 and 50 games, p <= a in at most a fraction a (binomial 99.9% limit)."""
    fn = max(0.0, 1 - 1e-5 - math.exp(eps) * fp)
    assert epsilon_from_rates(np.array([fp]), np.array([fn]), 1e-5)[0] <= eps + 1e-9
    rng = np.random.default_rng(3)
    pairs = np.stack([rng.binomial(50, fp, 2000), rng.binomial(50, fn, 2000)], axis=1)
    seen, where = np.unique(pairs, axis=0, return_inverse=True)
    p = np.array([claim_pvalue(a, 50, b, 50, eps, 1e-5) for a, b in seen])[where.reshape(-1)]
    for level in (0.01, 0.05, 0.1, 0.2):
        assert np.sum(p <= level) <= stats.binom.ppf(0.999, 2000, level), level


def test_a_separating_pilot_is_planned_refuted_and_the_planned_audit_refutes():
    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, claimed_epsilon=SEPARATED_CLAIM)
    plan = plan_pipeline(Pipeline(scaler_leak, **kw_on), games=1000, **kw)
    assert plan.reading == "median" and plan.pilot_pvalue <= 0.2, plan.summary()
    assert plan.prob_refute >= 0.5 and plan.games_to_refute is not None
    assert plan.curve_eps < SEPARATED_CLAIM  # the limits alone could not have planned it
    assert "reject the claim" in plan.summary()
    # the audit the plan planned (its seed, 0: the same learned score)
    audit = audit_pipeline(
        Pipeline(scaler_leak, **kw_on), games=plan.games_to_refute, report=NO_PANEL, **kw
    )
    assert audit.refuted and audit.eps > SEPARATED_CLAIM


def test_a_score_learned_from_another_pilot_size_reads_the_limits():
    """The audit learns its score from 200 games: a plan from 100 learns another score, so it
    does not read that score's held-out medians, however well they separate."""
    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, claimed_epsilon=SEPARATED_CLAIM)
    plan = plan_pipeline(
        Pipeline(scaler_leak, **kw_on), games=1000, pilot=100, statistics=AuditOptions(seed=1), **kw
    )
    assert plan.reading == "limits" and plan.games_to_refute is None
    assert "not the audit's score" in plan.summary()


def test_a_correct_pipeline_reads_the_limits_and_plans_no_refutation():
    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, claimed_epsilon=CLAIM)
    plan = plan_pipeline(Pipeline(noisy_model, **kw_on), games=1000, **kw)
    assert plan.reading == "limits" and plan.pilot_pvalue > 0.2
    assert plan.games_to_refute is None and plan.prob_refute < 0.5
    assert "do not reject the claim" in plan.summary()
