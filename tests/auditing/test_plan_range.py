"""The planned range of the certified eps_L (`auditsel.auditing.planning.eps_law`): its law's
mean is E[eps_L], its quantiles have a closed form where one count is certain, the law of the
largest of independent audits is the product of their cdfs, and audits played with the plan's
threshold fixed in advance fall outside the range as often as the law says."""

import numpy as np
import pytest
from scipy import stats

from auditsel.auditing.clopper_pearson import clopper_pearson_upper
from auditsel.auditing.lower import apply_rule
from auditsel.auditing.planning import (
    EpsLaw,
    PlanCurve,
    eps_law,
    expected_eps,
    expected_for_games,
    law_for_games,
    rule_design,
)
from auditsel.auditing.rules import BonferroniGrid
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.threshold_search import epsilon_from_rates

DELTA = 1e-5


@pytest.mark.parametrize(
    "fp, fn, n, level",
    [(0.01, 0.4, 4000, 0.05), (0.2, 0.2, 600, 0.05), (0.5, 0.1, 300_000, 1e-7)],
)  # the last one: binned counts
def test_the_laws_mean_is_the_planned_expectation(fp, fn, n, level):
    law = eps_law(fp, fn, n, level, DELTA)
    assert law.mean() == pytest.approx(expected_eps(fp, fn, n, level, DELTA), rel=1e-9, abs=1e-12)
    assert np.all(np.diff(law.values) > 0) and np.all(np.diff(law.cdf) >= -1e-15)
    assert law.cdf[-1] == pytest.approx(1.0, abs=1e-9)
    assert law.quantile(0.05) <= law.quantile(0.5) <= law.quantile(0.95)


def test_the_quantiles_have_their_closed_form_when_no_false_negative_can_occur():
    """FN = 0: the FN count is 0, so eps_L = e(K), K ~ Bin(n0, FP), e strictly falling in K;
    the q quantile of eps_L is e(k) at the largest k with P(K >= k) >= q."""
    fp, n, level = 0.05, 500, 0.05
    n0, n1 = n // 2, n - n // 2
    k = np.arange(n0 + 1)

    def e(count):
        u0 = clopper_pearson_upper(np.atleast_1d(count), n0, level)
        u1 = clopper_pearson_upper(np.zeros(1, int), n1, level)
        return float(epsilon_from_rates(u0, u1, DELTA)[0])

    law = eps_law(fp, 0.0, n, level, DELTA)
    at_least = stats.binom.sf(k - 1, n0, fp)  # P(K >= k)
    for q in (0.05, 0.5, 0.95):
        k_q = int(k[at_least >= q].max())
        assert e(k_q) > e(k_q + 1) > 0  # strictly falling where the quantile is read
        assert law.quantile(q) == pytest.approx(e(k_q), abs=1e-9), q
    # P(eps_L < its 5% quantile) < 5% <= P(eps_L <= it)
    low = law.quantile(0.05)
    assert law.at(np.nextafter(low, -np.inf)) < 0.05 <= law.at(low)


def test_the_largest_of_independent_laws_multiplies_their_cdfs():
    coin = EpsLaw(np.array([0.0, 1.0]), np.array([0.5, 1.0]))
    other = EpsLaw(np.array([0.5, 2.0]), np.array([0.2, 1.0]))
    both = EpsLaw.largest([coin, coin])
    assert both.values.tolist() == [0.0, 1.0] and both.cdf.tolist() == [0.25, 1.0]
    mixed = EpsLaw.largest([coin, other])
    # max is 0.5 iff coin = 0 and other = 0.5; 1 iff coin = 1 and other = 0.5; else 2
    assert mixed.at(np.array([0.0, 0.5, 1.0, 2.0])).tolist() == pytest.approx([0, 0.1, 0.2, 1])
    assert mixed.mean() == pytest.approx(0.1 * 0.5 + 0.1 * 1.0 + 0.8 * 2.0)


def test_audits_of_a_known_pair_fall_outside_the_range_as_often_as_its_law_says():
    """Gaussian pair mu = 1.5: 400 audits of 2,000 games at the plan's threshold fixed in advance
    (a one-point grid) fall below the range's low end and above its high end as often as the
    planned law says (binomial 4-sigma tolerance, plus a little for the random n0, n1)."""
    mu, n, reps = 1.5, 2000, 400
    t = np.linspace(-6, mu + 6, 3000)
    curve = PlanCurve(stats.norm.sf(t), stats.norm.cdf(t - mu), "exact")
    expected, law = law_for_games(curve, n, "bonferroni", 0.95, DELTA, thresholds=1)
    # one search for both: the value is expected_for_games', the law's mean is that value
    assert expected == expected_for_games(curve, n, "bonferroni", 0.95, DELTA, thresholds=1)
    assert law.mean() == pytest.approx(expected, rel=1e-9)
    low, high = law.quantile(0.05), law.quantile(0.95)
    p_low = float(law.at(np.nextafter(low, -np.inf)))  # P(eps_L < low)
    p_high = 1 - float(law.at(high))  # P(eps_L > high)
    assert p_low < 0.05 and p_high <= 0.05 and p_low + p_high > 0.02  # a real, not a wide, range
    # the law's test is the plan's: recover its threshold from its FP
    evaluated, level = rule_design("bonferroni", n, 0.95, thresholds=1)
    fps, fns = curve.candidates()
    means = [expected_eps(a, b, evaluated, level, DELTA) for a, b in zip(fps, fns)]
    threshold = stats.norm.isf(fps[int(np.argmax(means))])
    rng = np.random.default_rng(5)
    eps = []
    for _ in range(reps):
        m = rng.integers(0, 2, n).astype(np.int8)
        s = rng.normal(mu * m, 1.0)
        eps.append(
            apply_rule(SortedScores(s, m), BonferroniGrid(grid=[threshold]), 0.05, DELTA)["eps"]
        )
    eps = np.array(eps)
    for seen, planned in ((np.mean(eps < low), p_low), (np.mean(eps > high), p_high)):
        assert seen == pytest.approx(
            planned, abs=4 * np.sqrt(planned * (1 - planned) / reps) + 0.02
        )
    assert np.mean((eps >= low) & (eps <= high)) >= 0.85
