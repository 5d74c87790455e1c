"""Exact laws of the released winner and the exact privacy curve."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import hockey_stick as oracle_hockey_stick
from oracles import pmf_density, tnb_density
from scipy import stats

from auditsel.accounting.exact import exact_epsilon, hockey_stick, privacy_curve
from auditsel.mechanisms import FiniteOutputBase, GaussianBase, gaussian_delta, gaussian_epsilon
from auditsel.rounds import Point, Poisson, TruncatedNegativeBinomial, TwoPoint
from auditsel.selection import FiniteWinner, GaussianWinner


def example1():
    return FiniteWinner(FiniteOutputBase.example1(), TruncatedNegativeBinomial(1.0, 1e-3))


def test_example1_matches_eq8_and_the_papers_epsilons():
    w = example1()
    # [XWW24] eq. 8 (three significant digits)
    assert w.pmf(0) == pytest.approx([8.66e-3, 2.60e-4, 9.91e-1], rel=5e-3)
    assert w.pmf(1) == pytest.approx([2.66e-3, 1.34e-5, 9.97e-1], rel=5e-3)
    assert w.pmf(0).sum() == pytest.approx(1.0, abs=1e-12)
    assert math.floor(exact_epsilon(w, 0.0) * 100) / 100 == 2.96
    # the paper truncates: exact 2.9253 at delta = 1e-5 (2.9645 at delta = 0)
    assert math.floor(exact_epsilon(w, 1e-5) * 100) / 100 == 2.92
    # below the generic pure-DP bound (2 + eta) eps = 3 of [PS22] Corollary 3
    assert exact_epsilon(w, 0.0) < 3.0


def test_example1_law_is_the_pgf_formula():
    w = example1()
    law = w.law
    for member in (0, 1):
        probs = np.asarray(FiniteOutputBase.example1().law(member))
        cdf = np.cumsum(probs)
        expected = law.pgf(cdf) - law.pgf(np.concatenate([[0], cdf[:-1]]))
        assert w.pmf(member) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0])
def test_one_run_reduces_to_the_gaussian_profile(mu):
    w = GaussianWinner(GaussianBase(mu), Point(1))
    eps = np.linspace(-1, 4, 11)
    assert privacy_curve(w, eps) == pytest.approx(gaussian_delta(mu, eps), rel=1e-7, abs=1e-15)
    assert exact_epsilon(w, 1e-5) == pytest.approx(gaussian_epsilon(mu, 1e-5), abs=1e-7)


@pytest.mark.parametrize(
    "mu, eta, nu, eps",
    [
        pytest.param(0.5, 0.0, 0.01, [0.5, 1.5], marks=pytest.mark.slow),  # 3.5 s of mpmath
        pytest.param(2.0, 1.0, 1e-3, [1.0, 4.0], marks=pytest.mark.slow),  # 15 s of mpmath
        (1.0, -0.5, 0.05, [0.8]),
        pytest.param(10.0, 1.0, 1e-6, [20.0, 40.0], marks=pytest.mark.slow),  # E[K] = 10^6, mu = 10
    ],
)
def test_reduced_game_curve_matches_high_precision_integration(mu, eta, nu, eps):
    w = GaussianWinner(GaussianBase(mu), TruncatedNegativeBinomial(eta, nu))
    density = lambda x, s: tnb_density(x, s, eta, nu)
    for e in eps:
        for direction in (0, 1):
            ours = hockey_stick(w, e, direction)
            truth = float(oracle_hockey_stick(density, mu, e, direction))
            assert ours == pytest.approx(truth, rel=1e-6, abs=1e-300)


@pytest.mark.slow  # reason: mpmath's integration (6 CPU s); a TNB law's: the test above
def test_two_point_curve_matches_high_precision_integration():
    table = {1: 0.01, 100: 0.99}
    w = GaussianWinner(GaussianBase(0.8), TwoPoint(100, 0.01))
    density = lambda x, s: pmf_density(x, s, table)
    for e in (0.3, 2.0):
        truth = max(float(oracle_hockey_stick(density, 0.8, e, d)) for d in (0, 1))
        assert privacy_curve(w, np.array([e]))[0] == pytest.approx(truth, rel=1e-6)


# reason: three 40-digit oracle curves (3 CPU s); by default the same crossing at E[K] = 10^6,
# bracketed to 1e-4: test_extremes.py::test_exact_epsilon_at_tiny_delta_matches_mpmath
@pytest.mark.slow
def test_epsilon_accurate_to_1e3_at_extremes():
    # mu = 10 and E[K] = 10^6: eps where the curve crosses delta, checked by the oracle
    w = GaussianWinner(GaussianBase(10.0), TruncatedNegativeBinomial(1.0, 1e-6))
    eps = exact_epsilon(w, 1e-5)
    density = lambda x, s: tnb_density(x, s, 1.0, 1e-6)
    at = lambda e, d: float(oracle_hockey_stick(density, 10.0, e, d))
    # the curve is the max over both directions: above delta once one direction is (the
    # direction that dominates first), below it only when both are
    assert any(at(eps - 1e-3, d) > 1e-5 for d in (1, 0))
    assert all(at(eps + 1e-3, d) < 1e-5 for d in (0, 1))


def test_poisson_fixed_output_carries_no_privacy_loss_but_counts_for_negative_eps():
    w = GaussianWinner(GaussianBase(1.0), Poisson(0.5))
    atom = math.exp(-0.5)
    # at eps = 0 the atom cancels; the curve is below the no-atom law's
    assert w.atom == pytest.approx(atom)
    assert hockey_stick(w, -1.0, 0) >= atom * (1 - math.exp(-1.0))
    assert (
        exact_epsilon(w, 1e-5)
        < exact_epsilon(GaussianWinner(GaussianBase(1.0), Point(1)), 1e-5) + 1
    )


@given(mu=st.floats(0.05, 5.0), nu=st.floats(1e-5, 0.5), eta=st.floats(-0.9, 3.0))
@settings(max_examples=8, deadline=None)  # 0.1 CPU s an example
def test_curve_is_convex_in_e_eps_and_nonincreasing(mu, nu, eta):
    # [DGKKM22] Lemma 2.1: h(alpha) = H_alpha is convex and non-increasing in alpha = e^eps,
    # with h(1) <= 1 and h(alpha) >= [1 - alpha]_+.
    w = GaussianWinner(GaussianBase(mu), TruncatedNegativeBinomial(eta, nu))
    eps = np.linspace(-1, 3 * mu + 3, 25)
    alpha = np.exp(eps)
    curve = privacy_curve(w, eps)
    assert np.all(np.diff(curve) <= 1e-12)
    slopes = np.diff(curve) / np.diff(alpha)
    assert np.all(np.diff(slopes) >= -1e-9)
    assert np.all(curve >= np.maximum(1 - alpha, 0) - 1e-12) and np.all(curve <= 1)
    assert 0 <= exact_epsilon(w, 1e-5) < math.inf


def test_winner_sampler_matches_exact_cdf():
    w = GaussianWinner(GaussianBase(0.7), TruncatedNegativeBinomial(0.0, 0.01))
    rng = np.random.default_rng(0)
    for member in (0, 1):
        x = w.release(np.full(100_000, member, dtype=np.int8), rng)
        assert stats.kstest(x, lambda t: w.cdf(t, member)).pvalue > 1e-3


def test_winner_sampler_handles_huge_k_and_zero_k():
    w = GaussianWinner(GaussianBase(1.0), Point(10**12))
    x = w.release(np.zeros(50_000, dtype=np.int8), np.random.default_rng(1))
    # max of 10^12 normals: cdf F(x)^k, median where F = 2^(-1/k)
    assert np.all(np.isfinite(x))
    assert np.median(x) == pytest.approx(
        float(stats.norm.isf(-math.expm1(-math.log(2) / 1e12))), abs=0.02
    )
    p = GaussianWinner(GaussianBase(1.0), Poisson(0.3))
    y = p.release(np.zeros(100_000, dtype=np.int8), np.random.default_rng(2))
    assert np.mean(np.isneginf(y)) == pytest.approx(math.exp(-0.3), abs=0.005)


def test_finite_sampler_matches_exact_pmf():
    w = example1()
    rng = np.random.default_rng(4)
    for member in (0, 1):
        y = w.release(np.full(400_000, member, dtype=np.int8), rng)
        freq = np.bincount(y, minlength=3) / len(y)
        tol = 5 * np.sqrt(w.pmf(member) / len(y)) + 1e-6
        assert np.all(np.abs(freq - w.pmf(member)) <= tol)


def test_tradeoff_curve_is_the_gaussian_one_for_one_run():
    from auditsel.accounting.exact import tradeoff_curve

    mu = 1.2
    fp, fn = tradeoff_curve(GaussianWinner(GaussianBase(mu), Point(1)), points=50)
    inner = (fp > 1e-12) & (fp < 1 - 1e-12)
    assert fn[inner] == pytest.approx(
        stats.norm.cdf(stats.norm.isf(fp[inner]) - mu), rel=1e-6, abs=1e-12
    )


def test_game_matches_the_exact_tradeoff_with_the_likelihood_ratio_proxy():
    from attacks.proxies import make_proxy
    from auditsel.accounting.exact import likelihood_ratio_region_masses
    from auditsel.games.engine import run_game

    w = GaussianWinner(GaussianBase(0.8), TruncatedNegativeBinomial(0.0, 0.01))
    rec = run_game(w, make_proxy("likelihood_ratio", w), 400_000, 5)
    levels = np.array([-0.5, 0.0, 0.5, 1.0])
    p1, p0 = likelihood_ratio_region_masses(w, levels, direction=1)
    for c, a1, a0 in zip(levels, p1, p0):
        above = rec.scores > c
        for rate, truth, n in (
            (above[rec.member == 1].mean(), a1, (rec.member == 1).sum()),
            (above[rec.member == 0].mean(), a0, (rec.member == 0).sum()),
        ):
            assert abs(rate - truth) <= 5 * np.sqrt(truth * (1 - truth) / n) + 1e-6
