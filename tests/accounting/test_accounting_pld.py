"""Optimistic / pessimistic PLDs [DGKKM22]: exactness at the grid, domination, composition."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditsel.accounting.pld import (
    dpsgd_epsilon_interval,
    gaussian_curve,
    laplace_curve,
    optimistic_pld,
    pessimistic_pld,
    subsampled_gaussian_curves,
)
from auditsel.mechanisms import DpsgdBase, gaussian_delta, gaussian_epsilon

CURVES = [
    gaussian_curve(0.3),
    gaussian_curve(1.5),
    laplace_curve(1.0),
    *subsampled_gaussian_curves(0.1, 1.5),
]


@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_masses_sum_to_one_and_are_nonnegative(curve):
    for pld in (pessimistic_pld(curve, 1e-2), optimistic_pld(curve, 1e-2)):
        assert np.all(pld.pmf >= 0)
        assert pld.pmf.sum() + pld.inf_mass == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_pessimistic_exact_at_grid_optimistic_below(curve):
    step = 1e-2
    eps = np.array([0.0, 0.05, 0.2, 0.5, 1.0])  # multiples of the step
    true = curve.at_eps(eps)
    assert np.allclose(pessimistic_pld(curve, step).delta(eps), true, rtol=1e-9, atol=1e-14)
    off = eps + step / 2  # between grid points: above the truth
    assert np.all(pessimistic_pld(curve, step).delta(off) >= curve.at_eps(off) - 1e-14)
    assert np.all(optimistic_pld(curve, step).delta(eps) <= true + 1e-14)


@settings(max_examples=4, deadline=None, derandomize=True)  # 0.25 CPU s an example
@given(mu=st.floats(0.05, 1.0), n=st.integers(2, 200))
def test_composed_gaussian_is_bracketed(mu, n):
    # checked where delta <= 0.5 (the privacy regime); near delta = 1 the float cancellation in
    # h(alpha) ~ 1 - alpha at tiny alpha leaves errors of order 1e-8 (not a domination failure)
    curve = gaussian_curve(mu)
    opt, pess = optimistic_pld(curve, 5e-3).compose(n), pessimistic_pld(curve, 5e-3).compose(n)
    m = mu * math.sqrt(n)
    eps = np.linspace(gaussian_epsilon(m, 0.5), gaussian_epsilon(m, 1e-9), 7)
    true = gaussian_delta(m, eps)
    assert np.all(opt.delta(eps) <= true + 1e-12)
    assert np.all(true <= pess.delta(eps) + 1e-12)
    exact_eps = gaussian_epsilon(mu * math.sqrt(n), 1e-5)
    assert opt.epsilon(1e-5) <= exact_eps + 1e-9 <= pess.epsilon(1e-5) + 2e-9


def test_dpsgd_interval_contains_dp_accounting():
    sigma, n, q = 1.5, 200, 0.05
    lo, hi = dpsgd_epsilon_interval(sigma, n, q, 1e-5)
    ref = DpsgdBase(sigma, n, q).epsilon(1e-5, "pld")  # dp_accounting, also connect-the-dots
    assert lo <= hi
    assert lo <= ref <= hi + 1e-3
    assert hi - lo < 0.02
