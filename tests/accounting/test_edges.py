"""Correct at the edges (issue 19, item 6): laws with mass at K = 0 (Poisson with mean below 1
included) in the generic RDP bound, TNB with nu = 1, the RDP orders against dp_accounting's, and
the generic bound never looser than dp_accounting's RepeatAndSelectDpEvent."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import oracles
import pytest

from auditsel.accounting.exact import exact_epsilon, privacy_curve
from auditsel.accounting.generic import lemma7_rdp, poisson_rdp
from auditsel.accounting.profile import base_profile
from auditsel.accounting.rdp import ORDERS, finite_rdp, rdp_to_delta, rdp_to_epsilon
from auditsel.accounting.registry import BOUNDS, bound
from auditsel.mechanisms import RDP_ORDERS, DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.rounds import (
    Binomial,
    FinitePmf,
    Point,
    Poisson,
    TruncatedNegativeBinomial,
)
from auditsel.selection import FiniteWinner, winner_law

DPA_DEFAULT = dpa.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS


def test_orders_include_dp_accountings_default_orders():
    for grid in (ORDERS, np.asarray(RDP_ORDERS)):
        assert set(map(float, DPA_DEFAULT)) <= set(map(float, grid))


def _winner_rdp(base: FiniteOutputBase, law, orders) -> np.ndarray:
    """The exact RDP curve of the released winner (the fixed output of K = 0 included)."""
    w = FiniteWinner(base, law)
    return finite_rdp(np.append(w.pmf(0), w.atom), np.append(w.pmf(1), w.atom), orders)


def _random_finite(rng) -> FiniteOutputBase:
    m = int(rng.integers(2, 6))
    p = rng.dirichlet(np.ones(m))
    q = p * np.exp(rng.normal(0.0, rng.choice([0.02, 0.3, 1.0]), m))
    return FiniteOutputBase(tuple(p), tuple(q / q.sum()))


def test_lemma7_as_stated_is_below_the_truth_with_mass_at_zero():
    """The counterexample of `accounting.generic`: Q = Q' (r = 0) and E[K] < 1 make [PS22]
    Lemma 7 and Theorem 6 negative, below a divergence of 0; the K = 0 term restores them."""
    r = np.zeros_like(ORDERS)
    stated = r + math.log(0.5) / (ORDERS - 1)  # Theorem 6, delta_hat = 0, m = 0.5
    assert np.all(stated < 0)
    assert np.all(poisson_rdp(ORDERS, r, 0.5) == pytest.approx(0.0, abs=1e-12))
    assert np.all(lemma7_rdp(ORDERS, r, Binomial(1, 0.1)) == pytest.approx(0.0, abs=1e-12))


@pytest.mark.parametrize(
    "law",
    [Poisson(0.05), Poisson(0.5), Poisson(0.99), Poisson(1.0), Poisson(2.5), Poisson(20.0)]
    + [
        Binomial(1, 0.1),
        Binomial(4, 0.3),
        # reason: 8 CPU s for this law alone; the other nine run by default
        pytest.param(FinitePmf({0: 0.8, 3: 0.2}), marks=pytest.mark.slow),
        FinitePmf({0: 0.5, 1: 0.5}),
    ],
)
def test_generic_rdp_is_above_the_exact_winner_rdp(law):
    """Finite bases, where the winner's RDP curve is exact: the generic curve is never below it
    (before: up to 230 below for Binomial(1, 0.1), 69 for Poisson(0.5))."""
    rng = np.random.default_rng(7)
    for _ in range(25 if isinstance(law, Poisson) else 3):  # Lemma 7's region sup is slower
        base = _random_finite(rng)
        truth = _winner_rdp(base, law, ORDERS)
        for prof in (None, base_profile(base)):
            curve = (
                poisson_rdp(
                    ORDERS, base.rdp(ORDERS), law.mean, None if prof is None else prof.delta
                )
                if isinstance(law, Poisson)
                else lemma7_rdp(ORDERS, base.rdp(ORDERS), law, prof)
            )
            assert np.all(curve >= truth - 1e-9 * np.maximum(1, truth)), np.max(truth - curve)


@pytest.mark.parametrize("mean", [1.0, 1.5, 4.0, 40.0])
def test_sharpened_theorem6_never_above_theorem6(mean):
    base = GaussianBase(0.7)
    r = base.rdp(ORDERS)
    prof = base_profile(base)
    ours = poisson_rdp(ORDERS, r, mean, prof.delta)
    eps_hat = np.log1p(1 / (ORDERS - 1))
    d = np.minimum(rdp_to_delta(ORDERS, r, eps_hat), prof.delta(eps_hat))
    stated = r + mean * d + math.log(mean) / (ORDERS - 1)
    stated = np.minimum.accumulate(stated[::-1])[::-1]
    assert np.all(ours <= stated + 1e-12)
    assert np.any(ours < stated - 1e-6)  # and strictly tighter somewhere


@pytest.mark.parametrize("mean", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("mu", [0.3, 1.0, 3.0])
def test_poisson_below_one_every_rigorous_bound_is_above_exact(mu, mean):
    base, law = GaussianBase(mu), Poisson(mean)
    for delta in (1e-8, 1e-5, 1e-2):
        truth = exact_epsilon(winner_law(base, law), delta)
        for b in BOUNDS:
            if b.supports(base, law) and b.rigour(base) == "rigorous":
                value = b.epsilon(base, law, delta)
                assert value >= truth - 1e-7, (b.key, delta, value, truth)
    assert bound("generic_rdp").source(base, law, 1e-5).startswith("[PS22] Theorem 6")


@pytest.mark.parametrize(
    "law, table",
    [
        # reason: mpmath over a Poisson law (4 CPU s); the binomial one runs by default
        pytest.param(Poisson(0.05), None, marks=pytest.mark.slow),
        (Binomial(3, 0.1), {0: 0.729, 1: 0.243, 2: 0.027, 3: 0.001}),
    ],
)
def test_exact_curve_with_mass_at_zero_matches_mpmath_at_large_eps(law, table):
    """The lower tails of the winner were G(F(b)) - G(F(a)) with G(0) = P[K = 0] near 1 in
    both terms: 1e-16 of cancellation, times e^eps, made the curve rise with eps (exact at
    delta = 1e-8 was 19.68 for Poisson(0.05), mu = 3, where the truth is 19.12)."""
    mu = 3.0
    winner = winner_law(GaussianBase(mu), law)
    if table is None:
        density = lambda x, s: oracles.poisson_density(x, s, law.mean)
    else:
        density = lambda x, s: oracles.pmf_density(x, s, table)
    for eps in (12.0, 19.5):
        ours = float(privacy_curve(winner, np.array([eps]))[0])
        oracle = max(float(oracles.hockey_stick(density, mu, eps, d)) for d in (0, 1))
        assert ours == pytest.approx(oracle, rel=1e-6), (eps, ours, oracle)
    grid = np.linspace(10, 25, 61)
    assert np.all(np.diff(privacy_curve(winner, grid)) <= 0)


@pytest.mark.parametrize("mu", [0.05, 1.0, 3.0])
def test_exact_equals_eps_b_for_one_run_down_to_the_smallest_deltas(mu):
    """K = 1: the winner is the base, so `exact` must equal eps_B at every delta (at delta
    1e-300 it was 48.0 against 37.45 for mu = 1; at delta 0 it was 38.99 for inf)."""
    base = GaussianBase(mu)
    w = winner_law(base, Point(1))
    deltas = np.array([1e-5, 1e-100, 1e-250, 1e-300, 1e-320])
    ours = exact_epsilon(w, deltas)
    assert np.allclose(ours, [base.epsilon(d) for d in deltas], rtol=1e-9, atol=1e-9)
    assert exact_epsilon(w, 0.0) == math.inf and base.epsilon(0.0) == math.inf


def test_tnb_with_nu_one_is_the_point_mass_at_one():
    for eta in (-0.5, 0.0, 1.0, 4.0):
        law = TruncatedNegativeBinomial(eta, 1.0)
        assert law.mean == 1.0 and law.p_zero == 0.0
        assert np.array_equal(law.pmf([0, 1, 2]), [0.0, 1.0, 0.0])
        z = np.array([0.0, 0.3, 1.0])
        assert np.array_equal(law.pgf(z), Point(1).pgf(z))
        assert np.all(law.sample(100, np.random.default_rng(0)) == 1)
        # the continuous limit: nu -> 1 gives the same law
        near = TruncatedNegativeBinomial(eta, 1 - 1e-9)
        assert near.mean == pytest.approx(1.0, abs=1e-8)
        assert near.pgf(0.3) == pytest.approx(0.3, abs=1e-8)
    gauss, law = GaussianBase(0.9), TruncatedNegativeBinomial(0.5, 1.0)
    eps_b = gauss.epsilon(1e-5)
    assert exact_epsilon(winner_law(gauss, law), 1e-5) == pytest.approx(eps_b, abs=1e-7)
    for b in BOUNDS:
        if b.supports(gauss, law):
            assert b.epsilon(gauss, law, 1e-5) >= eps_b - 1e-7, b.key
    # the generic and profile bounds reduce to the base's own: no price for K = 1
    assert bound("profile").epsilon(gauss, law, 1e-5) == pytest.approx(eps_b, rel=1e-6)
    fin = FiniteOutputBase.example1()
    assert bound("generic_rdp").epsilon(fin, law, 0.0) == pytest.approx(fin.pure_epsilon)


def _dpa_event(pair):
    return pair.event if isinstance(pair, DpsgdBase) else dpa.GaussianDpEvent(1.0 / pair.mu)


def _random_settings(n: int):
    rng = np.random.default_rng(19)
    out = []
    for i in range(n):
        if i % 3 == 2:
            pair = DpsgdBase(
                float(rng.uniform(0.7, 3.0)),
                int(rng.integers(5, 60)),
                float(rng.uniform(0.02, 0.5)),
            )
        else:
            pair = GaussianBase(float(np.exp(rng.uniform(np.log(0.05), np.log(3.0)))))
        if i % 2:
            law = Poisson(float(np.exp(rng.uniform(0, np.log(200)))))
            shape = math.inf
        else:
            law = TruncatedNegativeBinomial(
                float(rng.choice([0.0, 0.5, 1.0, 2.0, rng.uniform(0, 5)])),
                float(np.exp(rng.uniform(np.log(1e-4), np.log(0.5)))),
            )
            shape = law.eta
        delta = float(10 ** rng.uniform(-10, -3))
        out.append((pair, law, shape, delta))
    return out


@pytest.mark.parametrize(
    "pair, law, shape, delta",
    # reason: 30 settings are 6 CPU s; the first 6 by default (both bases, both laws, DP-SGD
    # with each law), the other 24 slow
    [
        s if i < 6 else pytest.param(*s, marks=pytest.mark.slow)
        for i, s in enumerate(_random_settings(30))
    ],
)
def test_generic_never_looser_than_dp_accountings_repeat_and_select(pair, law, shape, delta):
    """30 random settings (Gaussian and DP-SGD bases; TNB and Poisson laws; delta in
    [1e-10, 1e-3]; 6 by default) against dp_accounting's RdpAccountant with its default
    orders."""
    event = dpa.dp_event.RepeatAndSelectDpEvent(_dpa_event(pair), law.mean, shape)
    theirs = dpa.rdp.RdpAccountant().compose(event).get_epsilon(delta)
    ours = bound("generic_rdp").epsilon(pair, law, delta)
    assert ours <= theirs * (1 + 1e-12) + 1e-12, (ours, theirs)


def test_conversion_never_looser_than_dp_accountings():
    """rdp_to_epsilon over the same orders against dp_accounting's compute_epsilon (with its
    KL shortcut to eps = 0), on random RDP curves."""
    rng = np.random.default_rng(3)
    orders = np.asarray(DPA_DEFAULT, dtype=float)
    for _ in range(200):
        curve = rng.uniform(0, 1) * orders ** rng.uniform(0.3, 1.2) * 10 ** rng.uniform(-6, 0)
        delta = float(10 ** rng.uniform(-12, -0.05))
        theirs = dpa.rdp.compute_epsilon(orders, curve, delta)[0]
        assert rdp_to_epsilon(orders, curve, delta) <= theirs + 1e-12
    # the shortcut itself: tiny divergences certify eps = 0 at a large delta
    assert rdp_to_epsilon(orders, np.full(orders.shape, 1e-6), 0.01) == 0.0
