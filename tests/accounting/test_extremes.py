"""Numerical extremes (issue 6 section 3): nu down to 1e-9, E[K] up to 1e6, mu from 1e-3 to 10,
delta from 1e-12 to 1e-2, eps_B near 0. No NaN or inf where the answer is finite, bounds
monotone and ordered, exact curves accurate against 40-digit mpmath integration.

(Properties already covered at moderate parameters live in test_rounds.py, test_exact.py and
test_accounting_panel.py; this file pushes them to the ends of the ranges.)
"""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import hockey_stick as oracle_hockey_stick
from oracles import tnb_density

from auditsel.accounting.exact import exact_epsilon, hockey_stick, privacy_curve
from auditsel.accounting.panel import panel
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import Binomial, Point, Poisson, TruncatedNegativeBinomial, TwoPoint
from auditsel.selection import GaussianWinner


def all_values(base, law, delta) -> dict:
    """Every registered value of the panel, the reduced game's (under [XWW24]'s monotone-score
    assumption, `monotone_score`) included: their orderings are properties of the computations."""
    p = panel(base, law, delta)
    return {k: p.value(k) for k in p.upper}


PROPS = settings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

EXTREME_LAWS = [
    TruncatedNegativeBinomial(0.0, 1e-9),  # logarithmic, E[K] ~ 4.8e7
    TruncatedNegativeBinomial(1.0, 1e-6),  # geometric, E[K] = 1e6
    TruncatedNegativeBinomial(-0.9, 1e-9),
    TruncatedNegativeBinomial(0.5, 1e-9),
    TruncatedNegativeBinomial(50.0, 1e-9),  # eta log(1/nu) > 709: expm1 overflow before the fix
    TruncatedNegativeBinomial(2.0, 0.999),
    TruncatedNegativeBinomial(0.0, 1e-15),  # the smallest nu allowed
    Poisson(1e6),
    Poisson(1e-6),
    Binomial(10**6, 1.0),
    TwoPoint(10**6, 0.5),
    Point(10**6),
]
IDS = [f"{law.kind}-{law.params()}" for law in EXTREME_LAWS]


def mp_tnb_pgf(eta, nu, z):
    eta, nu, z = mp.mpf(eta), mp.mpf(nu), mp.mpf(z)
    if eta == 0:
        return mp.log(1 - (1 - nu) * z) / mp.log(nu)
    return ((1 - (1 - nu) * z) ** (-eta) - 1) / (nu ** (-eta) - 1)


@pytest.mark.parametrize("law", EXTREME_LAWS, ids=IDS)
def test_law_surface_is_finite_and_consistent_at_extremes(law):
    with np.errstate(invalid="raise", over="raise"):  # no nan or overflow on the way (underflow
        mean = law.mean  # to 0 and log(0) = -inf are legitimate)
        assert math.isfinite(mean) and mean > 0
        z = np.array([0.0, 1e-300, 1e-12, 0.3, 0.5, 0.9, 1 - 1e-9, 1 - 1e-15, 1.0])
        g = np.asarray(law.pgf(z))
        assert np.all(np.isfinite(g)) and np.all((g >= -1e-15) & (g <= 1 + 1e-12))
        assert float(law.pgf(1.0)) == pytest.approx(1.0, rel=1e-10)
        assert np.all(np.diff(g) >= -1e-15)  # a cdf-like, non-decreasing map
        w = np.array([1e-300, 1e-200, 1e-30, 1e-12, 1e-6, 0.1, 0.5, 1.0])
        c = np.asarray(law.pgf_complement(w))
        assert np.all(np.isfinite(c)) and np.all(c >= 0) and np.all(np.diff(c) >= -1e-15)
        assert float(law.pgf_complement(1e-300)) == pytest.approx(mean * 1e-300, rel=1e-6)
        d = np.asarray(law.log_pgf_derivative(1 - w, w))
        assert np.all(np.isfinite(d[w < 1]))
        assert float(law.log_pgf_derivative(1.0, 0.0)) == pytest.approx(
            math.log(mean), rel=1e-9, abs=1e-12
        )
        k = np.array([0, 1, 2, 10, 10**6, 10**9])
        p = np.asarray(law.pmf(k))
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    sample = law.sample(2000, np.random.default_rng(0))
    assert sample.dtype == np.int64 and np.all(sample >= 0)
    if law.p_zero == 0:
        assert np.all(sample >= 1)


