"""One-run audits of your own pipeline (issue 27 item 5): many canaries in one tuning run,
through the same `tune(data, seed, canary)` contract (a CanarySet is one canary to `tune`)."""

import math

import numpy as np
import pytest

from auditsel import AuditOptions, GaussianBase, GradientCanary, InputCanary
from auditsel.auditing.one_run_analysis import audit_one_run
from auditsel.errors import ConfigError
from auditsel.pipelines.one_run_pipeline import CanarySet, audit_pipeline_one_run

M, STEPS, SIGMA, LR = 1000, 4, 8.0, 0.1
DELTA = 1e-5
CLAIM = GaussianBase(math.sqrt(STEPS) / SIGMA).epsilon(DELTA)  # each canary: T Gaussian steps


def dp_gd(data, seed, canary, sigma=SIGMA):
    """Full-batch DP-GD on M coordinates with no data: the clipped sum holds the canaries."""
    rng = np.random.default_rng(seed)
    theta = np.zeros(M)
    for _ in range(STEPS):
        grads = [np.zeros(M)]
        canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
        theta -= LR * (grads[0] + rng.normal(0.0, sigma, M))
    return [theta]


def no_noise(data, seed, canary):
    """The bug: the noise forgotten."""
    return dp_gd(data, seed, canary, sigma=0.0)


CANARIES = [GradientCanary(coordinate=i) for i in range(M)]


def test_a_pipeline_without_noise_gives_a_large_eps_l():
    audit = audit_pipeline_one_run(
        no_noise, data=None, canaries=CANARIES, delta=DELTA, claimed_epsilon=CLAIM
    )
    members = audit.members
    # every included canary moved its coordinate by LR * STEPS, no other did: perfect guesses
    assert np.array_equal(audit.scores > 0, members == 1)
    assert audit.refuted and audit.eps > 2 * CLAIM
    # the same numbers as the config-side analysis of these scores and bits
    direct = audit_one_run(audit.scores, members, DELTA, confidence=0.95, seed=0)
    assert audit.eps == direct.eps_snj23


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_correct_pipeline_does_not_exceed_its_claim(seed):
    audit = audit_pipeline_one_run(
        dp_gd,
        data=None,
        canaries=CANARIES,
        delta=DELTA,
        claimed_epsilon=CLAIM,
        statistics=AuditOptions(seed=seed),
    )
    assert not audit.refuted and audit.eps <= CLAIM
    assert 0.4 < audit.members.mean() < 0.6  # each canary in with probability 1/2
    assert "[MMC24], if the trade-off is" in audit.summary()  # the assumption is named


def test_a_canary_set_acts_for_each_canary_and_only_the_included_ones():
    X = np.zeros((3, 2))
    data = (X, np.zeros(3))
    inputs = CanarySet((InputCanary(x=[1.0, 0.0], y=1), InputCanary(x=[0.0, 1.0], y=0)))
    bound = inputs.for_run([1, 0], np.random.default_rng(0))
    Xb, yb = bound.prepare(data)
    assert Xb.tolist() == [[0, 0]] * 3 + [[1.0, 0.0]] and yb.tolist() == [0, 0, 0, 1]
    assert inputs.prepare(data) is data  # unbound: nothing is in
    grads = CanarySet(tuple(CANARIES[:3])).for_run([1, 0, 1], np.random.default_rng(0))
    g = [np.zeros(4)]
    assert grads.step(g, sample_rate=1.0, max_grad_norm=2.0)
    assert g[0].tolist() == [2.0, 0.0, 2.0, 0.0]
    with pytest.raises(ConfigError, match="at least 2"):
        CanarySet((CANARIES[0],))
    with pytest.raises(ConfigError, match="one score each"):
        inputs.score(None)


def test_the_one_run_audit_reads_its_seed_from_the_statistics_and_refuses_a_rule():
    """`statistics` seeds the inclusion bits (another seed, other bits); the one-run analyses
    take no threshold rule, so one is refused, naming the field."""
    kw = dict(data=None, canaries=CANARIES[:64], delta=DELTA)
    one = audit_pipeline_one_run(dp_gd, **kw, statistics=AuditOptions(seed=1))
    two = audit_pipeline_one_run(dp_gd, **kw, statistics=AuditOptions(seed=2))
    assert not np.array_equal(one.members, two.members) and one.seed == 1
    with pytest.raises(ConfigError, match=r"^statistics.rule: "):
        audit_pipeline_one_run(dp_gd, **kw, statistics=AuditOptions(rule="bonferroni"))