@pytest.mark.parametrize(
    "eta, nu", [(0.0, 1e-9), (1.0, 1e-9), (0.5, 1e-12), (-0.5, 1e-9), (50.0, 1e-9)]
)
def test_tnb_pgf_matches_mpmath_near_one_for_tiny_nu(eta, nu):
    # pgf(z) near z = 1 used to lose nu's digits through log1p(-(1 - nu)): pgf(1) = 1 + 8e-7 at nu = 1e-12
    law = TruncatedNegativeBinomial(eta, nu)
    mp.mp.dps = 40
    for z in (0.1, 0.5, 0.99, 1 - 1e-6, 1 - 1e-12, 1.0):
        assert float(law.pgf(z)) == pytest.approx(
            float(mp_tnb_pgf(eta, nu, z)), rel=1e-9, abs=1e-300
        )
    for w in (1e-15, 1e-9, 1e-3):
        truth = 1 - mp_tnb_pgf(eta, nu, 1 - mp.mpf(w))
        assert float(law.pgf_complement(w)) == pytest.approx(float(truth), rel=1e-6)


# --- exact curve and bounds ------------------------------------------------------------------


@pytest.mark.parametrize("mu", [1e-3, 0.05, 1.0, 10.0])
@pytest.mark.parametrize(
    "law",
    [TruncatedNegativeBinomial(1.0, 1e-6), TruncatedNegativeBinomial(0.0, 1e-9), Poisson(1e6)],
    ids=["geom-EK1e6", "log-nu1e-9", "poisson-1e6"],
)
def test_exact_epsilon_finite_at_extremes(mu, law):
    if mu == 10.0 and isinstance(law, Poisson):
        # K ~ 1e6 +- 1e3: the two winners sit near 4.9 and 14.9, almost disjoint; delta(eps) ~ 1
        # for eps far above exact_epsilon's search cap (1e4), so inf is the documented answer
        w = GaussianWinner(GaussianBase(mu), law)
        assert privacy_curve(w, np.array([100.0]))[0] == pytest.approx(1.0)
        assert exact_epsilon(w, 1e-5) == math.inf
        return
    w = GaussianWinner(GaussianBase(mu), law)
    eps = np.linspace(0.0, 3 * mu + 5, 9)
    curve = privacy_curve(w, eps)
    assert np.all(np.isfinite(curve)) and np.all((curve >= 0) & (curve <= 1))
    assert np.all(np.diff(curve) <= 1e-12)
    values = [exact_epsilon(w, d) for d in (1e-12, 1e-5, 1e-2)]
    assert all(math.isfinite(v) and v >= 0 for v in values)
    assert values[0] >= values[1] >= values[2]  # non-increasing in delta
    # at the returned eps the curve is at delta (or below, when eps = 0)
    for v, d in zip(values, (1e-12, 1e-5, 1e-2)):
        at = float(privacy_curve(w, np.array([v]))[0])
        assert at <= d * (1 + 1e-6)
        if v > 0:
            assert at == pytest.approx(d, rel=1e-5)


@pytest.mark.parametrize(
    "mu, eta, nu, eps",
    [
        # tiny mu, E[K] = 1e6 (7 CPU s); delta far below 1e-12 runs by default
        pytest.param(1e-3, 1.0, 1e-6, [0.0, 0.002], marks=pytest.mark.slow),
        pytest.param(0.05, 0.0, 1e-9, [0.1, 0.5], marks=pytest.mark.slow),  # nu = 1e-9
        (3.0, 0.5, 1e-9, [8.0]),  # delta far below 1e-12
        pytest.param(10.0, 0.0, 1e-9, [30.0], marks=pytest.mark.slow),
    ],
)
def test_exact_curve_matches_mpmath_at_extremes(mu, eta, nu, eps):
    w = GaussianWinner(GaussianBase(mu), TruncatedNegativeBinomial(eta, nu))
    density = lambda x, s: tnb_density(x, s, eta, nu)
    mp.mp.dps = 40
    for e in eps:
        for direction in (0, 1):
            ours = hockey_stick(w, e, direction)
            truth = float(
                oracle_hockey_stick(density, mu, e, direction, lo=-40, hi=mu + 40, step=0.05)
            )
            assert ours == pytest.approx(truth, rel=1e-6, abs=1e-300), (e, direction)


def test_exact_epsilon_at_tiny_delta_matches_mpmath():
    # delta = 1e-12 with E[K] = 1e6 and mu = 1: the crossing point, bracketed by the oracle
    mu, eta, nu, delta = 1.0, 1.0, 1e-6, 1e-12
    w = GaussianWinner(GaussianBase(mu), TruncatedNegativeBinomial(eta, nu))
    eps = exact_epsilon(w, delta)
    density = lambda x, s: tnb_density(x, s, eta, nu)
    mp.mp.dps = 40
    at = lambda e, d: float(oracle_hockey_stick(density, mu, e, d, lo=-40, hi=mu + 40, step=0.1))
    # the curve is the max over both directions: above delta once one direction is (the
    # direction that dominates first), below it only when both are
    assert any(at(eps - 1e-4, d) > delta for d in (1, 0))
    assert all(at(eps + 1e-4, d) < delta for d in (0, 1))


def test_eps_b_near_zero_gives_finite_bounds_near_zero():
    base = GaussianBase.from_epsilon(1e-3, 1e-5)
    assert base.epsilon(1e-5) == pytest.approx(1e-3, abs=1e-9)
    out = all_values(base, TruncatedNegativeBinomial(1.0, 0.1), 1e-5)
    for k in ("generic_rdp", "profile", "improved_rdp", "exact"):
        assert out[k] is not None and math.isfinite(out[k]) and out[k] >= 1e-3 - 1e-6, k
    assert out["exact"] <= out["improved_rdp"] + 1e-6 <= out["generic_rdp"] + 2e-6
    assert out["exact"] <= out["profile"] + 1e-6
    assert out["exact"] < 0.5  # E[K] = 10 runs of a 1e-3 mechanism stay private


EXTREME_SETTINGS = [
    (1e-3, TruncatedNegativeBinomial(1.0, 1e-6)),
    (10.0, TruncatedNegativeBinomial(0.0, 1e-9)),
    (0.5, Poisson(1e6)),
]


@pytest.mark.parametrize(
    "mu, law, delta",
    # reason: 0.2-0.45 CPU s a case; by default each setting once, the two deltas in turn
    [
        pytest.param(mu, law, delta, marks=() if j == i % 2 else pytest.mark.slow)
        for i, (mu, law) in enumerate(EXTREME_SETTINGS)
        for j, delta in enumerate([1e-12, 1e-2])
    ],
    ids=[
        f"{name}-{delta:g}"
        for name in ("tiny-mu", "mu10-nu1e-9", "poisson1e6")
        for delta in (1e-12, 1e-2)
    ],
)
def test_upper_bounds_finite_and_ordered_at_extremes(mu, law, delta):
    out = all_values(GaussianBase(mu), law, delta)
    eps_b = GaussianBase(mu).epsilon(delta)
    for k in ("generic_rdp", "profile", "improved_rdp", "exact"):
        assert out[k] is not None and math.isfinite(out[k]), (k, out)
        assert out[k] >= eps_b - 1e-6, (k, out)
    tol = 1e-6 * max(1.0, out["exact"])
    assert out["exact"] <= out["improved_rdp"] + tol <= out["generic_rdp"] + 2 * tol
    assert out["exact"] <= out["profile"] + tol


# --- hypothesis: properties over random extreme settings ------------------------------------

extreme_mu = st.floats(1e-3, 10.0).filter(lambda m: m > 0)
tiny_nu = st.floats(1e-9, 1e-2)
eta = st.sampled_from([-0.9, -0.5, 0.0, 0.5, 1.0, 3.0])


@PROPS
@given(mu=extreme_mu, eta=eta, nu=tiny_nu)
def test_curve_convex_nonincreasing_at_extremes(mu, eta, nu):
    w = GaussianWinner(GaussianBase(mu), TruncatedNegativeBinomial(eta, nu))
    eps = np.linspace(-0.5, 3 * mu + 4, 17)
    alpha = np.exp(eps)
    curve = privacy_curve(w, eps)
    assert np.all(np.isfinite(curve))
    assert np.all(np.diff(curve) <= 1e-12)
    slopes = np.diff(curve) / np.diff(alpha)
    assert np.all(np.diff(slopes) >= -1e-9)
    assert np.all(curve >= np.maximum(1 - alpha, 0) - 1e-12) and np.all(curve <= 1 + 1e-12)


# Monotone in E[K] is not a theorem. Investigated at the point hypothesis found (eta = -0.9,
# mu = 0.015625, delta = 1e-12, nu 1e-9 -> 5e-10): the exact eps falls (0.100443 -> 0.100392)
# although the law with smaller nu has the larger mean and even dominates the other in the
# stochastic order, and the 40-digit oracle confirms the fall (the code is right, the property
# is not; see test_more_runs_can_be_more_private_oracle_confirmed). The E[K] check is therefore
# an empirical regularity, kept where no counterexample is known (eta >= 0); mu and delta are
# checked for every eta.
monotone = dict(
    mu=extreme_mu,
    eta=eta,
    nu=tiny_nu,
    factor=st.floats(1.2, 3.0),
    delta=st.sampled_from([1e-12, 1e-8, 1e-5, 1e-2]),
)


@settings(PROPS, max_examples=4)
@given(**monotone)
def test_exact_epsilon_monotone_in_mu_runs_and_delta(mu, eta, nu, factor, delta):
    check_monotone(mu, eta, nu, factor, delta)


@pytest.mark.slow
@settings(PROPS, max_examples=60, derandomize=False)
@given(**monotone)
def test_exact_epsilon_monotone_slow(mu, eta, nu, factor, delta):
    check_monotone(mu, eta, nu, factor, delta)


def stochastically_larger(a, b) -> bool:
    """P(K_a <= k) <= P(K_b <= k) for k = 1..2000 (first-order dominance where the cdfs are
    summed exactly; the rest of the mass is compared through the pgf at 1 - 1e-6)."""
    pmf_a = np.exp(a.log_pmf(np.arange(1, 2001)))
    pmf_b = np.exp(b.log_pmf(np.arange(1, 2001)))
    return bool(
        np.all(np.cumsum(pmf_a) <= np.cumsum(pmf_b) + 1e-12)
        and float(a.pgf(1 - 1e-6)) <= float(b.pgf(1 - 1e-6))
    )


def check_monotone(mu, eta, nu, factor, delta):
    law = TruncatedNegativeBinomial(eta, nu)
    more_runs = TruncatedNegativeBinomial(eta, nu / factor)
    assert more_runs.mean > law.mean
    e = lambda m, l, d: exact_epsilon(GaussianWinner(GaussianBase(m), l), d)
    base = e(mu, law, delta)
    assert math.isfinite(base) and base >= 0
    assert e(min(mu * factor, 10.0), law, delta) >= base - 1e-7  # in mu
    assert e(mu, law, min(delta * 100, 0.5)) <= base + 1e-7  # in delta
    if eta >= 0:
        assert e(mu, more_runs, delta) >= base - 1e-7  # in E[K] (empirical)


@pytest.mark.slow  # reason: mpmath's oracle (5 CPU s); the same at float precision above
def test_more_runs_can_be_more_private_oracle_confirmed():
    """TNB(eta = -0.9): nu 1e-9 -> 5e-10 raises E[K] (7.15 -> 7.66), and the second law even
    dominates the first stochastically, yet the exact eps at delta = 1e-12 falls (0.100443 ->
    0.100392). The 40-digit oracle agrees: at the first law's eps the second law's delta is
    already below 1e-12, so the fall is the truth, not a numerical error; exact eps is not
    monotone in the number of runs, whatever the order of the laws."""
    mu, eta, delta = 0.015625, -0.9, 1e-12
    fewer, more = TruncatedNegativeBinomial(eta, 1e-9), TruncatedNegativeBinomial(eta, 5e-10)
    assert more.mean > fewer.mean
    assert stochastically_larger(more, fewer)
    winner = lambda law: GaussianWinner(GaussianBase(mu), law)
    eps_fewer = exact_epsilon(winner(fewer), delta)
    eps_more = exact_epsilon(winner(more), delta)
    assert eps_more < eps_fewer - 1e-5
    mp.mp.dps = 40
    oracle = lambda eta_nu: max(
        float(
            oracle_hockey_stick(
                lambda x, s: tnb_density(x, s, *eta_nu),
                mu,
                eps_fewer,
                d,
                lo=-40,
                hi=mu + 40,
                step=0.1,
            )
        )
        for d in (0, 1)
    )
    assert oracle((eta, 1e-9)) == pytest.approx(delta, rel=1e-6)  # eps_fewer is exact
    assert oracle((eta, 5e-10)) < delta * (1 - 1e-3)  # so the true eps_more < eps_fewer


@settings(  # two examples (0.3-0.6 CPU s each: every bound of a panel)
    max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    mu=st.floats(1e-3, 5.0),
    eta=st.sampled_from([0.0, 1.0, 2.0]),
    nu=st.floats(1e-9, 1e-3),
    delta=st.sampled_from([1e-12, 1e-5, 1e-2]),
)
def test_bound_ordering_at_extremes(mu, eta, nu, delta):
    out = all_values(GaussianBase(mu), TruncatedNegativeBinomial(eta, nu), delta)
    assert all(
        out[k] is not None and math.isfinite(out[k])
        for k in ("generic_rdp", "profile", "improved_rdp", "exact")
    ), out
    tol = 1e-6 * max(1.0, out["exact"])
    assert out["exact"] <= out["improved_rdp"] + tol
    assert out["improved_rdp"] <= out["generic_rdp"] + tol
    assert out["exact"] <= out["profile"] + tol


@PROPS
@given(
    law=st.one_of(
        st.builds(TruncatedNegativeBinomial, st.floats(-0.99, 1e3), st.floats(1e-15, 0.999)),
        st.builds(Poisson, st.floats(1e-9, 1e12)),
        st.builds(Binomial, st.integers(1, 10**12), st.floats(1e-12, 1.0)),
        st.builds(TwoPoint, st.integers(1, 2**53), st.floats(0.0, 1.0)),
    ),
    z=st.floats(0.0, 1.0),
)
def test_random_laws_pgf_identities(law, z):
    with np.errstate(invalid="raise", over="raise"):
        g = float(law.pgf(z))
        c = float(law.pgf_complement(1 - z))
        assert 0 <= g <= 1 + 1e-12 and 0 <= c <= 1 + 1e-12
        assert g + c == pytest.approx(1.0, abs=1e-9)
        assert float(law.pgf(1.0)) == pytest.approx(1.0, rel=1e-9)
        assert float(law.pgf_complement(0.0)) == 0.0
        assert math.isfinite(law.mean) and law.mean > 0
        assert float(law.log_pgf_derivative(1.0, 0.0)) == pytest.approx(
            math.log(law.mean), rel=1e-9, abs=1e-12
        )
